/**
 * Gateways as spokes of a v4 hub mesh, on real MariaDB and real mTLS: two hubs, two gateways,
 * clients on both, and raw v4-wire spokes standing in for eventflow v4 processes.
 */
import { describe, expect, it } from 'vitest';
import { createClient, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { HubRouter } from '../src/v4/mesh-router.js';
import type { Hub } from '../src/v4/hub/hub.js';
import { eventually, fence, FENCE_PID, isFence, sleep } from '@eventflow/test-support/wait';
import { isPublishOf, mysqlUnavailable, useHubFixture, type HubFixture } from './hub-support.js';

const fixture = useHubFixture();

interface Mesh {
  f: HubFixture;
  hubs: Hub[];
  gateways: Gateway[];
  client(gateway: Gateway): EventflowClient;
  stop(): Promise<void>;
}

async function startMesh(hubCount = 2, gatewayCount = 2): Promise<Mesh> {
  const f = await fixture.setup();
  const hubs: Hub[] = [];
  for (let i = 0; i < hubCount; i++) hubs.push(await f.startHub());
  const gateways: Gateway[] = [];
  const clients: EventflowClient[] = [];
  for (let i = 0; i < gatewayCount; i++) {
    gateways.push(
      await startGateway({
        ...f.env(),
        EVENTFLOW_PORT: 0,
        EVENTFLOW_STORE: 'mysql',
        EVENTFLOW_ROUTER: 'hubs',
        EVENTFLOW_MESH_POLL_MS: 200,
        EVENTFLOW_LOG_LEVEL: 'silent',
      }),
    );
  }
  // A gateway is part of the mesh once it holds a connection to every hub.
  for (const gateway of gateways) {
    const router = gateway.router as HubRouter;
    await eventually(() => hubs.every((hub) => router.connected.includes(hub.id)), 10_000, 'gateway connected to every hub');
  }
  return {
    f,
    hubs,
    gateways,
    client(gateway) {
      const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
      clients.push(client);
      return client;
    },
    async stop() {
      await Promise.allSettled(clients.map((client) => client.close()));
      await Promise.allSettled(gateways.map((gateway) => gateway.close()));
    },
  };
}

/** Waits until every hub holds a subscription of every gateway for (domain, name). */
async function subscribedEverywhere(mesh: Mesh, domain: string, name: string, gateways = mesh.gateways): Promise<void> {
  await eventually(
    () => mesh.hubs.every((hub) => gateways.every((gateway) => hub.subscriptions().some((s) => s.client === gateway.id && s.domain === domain && s.name === name))),
    10_000,
    `subscriptions to ${domain}/${name} at every hub`,
  );
}

describe.skipIf(mysqlUnavailable !== undefined)('gateways in a v4 hub mesh', () => {
  it('a client on gateway A receives what a client on gateway B publishes', async () => {
    const mesh = await startMesh();
    try {
      const [a, b] = mesh.gateways as [Gateway, Gateway];
      const seen: StoredEvent[] = [];
      let fenced = false;
      await mesh.client(a).subscribe('orders', '*', (event) => void (isFence(event) ? (fenced = true) : seen.push(event)));
      await subscribedEverywhere(mesh, 'orders', '*', [a]);
      const publisher = mesh.client(b);
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await publisher.publish({ domain: 'orders', name: 'placed', pid: `p${i}`, data: { i } }));
      await eventually(() => seen.length === 20, 10_000, 'cross-gateway events');
      // A marker from the same publisher: gateway a reads the domain in position order, so any
      // duplicate of the 20 would have reached `seen` before it.
      await fence(() => publisher.publish({ domain: 'orders', name: 'placed', pid: `${FENCE_PID}1` }), () => fenced, 10_000);
      expect(seen.map((event) => event.id)).toEqual(ids);
      expect(seen[3]?.data).toEqual({ i: 3 });
    } finally {
      await mesh.stop();
    }
  });

  it('competing consumers on both gateways: every event is handled exactly once', async () => {
    const mesh = await startMesh();
    try {
      const [a, b] = mesh.gateways as [Gateway, Gateway];
      const handled = new Map<string, number>();
      const count = async (event: StoredEvent): Promise<void> => void handled.set(event.id, (handled.get(event.id) ?? 0) + 1);
      const consumers = [mesh.client(a), mesh.client(b)];
      await consumers[0]!.consume('jobs', 'run', count);
      await consumers[1]!.consume('jobs', 'run', count);
      await subscribedEverywhere(mesh, 'jobs', 'run');
      const publisher = mesh.client(a);
      const ids = await Promise.all(Array.from({ length: 100 }, (_, i) => publisher.publish({ domain: 'jobs', name: 'run', pid: `j${i}` })));
      // On MariaDB each delivery is a few commits (the ledger): generous for a loaded machine (the test's
      // own timeout is raised to match), a fence not a sleep.
      await eventually(() => handled.size === 100, 60_000, 'every job handled');
      // A round trip on each consumer's connection: every delivery sent before has arrived.
      await fence(() => Promise.all(consumers.map((client) => client.readEventlog('jobs', 'j0'))));
      expect([...handled.values()].every((n) => n === 1)).toBe(true);
      expect(new Set(ids)).toEqual(new Set(handled.keys()));
      // Settles are sent after their handler resolves and group-committed: the last ones may still be
      // on their way when the fence returns, so their outcomes are waited for (and never more than 100).
      const successes = async (): Promise<number> => Number((await mesh.f.db.query<{ n: number }>('SELECT COUNT(*) AS n FROM event_published WHERE success IS NOT NULL'))[0]?.n);
      await eventually(async () => (await successes()) === 100, 10_000, 'every outcome stored');
      expect(await successes()).toBe(100);
    } finally {
      await mesh.stop();
    }
  }, 90_000);

  it('a scheduled event fires once, and reaches subscribers on both gateways once each', async () => {
    const mesh = await startMesh();
    try {
      const [a, b] = mesh.gateways as [Gateway, Gateway];
      const seenA: string[] = [];
      const seenB: string[] = [];
      await mesh.client(a).subscribe('timers', 'tick', (event) => seenA.push(event.id));
      await mesh.client(b).subscribe('timers', 'tick', (event) => seenB.push(event.id));
      await subscribedEverywhere(mesh, 'timers', 'tick');
      const id = await mesh.client(a).schedule(Date.now() + 1_200, { domain: 'timers', name: 'tick', pid: 't' });
      await eventually(() => seenA.length === 1 && seenB.length === 1, 10_000, 'fired on both');
      // Time is what is tested: the other gateway's scheduler timer runs out too, and fires nothing.
      await sleep(1_500);
      expect(seenA).toEqual([id]);
      expect(seenB).toEqual([id]);
      const [row] = await mesh.f.db.query<{ executed: unknown }>('SELECT executed FROM event_scheduled WHERE event_id = ?', [id]);
      expect(row?.executed).not.toBeNull();
    } finally {
      await mesh.stop();
    }
  });

  it('a hub killed and restarted: gateways reconnect, and nothing published afterwards is lost', async () => {
    const mesh = await startMesh(1, 2);
    try {
      const [a, b] = mesh.gateways as [Gateway, Gateway];
      const seen: string[] = [];
      await mesh.client(a).subscribe('orders', 'placed', (event) => seen.push(event.id));
      await subscribedEverywhere(mesh, 'orders', 'placed', [a]);
      const [first] = mesh.hubs as [Hub];
      await first.destroy();
      const second = await mesh.f.startHub();
      mesh.hubs = [second];
      for (const gateway of mesh.gateways) {
        const router = gateway.router as HubRouter;
        await eventually(() => router.connected.includes(second.id), 10_000, 'reconnected to the new hub');
      }
      await subscribedEverywhere(mesh, 'orders', 'placed', [a]);
      const publisher = mesh.client(b);
      const ids: string[] = [];
      for (let i = 0; i < 30; i++) ids.push(await publisher.publish({ domain: 'orders', name: 'placed', pid: `after-${i}` }));
      await eventually(() => seen.length >= 30, 10_000, 'events after the restart');
      expect(seen).toEqual(ids);
    } finally {
      await mesh.stop();
    }
  });

  it('v4 spokes receive what our clients publish, and our clients receive what v4 spokes publish', async () => {
    const mesh = await startMesh(1, 1);
    try {
      const [gateway] = mesh.gateways as [Gateway];
      const [hub] = mesh.hubs as [Hub];
      const spoke = await mesh.f.spoke(hub);
      await mesh.f.subscribe(hub, spoke, 'orders', '*');
      const client = mesh.client(gateway);
      const id = await client.publish({ domain: 'orders', name: 'placed', pid: 'p1', data: { from: 'gateway' } });
      const record = await spoke.waitFor(isPublishOf(id), 10_000);
      expect(record).toEqual(['publish', 'orders', id, 'placed', 'p1']);

      const seen: StoredEvent[] = [];
      await client.subscribe('billing', 'charged', (event) => seen.push(event));
      await subscribedEverywhere(mesh, 'billing', 'charged');
      const v4 = await mesh.f.insertPublished({ domain: 'billing', name: 'charged', pid: 'b1' });
      spoke.send('publish', v4.domain, v4.id, v4.name, v4.pid);
      await eventually(() => seen.length === 1, 10_000, 'an event published by a v4 spoke');
      expect(seen[0]).toMatchObject({ id: v4.id, domain: 'billing', name: 'charged', pid: 'b1', data: { n: 1 } });
      expect(seen[0]?.position).toBeGreaterThan(0);
    } finally {
      await mesh.stop();
    }
  });
});
