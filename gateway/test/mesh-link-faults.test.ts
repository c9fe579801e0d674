/**
 * A gateway's link to a hub breaking while the rest of the mesh goes on (real MariaDB, our hub, real mTLS):
 * the gateway reaches the hub through a TCP proxy (the hub advertises the proxy's port in the `hub` table) that
 * can partition or cut the link, while a v4-wire spoke, connected to the hub directly, keeps publishing.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createClient, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { HubRouter } from '../src/v4/mesh-router.js';
import type { Hub } from '../src/v4/hub/hub.js';
import { eventually } from '@eventflow/test-support/wait';
import { startPartitionProxy, type PartitionProxy } from './partition-proxy.js';
import { MysqlStore } from '../src/store/mysql/mysql.js';
import { createLogger } from '../src/log.js';
import { isPublishOf, mysqlUnavailable, until, useHubFixture, type HubFixture } from './hub-support.js';

const fixture = useHubFixture();

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address !== 'object') throw new Error('no port');
  return address.port;
}

interface Setup {
  f: HubFixture;
  hub: Hub;
  proxy: PartitionProxy;
  gateway: Gateway;
  client: EventflowClient;
  stop(): Promise<void>;
}

/** Our hub, advertised at a proxy in front of it; one gateway that reaches it through the proxy. */
async function start(hubEnv: Record<string, string | number> = {}): Promise<Setup> {
  const f = await fixture.setup();
  const port = await freePort();
  const proxy = await startPartitionProxy(port);
  const hub = await f.startHub({ EVENTFLOW_HUB_INTERNAL_PORT: port, EVENTFLOW_HUB_EXTERNAL_PORT: proxy.port, ...hubEnv });
  const gateway = await startGateway({ ...f.env(), EVENTFLOW_PORT: 0, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 200, EVENTFLOW_LOG_LEVEL: 'silent' });
  const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
  await eventually(() => (gateway.router as HubRouter).connected.includes(hub.id), 10_000, 'the gateway connected to the hub');
  return {
    f,
    hub,
    proxy,
    gateway,
    client,
    async stop() {
      await client.close().catch(() => undefined);
      await gateway.close();
      await proxy.close();
    },
  };
}

const holds = (hub: Hub, gateway: Gateway, domain: string, name: string): boolean =>
  hub.subscriptions().some((s) => s.client === gateway.id && s.domain === domain && s.name === name);

/** Cuts the gateway's link and keeps it from coming back (new connections through the proxy carry nothing) until heal(). */
async function disconnect({ hub, proxy, gateway }: Setup): Promise<void> {
  proxy.partition();
  proxy.cut();
  await eventually(() => !hub.clients().includes(gateway.id) && !(gateway.router as HubRouter).connected.includes(hub.id), 10_000, 'the link cut at both ends');
}

describe.skipIf(mysqlUnavailable !== undefined)('a gateway whose link to the hub breaks', () => {
  it('an outcome a v4 spoke published while the link was down answers the wait once the link is back', async () => {
    const setup = await start();
    try {
      const { f, hub, proxy, gateway, client } = setup;
      const spoke = await f.spoke(hub);
      const answered = client.wait('jobs', 'job-1', ['success', 'failed'], 25_000);
      answered.catch(() => undefined);
      await eventually(() => holds(hub, gateway, 'jobs', 'success'), 10_000, "the wait's interest at the hub");

      await disconnect(setup);
      const outcome = await f.insertPublished({ domain: 'jobs', name: 'success', pid: 'job-1' });
      spoke.send('publish', outcome.domain, outcome.id, outcome.name, outcome.pid);
      // The hub routed it to nobody: marked orphan (the gateway's subscription went with its socket).
      await until(() => f.published(outcome.id), (row) => row.orphan !== null, 5_000, 'the outcome routed while the link was down');

      proxy.heal();
      await eventually(() => holds(hub, gateway, 'jobs', 'success'), 15_000, 'the interest replayed after the reconnect');
      // Nothing else is published in the domain: only a read of the store after the reconnect can answer the wait.
      const event = await Promise.race([answered, new Promise<undefined>((resolve) => setTimeout(resolve, 5_000, undefined))]);
      expect(event?.id).toBe(outcome.id);
    } finally {
      await setup.stop();
    }
  }, 30_000);

  it('a hub that stops answering (a link that carries no bytes, a stopped process) is dropped: /readyz says so, and the link comes back when the hub does', async () => {
    const setup = await start();
    try {
      const { hub, proxy, gateway } = setup;
      const router = gateway.router as HubRouter;
      const readyz = async (): Promise<{ status: number; body: { checks?: { router?: { reason?: string } } } }> => {
        const response = await fetch(new URL('/readyz', gateway.url.replace(/^ws/, 'http')));
        return { status: response.status, body: (await response.json()) as { checks?: { router?: { reason?: string } } } };
      };
      expect((await readyz()).status).toBe(200);
      // Our hub has answered the gateway's first ping: the link is watched from then on.
      await eventually(() => router.watched.includes(hub.id), 10_000, 'the hub answering pings');

      proxy.partition();
      // Nothing is closed: only silence tells. Within a ping timeout and an interval (HUB_PING_*).
      await eventually(() => !router.connected.includes(hub.id), 15_000, 'the silent hub dropped');
      const { status, body } = await readyz();
      expect(status).toBe(503);
      expect(body.checks?.router?.reason).toBe('no hub connection');

      proxy.heal();
      await eventually(() => router.connected.includes(hub.id), 15_000, 'reconnected once the hub answers again');
      expect((await readyz()).status).toBe(200);
    } finally {
      await setup.stop();
    }
  }, 40_000);

  it("a job published into a link that then broke reaches the v4 spokes once the link is back (the hub never saw it: v4's routing claim still free)", async () => {
    const setup = await start();
    try {
      const { f, hub, proxy, gateway, client } = setup;
      const spoke = await f.spoke(hub);
      await f.subscribe(hub, spoke, 'jobs', 'run');
      // The link stops carrying bytes; the gateway, not knowing yet, writes the job's `publish` into it.
      proxy.partition();
      const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'job-1' });
      // Then it breaks for good: what was in flight is gone, as with a real partition's reset.
      proxy.cut();
      await eventually(() => !(gateway.router as HubRouter).connected.includes(hub.id), 15_000, 'the link down at the gateway');
      expect((await f.published(id)).consumed_hub).toBeNull();

      proxy.heal();
      await eventually(() => (gateway.router as HubRouter).connected.includes(hub.id), 15_000, 'the link back');
      // Only the gateway's own publish can reach the spoke: nothing else is published.
      const record = await spoke.waitFor(isPublishOf(id), 10_000);
      expect(record).toEqual(['publish', 'jobs', id, 'run', 'job-1']);
      await eventually(async () => (await f.published(id)).hub === hub.id, 5_000, "the hub's routing claim");
    } finally {
      await setup.stop();
    }
  }, 40_000);

  it('a hub that stops reading, unwatched by pings (as a stopped v4.8 hub is), is dropped once the link holds too much unsent, not kept in memory for good', async () => {
    const f = await fixture.setup();
    const port = await freePort();
    const proxy = await startPartitionProxy(port);
    const hub = await f.startHub({ EVENTFLOW_HUB_INTERNAL_PORT: port, EVENTFLOW_HUB_EXTERNAL_PORT: proxy.port });
    const store = new MysqlStore(f.db.options);
    // Pings as good as off: only the bound on what the link holds unsent can tell.
    const router = new HubRouter({ store, pool: f.pool, certificates: f.spokeIdentity('EVENTFLOW-GATEWAY'), log: createLogger('silent'), pingInterval: 3_600_000, maxBufferedBytes: 256 * 1024 });
    try {
      await router.start({ route: async () => undefined, routeAnnounced: async () => undefined });
      await eventually(() => router.connected.includes(hub.id), 10_000, 'connected to the hub');
      proxy.stall();
      const long = 'x'.repeat(60);
      let sent = 0;
      // Far more than the kernel's buffers on both sides of the proxy hold, in turns so the socket can hand them over.
      while (router.connected.includes(hub.id) && sent < 200_000) {
        for (let i = 0; i < 1_000; i++, sent++) {
          await router.publish({ id: `event-${sent}-${long}`, domain: `domain-${long}`, name: `name-${long}`, pid: 'p', data: null, timestamp: '', rid: null, position: sent + 1 });
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(router.connected).not.toContain(hub.id);
      proxy.heal();
      await eventually(() => router.connected.includes(hub.id), 15_000, 'dialled again once the hub reads');
    } finally {
      await router.close();
      await store.close();
      await proxy.close();
    }
  }, 30_000);

  it('publishes past the queue kept for the first hub connection reach the v4 spokes once it is made', async () => {
    const f = await fixture.setup();
    const port = await freePort();
    const proxy = await startPartitionProxy(port);
    const hub = await f.startHub({ EVENTFLOW_HUB_INTERNAL_PORT: port, EVENTFLOW_HUB_EXTERNAL_PORT: proxy.port });
    const spoke = await f.spoke(hub);
    await f.subscribe(hub, spoke, 'jobs', 'run');
    const store = new MysqlStore(f.db.options);
    const publisher = 'TEST-GATEWAY.EVENTFLOW-GATEWAY';
    // A queue of two: the first three of five publishes are dropped from it.
    const router = new HubRouter({ store, pool: f.pool, certificates: f.spokeIdentity('EVENTFLOW-GATEWAY'), log: createLogger('silent'), maxPending: 2, publisher });
    proxy.partition(); // no hub connection can be made yet
    try {
      await router.start({ route: async () => undefined, routeAnnounced: async () => undefined });
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const row = await f.insertPublished({ domain: 'jobs', name: 'run', pid: `job-${i}` }, publisher);
        ids.push(row.id);
        await router.publish({ id: row.id, domain: 'jobs', name: 'run', pid: row.pid, data: null, timestamp: '', rid: null, position: i + 1 });
      }
      expect(router.connected).toEqual([]);
      proxy.heal();
      for (const id of ids) await spoke.waitFor(isPublishOf(id), 15_000);
    } finally {
      await router.close();
      await store.close();
      await proxy.close();
    }
  }, 30_000);

  it('a second hub in the hub table that the gateway cannot reach: /readyz degraded (still 200) until it connects', async () => {
    const setup = await start();
    const hubPort = await freePort();
    const gate = await startPartitionProxy(hubPort);
    try {
      const { f, gateway } = setup;
      const readyz = async (): Promise<{ status: number; body: { status?: string; checks?: { router?: { degraded?: boolean; hubs?: number; reason?: string } } } }> => {
        const response = await fetch(new URL('/readyz', gateway.url.replace(/^ws/, 'http')));
        return { status: response.status, body: (await response.json()) as never };
      };
      expect((await readyz()).body.checks?.router).toEqual({ kind: 'hubs', ready: true, hubs: 1 });
      // Advertised at a proxy that carries nothing: listed, never ready. Before, /readyz said ready as with both.
      gate.partition();
      const second = await f.startHub({ EVENTFLOW_HUB_INTERNAL_PORT: hubPort, EVENTFLOW_HUB_EXTERNAL_PORT: gate.port });
      await eventually(async () => (await readyz()).body.checks?.router?.degraded === true, 10_000, '/readyz degraded');
      expect(await readyz()).toMatchObject({ status: 200, body: { status: 'degraded', checks: { router: { kind: 'hubs', ready: true, hubs: 1, degraded: true, reason: 'no connection to 1 of the 2 hubs in the hub table' } } } });
      gate.heal();
      await eventually(() => (gateway.router as HubRouter).connected.includes(second.id), 15_000, 'connected to the second hub');
      expect((await readyz()).body.checks?.router).toEqual({ kind: 'hubs', ready: true, hubs: 2 });
    } finally {
      await gate.close();
      await setup.stop();
    }
  }, 40_000);

  it('a job published into the link to a hub that then died reaches the v4 spokes of the hub that replaced it (a new id)', async () => {
    const setup = await start();
    try {
      const { f, hub, proxy, gateway, client } = setup;
      proxy.partition();
      const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'job-1' });
      // The hub goes with what was in flight to it (marked quit, as the next hub to start marks a killed one).
      await hub.destroy();
      proxy.cut();
      await eventually(() => (gateway.router as HubRouter).connected.length === 0, 15_000, 'the link down at the gateway');
      expect((await f.published(id)).consumed_hub).toBeNull();

      // The new hub reachable by the gateway only once its spoke has subscribed: a record it routed before
      // then went to nobody (v4 routes once), which the gateway, finding the hub within its 200 ms poll, sent
      // now and then on a loaded machine before the spoke's subscription was there.
      const port = await freePort();
      const gate = await startPartitionProxy(port);
      gate.partition();
      try {
        const replacement = await f.startHub({ EVENTFLOW_HUB_INTERNAL_PORT: port, EVENTFLOW_HUB_EXTERNAL_PORT: gate.port });
        const spoke = await f.spoke(replacement);
        await f.subscribe(replacement, spoke, 'jobs', 'run');
        gate.heal();
        await eventually(() => (gateway.router as HubRouter).connected.includes(replacement.id), 15_000, 'connected to the new hub');
        const record = await spoke.waitFor(isPublishOf(id), 10_000);
        expect(record).toEqual(['publish', 'jobs', id, 'run', 'job-1']);
        // The hub routes while its claim commits (claimForRoutingEarly): the row may say so a moment after the spoke has the record.
        await eventually(async () => (await f.published(id)).hub === replacement.id, 5_000, "the new hub's routing claim");
      } finally {
        await gate.close();
      }
    } finally {
      await setup.stop();
    }
  }, 40_000);
});
