/**
 * Gateways on one MariaDB database take over each other's consume leases and fire each other's
 * scheduled events. With each gateway's own clock, one whose clock was ahead took leases over early
 * (their events ran beside the consumers holding them) and fired scheduled events early; both now go
 * by the database server's clock, and a clock off it is logged. The clock is shifted with a preload
 * in one gateway process only.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createClient, type EventflowClient } from '@eventflow/core';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { natsUnavailable, natsUrl, uniqueSubjectPrefix } from '@eventflow/test-support/nats';
import { eventually } from '@eventflow/test-support/wait';
import { freePort, kill9, startGatewayProcess, type SpawnedProcess } from '@eventflow/test-support/gateway-process';
import { useChaosLifecycle } from './support.js';

const databases = useTestDatabases();
const { temp, clients } = useChaosLifecycle();
const unavailable = mysqlUnavailable ?? natsUnavailable;

const LEASE = 4_000;
const AHEAD = 3_000;

/** Node's option that makes the process's clock (`Date.now()`, `new Date()`) `ms` ahead. */
const clockAhead = (ms: number): string =>
  `--import=data:text/javascript,${encodeURIComponent(
    `const Real = Date; globalThis.Date = class extends Real { constructor(...args) { if (args.length === 0) super(Real.now() + ${ms}); else super(...args); } static now() { return Real.now() + ${ms}; } };`,
  )}`;

const client = (url: string): EventflowClient => {
  const c = createClient(url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
  clients.push(c);
  return c;
};

/** Gateway A in step and gateway C `AHEAD` ms ahead, on one fresh database over NATS. */
async function startPair(): Promise<{ portA: number; portC: number; inStep: SpawnedProcess; ahead: SpawnedProcess }> {
  const db = await databases.fresh();
  const env = { ...mysqlGatewayEnv(db.options), EVENTFLOW_ROUTER: 'nats', EVENTFLOW_NATS_SERVERS: natsUrl, EVENTFLOW_NATS_SUBJECT_PREFIX: uniqueSubjectPrefix(), EVENTFLOW_CONSUME_LEASE_MS: LEASE };
  const [portA, portC] = [await freePort(), await freePort()];
  const inStep = await startGatewayProcess(portA, join(temp.dir, `a${portA}.db`), env);
  databases.onCleanup(() => kill9(inStep.proc));
  const ahead = await startGatewayProcess(portC, join(temp.dir, `c${portC}.db`), { ...env, NODE_OPTIONS: clockAhead(AHEAD) });
  databases.onCleanup(() => kill9(ahead.proc));
  return { portA, portC, inStep, ahead };
}

describe.skipIf(unavailable !== undefined)("a gateway whose clock is ahead of the database's", () => {
  it("takes another gateway's lease over only once it has run out, and says that its clock is off", async () => {
    const { portA, portC, inStep, ahead } = await startPair();

    // A's member holds the job and never settles it.
    let heldAt = 0;
    let takenAt = 0;
    const onA = client(`ws://127.0.0.1:${portA}/`);
    await onA.consume('skew', 'job', () => ((heldAt = Date.now()), new Promise<void>(() => undefined)), { group: 'workers', concurrency: 1 });
    await onA.publish({ domain: 'skew', name: 'job', pid: 'p' });
    await eventually(() => heldAt > 0, 10_000, "A's member to hold the job");
    await client(`ws://127.0.0.1:${portC}/`).consume('skew', 'job', async () => void (takenAt = Date.now()), { group: 'workers', concurrency: 1 });
    await eventually(() => takenAt > 0, 3 * LEASE, 'the job taken over');
    console.info(`a gateway ${AHEAD} ms ahead took a ${LEASE} ms lease over after ${takenAt - heldAt} ms`);
    // Before, after LEASE - AHEAD (about 1 s): the job ran on both gateways at once.
    expect(takenAt - heldAt).toBeGreaterThanOrEqual(LEASE - 250);

    const line = ahead.output().split('\n').find((text) => text.includes('clock is')) ?? '';
    expect(line).toMatch(/clock is (2\d{3}|3\d{3}) ms ahead of the database server's/);
    expect(line).toContain('NTP');
    expect(inStep.output()).not.toContain('clock is');
  }, 60_000);

  it('fires an event scheduled through another gateway when it is due, not that much early', async () => {
    const { portA } = await startPair();
    const onA = client(`ws://127.0.0.1:${portA}/`);
    let arrived = 0;
    await onA.subscribe('skew', 'tick', () => void (arrived = Date.now()));
    const due = Date.now() + 2_000;
    // A tells C over NATS; C's timer is set by its clock against the due time.
    await onA.schedule(due, { domain: 'skew', name: 'tick', pid: 't' });
    await eventually(() => arrived > 0, 10_000, 'the scheduled event');
    console.info(`a scheduled event arrived ${arrived - due} ms after it was due`);
    // Before, C fired it as soon as it heard of it: AHEAD ms early, here at once.
    expect(arrived - due).toBeGreaterThanOrEqual(-250);
  }, 60_000);
});
