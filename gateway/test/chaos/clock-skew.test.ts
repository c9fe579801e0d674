/**
 * Gateways on one MariaDB database compare each other's lease deadlines by their own clocks: a
 * gateway whose clock is ahead takes leases over early and runs their events beside the consumers
 * holding them. The gateway cannot fix an operator's clock; it says so at start (and every minute)
 * when its clock is off the database server's. The clock is shifted with a preload in the gateway
 * process only.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { natsUnavailable, natsUrl, uniqueSubjectPrefix } from '@eventflow/test-support/nats';
import { eventually } from '@eventflow/test-support/wait';
import { freePort, kill9, startGatewayProcess } from '@eventflow/test-support/gateway-process';
import { useChaosLifecycle } from './support.js';

const databases = useTestDatabases();
const { temp } = useChaosLifecycle();
const unavailable = mysqlUnavailable ?? natsUnavailable;

/** Node's option that makes Date.now() in the process `ms` ahead. */
const clockAhead = (ms: number): string => `--import=data:text/javascript,${encodeURIComponent(`const now = Date.now; Date.now = () => now() + ${ms};`)}`;

describe.skipIf(unavailable !== undefined)("a gateway's clock off the database's", () => {
  it('is logged at start, with how far and what it does to leases; a gateway in step logs nothing of the kind', async () => {
    const db = await databases.fresh();
    const env = { ...mysqlGatewayEnv(db.options), EVENTFLOW_ROUTER: 'nats', EVENTFLOW_NATS_SERVERS: natsUrl, EVENTFLOW_NATS_SUBJECT_PREFIX: uniqueSubjectPrefix(), EVENTFLOW_CONSUME_LEASE_MS: 10_000 };
    const inStep = await startGatewayProcess(await freePort(), join(temp.dir, 'a.db'), env);
    databases.onCleanup(() => kill9(inStep.proc));
    const ahead = await startGatewayProcess(await freePort(), join(temp.dir, 'c.db'), { ...env, NODE_OPTIONS: clockAhead(6_000) });
    databases.onCleanup(() => kill9(ahead.proc));
    await eventually(() => ahead.output().includes('clock is'), 10_000, 'the warning');
    const line = ahead.output().split('\n').find((text) => text.includes('clock is')) as string;
    // About 6,000 ms (the round trip's midpoint, a MariaDB clock read to the millisecond).
    expect(line).toMatch(/clock is (5\d{3}|6\d{3}) ms ahead of the database server's/);
    expect(line).toContain("takes over other gateways' leases that much early");
    expect(line).toContain('NTP');
    // The in-step gateway started (and checked) first.
    expect(inStep.output()).not.toContain('clock is');
  }, 60_000);
});
