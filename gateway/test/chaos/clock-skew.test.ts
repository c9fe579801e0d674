/**
 * Gateways on one MariaDB database take over each other's consume leases. With each gateway's own
 * clock, one whose clock was ahead took leases over early and ran their events beside the consumers
 * holding them; they now go by the database server's clock, and a clock off it is logged. The clock
 * is shifted with a preload in one gateway process only.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createClient, type EventflowClient } from '@eventflow/core';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { natsUnavailable, natsUrl, uniqueSubjectPrefix } from '@eventflow/test-support/nats';
import { eventually } from '@eventflow/test-support/wait';
import { freePort, kill9, startGatewayProcess } from '@eventflow/test-support/gateway-process';
import { useChaosLifecycle } from './support.js';

const databases = useTestDatabases();
const { temp, clients } = useChaosLifecycle();
const unavailable = mysqlUnavailable ?? natsUnavailable;

const LEASE = 4_000;
const AHEAD = 3_000;

/** Node's option that makes Date.now() in the process `ms` ahead. */
const clockAhead = (ms: number): string => `--import=data:text/javascript,${encodeURIComponent(`const now = Date.now; Date.now = () => now() + ${ms};`)}`;

const client = (url: string): EventflowClient => {
  const c = createClient(url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
  clients.push(c);
  return c;
};

describe.skipIf(unavailable !== undefined)("a gateway whose clock is ahead of the database's", () => {
  it("takes another gateway's lease over only once it has run out, and says that its clock is off", async () => {
    const db = await databases.fresh();
    const env = { ...mysqlGatewayEnv(db.options), EVENTFLOW_ROUTER: 'nats', EVENTFLOW_NATS_SERVERS: natsUrl, EVENTFLOW_NATS_SUBJECT_PREFIX: uniqueSubjectPrefix(), EVENTFLOW_CONSUME_LEASE_MS: LEASE };
    const [portA, portC] = [await freePort(), await freePort()];
    const inStep = await startGatewayProcess(portA, join(temp.dir, 'a.db'), env);
    databases.onCleanup(() => kill9(inStep.proc));
    const ahead = await startGatewayProcess(portC, join(temp.dir, 'c.db'), { ...env, NODE_OPTIONS: clockAhead(AHEAD) });
    databases.onCleanup(() => kill9(ahead.proc));

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
});
