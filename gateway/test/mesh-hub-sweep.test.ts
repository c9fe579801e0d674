/**
 * Our hub's lease sweep (eventflow-v4.md §11 A1) beside a gateway's consumer: a job a gateway's consumer
 * holds under a lease in force is not the sweep's to take back, however long ago its v4 claim was written
 * (the gateway's lease, 30 s by default and extendable, outlives the hub's claim lease). Taken back, the
 * job went out again to every subscriber, and a v4 spoke consuming the same default group claims it (v4's
 * claim is an UPDATE where `consumed_spoke` is NULL) and runs it while the gateway's handler still does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type EventflowClient } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { HubRouter } from '../src/v4/mesh-router.js';
import { eventually, fence } from '@eventflow/test-support/wait';
import { buildOnce, freePort, kill9, killAllChildren, startGatewayProcess } from '@eventflow/test-support/gateway-process';
import { mysqlGatewayEnv } from '@eventflow/test-support/mysql';
import { isPublishOf, mysqlUnavailable, until, useHubFixture } from './hub-support.js';

const fixture = useHubFixture();
// A gateway is killed as a process: the built one (a clean checkout has no gateway/dist yet).
beforeAll(() => buildOnce(), 120_000);
afterAll(() => killAllChildren());

const meshEnv = { EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 200, EVENTFLOW_LOG_LEVEL: 'silent' } as const;

describe.skipIf(mysqlUnavailable !== undefined)("our hub's lease sweep beside a gateway's consumer", () => {
  it('a job under a gateway lease in force is not redelivered, however old its v4 claim; once settled its outcome is the gateway consumer\'s', async () => {
    const f = await fixture.setup();
    // The shortest claim lease: the sweep looks at the job's claim once it is 1 s old.
    const hub = await f.startHub({ EVENTFLOW_HUB_CLAIM_LEASE_MS: 1000 });
    const gateway = await startGateway({ ...f.env(), EVENTFLOW_PORT: 0, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 200, EVENTFLOW_LOG_LEVEL: 'silent' });
    const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
    let release = (): void => undefined;
    try {
      await eventually(() => (gateway.router as HubRouter).connected.includes(hub.id), 10_000, 'the gateway connected to the hub');
      // A v4 spoke of the same default group (it receives what the hub routes to jobs/run).
      const spoke = await f.spoke(hub);
      await f.subscribe(hub, spoke, 'jobs', 'run');
      const released = new Promise<void>((resolve) => (release = resolve));
      const runs: string[] = [];
      await client.consume('jobs', 'run', async (event) => {
        runs.push(event.id);
        await released;
      });
      await eventually(() => hub.subscriptions().some((s) => s.client === gateway.id && s.domain === 'jobs' && s.name === 'run'), 10_000, 'the consumer at the hub');

      const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'job-1' });
      await eventually(() => runs.length === 1, 10_000, 'the job running on the gateway');
      await spoke.waitFor(isPublishOf(id), 5_000);
      // The v4 claim (the gateway's) grows older than the hub's claim lease, plus a sweep interval or two.
      await until(
        async () => Number((await f.db.query<{ n: number }>('SELECT COUNT(*) AS n FROM event_published WHERE event_id = ? AND consumed_spoke < UTC_TIMESTAMP() - INTERVAL 2 SECOND', [id]))[0]?.n),
        (n) => n === 1,
        10_000,
        'the claim older than the lease',
      );
      // One more sweep, after any under way: the job's claim is in its range.
      expect(await hub.sweepStuckClaims()).toBe(0);
      expect(spoke.matching(isPublishOf(id))).toHaveLength(1);
      expect((await f.published(id)).consumer).toBe(gateway.id);

      release();
      await until(() => f.published(id), (row) => row.success !== null, 10_000, 'the outcome');
      const row = await f.published(id);
      expect(row.consumer).toBe(gateway.id);
      expect(row.failed).toBeNull();
      expect(runs).toEqual([id]);
    } finally {
      release();
      await client.close().catch(() => undefined);
      await gateway.close();
    }
  }, 30_000);

  it("a job left by a killed gateway, sent out again by our hub and claimed by a v4 spoke, is the spoke's: another gateway's consumer does not run it too", async () => {
    const f = await fixture.setup();
    const hub = await f.startHub({ EVENTFLOW_HUB_CLAIM_LEASE_MS: 1000 });
    const env = { ...(f.env() as Record<string, string | number>), ...mysqlGatewayEnv(f.db.options), ...meshEnv, EVENTFLOW_LOG_LEVEL: 'warn' };
    const port = await freePort();
    // A short lease: the job's lease runs out soon after its gateway is killed.
    const doomed = await startGatewayProcess(port, '/dev/null', { ...env, EVENTFLOW_CONSUME_LEASE_MS: 2_000 });
    const clients: EventflowClient[] = [];
    const client = (url: string): EventflowClient => {
      const created = createClient(url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
      clients.push(created);
      return created;
    };
    let other: Awaited<ReturnType<typeof startGateway>> | undefined;
    try {
      const spoke = await f.spoke(hub);
      await f.subscribe(hub, spoke, 'jobs', 'run');
      const first = client(`ws://127.0.0.1:${port}/`);
      const running: string[] = [];
      await first.consume('jobs', 'run', async (event) => {
        running.push(event.id);
        await new Promise<never>(() => undefined); // runs until its gateway dies
      });
      const id = await first.publish({ domain: 'jobs', name: 'run', pid: 'job-1' });
      await eventually(() => running.length === 1, 10_000, 'the job running on the first gateway');
      await kill9(doomed.proc);

      // The hub sends the job out again once the dead gateway's lease has run out; the v4 spoke claims it, as v4 does.
      await spoke.waitFor((record) => isPublishOf(id)(record) && spoke.matching(isPublishOf(id)).length > 1, 15_000);
      await f.db.query('UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = ? WHERE event_id = ? AND consumed_spoke IS NULL', [spoke.id, id]);
      expect((await f.published(id)).consumer).toBe(spoke.id);

      // Another gateway's member of the same default group, then a second job after it: its claim reads the queue
      // in order (expired leases first), so the first job, were it claimable, would go out before the second.
      other = await startGateway({ ...env, EVENTFLOW_PORT: 0, EVENTFLOW_STORE: 'mysql', EVENTFLOW_LOG_LEVEL: 'silent' });
      const second = client(other.url);
      const handled: string[] = [];
      await second.consume('jobs', 'run', async (event) => void handled.push(event.id), { concurrency: 1 });
      const next = await second.publish({ domain: 'jobs', name: 'run', pid: 'job-2' });
      await eventually(() => handled.includes(next), 10_000, 'the second job handled');
      await fence(() => second.readEventlog('jobs', 'job-1'));
      expect(handled).toEqual([next]);
      const row = await f.published(id);
      expect(row.consumer).toBe(spoke.id);
      expect(row.success).toBeNull();
    } finally {
      await Promise.allSettled(clients.map((c) => c.close()));
      await other?.close();
      await kill9(doomed.proc);
    }
  }, 40_000);

  it("a job a v4 spoke claimed and never settled, routed by a hub that died since, is sent out again by the hub that replaced it", async () => {
    const f = await fixture.setup();
    const first = await f.startHub({ EVENTFLOW_HUB_CLAIM_LEASE_MS: 1000 });
    const crashing = await f.spoke(first);
    await f.subscribe(first, crashing, 'jobs', 'run');
    const job = await f.insertPublished({ domain: 'jobs', name: 'run', pid: 'job-1' });
    crashing.send('publish', job.domain, job.id, job.name, job.pid);
    await crashing.waitFor(isPublishOf(job.id), 5_000);
    // The spoke claims it, as v4 does, and crashes before its outcome; then the hub goes (marked quit: by its
    // own stop here, by the next hub to start after a kill).
    await f.db.query('UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = ? WHERE event_id = ? AND consumed_spoke IS NULL', [crashing.id, job.id]);
    await crashing.close();
    await first.destroy();

    const second = await f.startHub({ EVENTFLOW_HUB_CLAIM_LEASE_MS: 1000 });
    const worker = await f.spoke(second);
    await f.subscribe(second, worker, 'jobs', 'run');
    const record = await worker.waitFor(isPublishOf(job.id), 10_000);
    expect(record).toEqual(['publish', 'jobs', job.id, 'run', 'job-1']);
    const row = await f.published(job.id);
    expect([row.hub, row.consumer, row.success]).toEqual([second.id, null, null]);
  }, 30_000);

  it("a job a gateway's consumer failed, waiting for its retry delay, is not sent out again by the sweep (a v4 spoke would run it before the delay)", async () => {
    const f = await fixture.setup();
    const hub = await f.startHub({ EVENTFLOW_HUB_CLAIM_LEASE_MS: 1000 });
    const gateway = await startGateway({ ...f.env(), EVENTFLOW_PORT: 0, EVENTFLOW_STORE: 'mysql', ...meshEnv });
    const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
    try {
      await eventually(() => (gateway.router as HubRouter).connected.includes(hub.id), 10_000, 'the gateway connected to the hub');
      const spoke = await f.spoke(hub);
      await f.subscribe(hub, spoke, 'jobs', 'run');
      const runs: string[] = [];
      await client.consume(
        'jobs',
        'run',
        async (event) => {
          runs.push(event.id);
          throw new Error('not yet');
        },
        { retry: { attempts: 3, backoff: 'fixed', delayMs: 20_000 } },
      );
      await eventually(() => hub.subscriptions().some((s) => s.client === gateway.id && s.domain === 'jobs' && s.name === 'run'), 10_000, 'the consumer at the hub');
      const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'job-1' });
      await spoke.waitFor(isPublishOf(id), 5_000);
      // Failed once, released with its retry delay (v4's claim cleared); the routing claim grows older than the hub's lease.
      await until(
        async () => Number((await f.db.query<{ n: number }>(
          `SELECT COUNT(*) AS n FROM event_published p JOIN eventflow_delivery d ON d.event_id = p.event_id AND d.gname = '' AND d.grp = ''
           WHERE p.event_id = ? AND p.consumed_spoke IS NULL AND d.available_at IS NOT NULL AND p.consumed_hub < UTC_TIMESTAMP() - INTERVAL 2 SECOND`,
          [id],
        ))[0]?.n),
        (n) => n === 1,
        10_000,
        'the job waiting for its retry, its routing claim older than the lease',
      );
      expect(await hub.sweepStuckClaims()).toBe(0);
      expect(spoke.matching(isPublishOf(id))).toHaveLength(1);
      expect(runs).toEqual([id]);
    } finally {
      await client.close().catch(() => undefined);
      await gateway.close();
    }
  }, 30_000);
});
