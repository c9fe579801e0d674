/**
 * A gateway sharing a MariaDB database and our v4 hub with v4-wire spokes (raw TestSpokes writing
 * v4's rows, as eventflow v4.8 spokes do): the hub's redelivery of a stuck claim reaches our
 * consumer, and eventlogs written by both read in v4's timestamp order.
 */
import { describe, expect, it } from 'vitest';
import { createClient, generateEventId, type EventflowClient, type JsonObject, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { HubRouter } from '../src/v4/mesh-router.js';
import type { Hub } from '../src/v4/hub/hub.js';
import type { HubEnv } from '../src/v4/hub/config.js';
import { eventually, fence } from '@eventflow/test-support/wait';
import { mysqlUnavailable, useHubFixture, type HubFixture, type TestSpoke } from './hub-support.js';

const fixture = useHubFixture();

interface Mixed {
  f: HubFixture;
  hub: Hub;
  gateway: Gateway;
  spoke: TestSpoke;
  client: EventflowClient;
  stop(): Promise<void>;
}

/** One hub, one gateway on it, one v4-wire spoke, one client of the gateway. */
async function startMixed(hubEnv: HubEnv = {}): Promise<Mixed> {
  const f = await fixture.setup();
  const hub = await f.startHub(hubEnv);
  const gateway = await startGateway({
    ...f.env(),
    EVENTFLOW_PORT: 0,
    EVENTFLOW_STORE: 'mysql',
    EVENTFLOW_ROUTER: 'hubs',
    EVENTFLOW_MESH_POLL_MS: 200,
    EVENTFLOW_LOG_LEVEL: 'silent',
  });
  const router = gateway.router as HubRouter;
  await eventually(() => router.connected.includes(hub.id), 10_000, 'gateway connected to the hub');
  const spoke = await f.spoke(hub);
  const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
  return {
    f,
    hub,
    gateway,
    spoke,
    client,
    async stop() {
      await client.close().catch(() => undefined);
      await gateway.close();
    },
  };
}

/** What a v4 spoke's publish() does: the event and event_published rows (server-stamped), then `publish` to its hub. */
async function v4Publish(m: Mixed, event: { domain: string; name: string; pid: string; data?: JsonObject }, claimedBy?: string): Promise<string> {
  const id = generateEventId();
  await m.f.db.query('INSERT INTO event (id, domain, pid, name, data) VALUES (?, ?, ?, ?, ?)', [id, event.domain, event.pid, event.name, JSON.stringify(event.data ?? {})]);
  await m.f.db.query('INSERT INTO event_published (event_id, publisher) VALUES (?, ?)', [id, m.spoke.id]);
  // A v4 spoke that claimed the event (its spoke claim) and then died or, subscribed only, never settles it.
  if (claimedBy !== undefined) await m.f.db.query('UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = ? WHERE event_id = ?', [claimedBy, id]);
  m.spoke.send('publish', event.domain, id, event.name, event.pid);
  return id;
}

async function subscribedAtHub(m: Mixed, domain: string, name: string): Promise<void> {
  await eventually(() => m.hub.subscriptions().some((s) => s.client === m.gateway.id && s.domain === domain && s.name === name), 10_000, `${domain}/${name} at the hub`);
}

describe.skipIf(mysqlUnavailable !== undefined)('a gateway and v4 spokes on one hub and database', () => {
  it('the hub redelivers stuck claims of events the gateway already routed: the consumer handles each once, subscribers see each once', async () => {
    // Claim times have whole seconds: the lease of 2 s leaves the gateway seconds to route each event first.
    const m = await startMixed({ EVENTFLOW_HUB_CLAIM_LEASE_MS: 2_000, EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES: 3 });
    try {
      const routedAt = new Map<string, number>();
      const handled = new Map<string, number[]>();
      await m.client.subscribe('jobs', 'run', (event) => void (routedAt.has(event.id) ? routedAt.set(`${event.id} again`, Date.now()) : routedAt.set(event.id, Date.now())));
      await m.client.consume('jobs', 'run', async (event) => void handled.set(event.id, [...(handled.get(event.id) ?? []), Date.now()]));
      await subscribedAtHub(m, 'jobs', 'run');
      // The v4 spoke took each spoke claim and never settles: the gateway routes the events and loses the claim.
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await v4Publish(m, { domain: 'jobs', name: 'run', pid: `j${i}` }, m.spoke.id));
      await eventually(() => ids.every((id) => routedAt.has(id)), 10_000, 'every event routed by the gateway');
      expect(handled.size).toBe(0);

      // After the lease the hub takes the claims back and sends `publish` again: the consumer gets them now.
      await eventually(() => ids.every((id) => handled.has(id)), 20_000, 'every event handled after its redelivery');
      for (const id of ids) expect(handled.get(id)![0]).toBeGreaterThanOrEqual(routedAt.get(id)!);
      await eventually(async () => {
        const rows = await m.f.db.query<{ n: number }>('SELECT COUNT(*) AS n FROM event_published WHERE success IS NOT NULL AND consumer = ?', [m.gateway.id]);
        return Number(rows[0]?.n) === 5;
      }, 10_000, 'five successes recorded by the gateway');
      const log = await m.f.logRows(m.hub.id);
      for (const id of ids) expect(log.some((row) => row.message.startsWith(`redelivering event ${id} `))).toBe(true);

      // Settled: a sweep finds nothing to redeliver, and a round trip on the consumer's connection
      // shows no second delivery or event was on its way.
      expect(await m.hub.sweepStuckClaims()).toBe(0);
      await fence(() => m.client.readEventlog('jobs', 'j0'));
      expect([...handled.values()].map((times) => times.length)).toEqual([1, 1, 1, 1, 1]);
      expect([...routedAt.keys()].filter((key) => key.endsWith(' again'))).toEqual([]);
    } finally {
      await m.stop();
    }
  });

  it('an eventlog written by a v4 spoke and by the gateway reads in timestamp order and composes the right state', async () => {
    const m = await startMixed();
    try {
      const pid = 'order-1';
      const placed = await v4Publish(m, { domain: 'orders', name: 'placed', pid, data: { status: 'placed', items: 2 } });
      const paid = await m.client.publish({ domain: 'orders', name: 'paid', pid, data: { status: 'paid', paid: true } });
      const packed = await v4Publish(m, { domain: 'orders', name: 'packed', pid, data: { status: 'packed' } });
      const shipped = await m.client.publish({ domain: 'orders', name: 'shipped', pid, data: { status: 'shipped' } });

      const log = await m.client.readEventlog('orders', pid);
      expect(log.map((event) => event.id)).toEqual([placed, paid, packed, shipped]);
      const times = log.map((event) => Date.parse(event.timestamp));
      expect([...times].sort((a, b) => a - b)).toEqual(times);
      const positions = log.map((event) => event.position);
      expect([...positions].sort((a, b) => a - b)).toEqual(positions);
      expect(await m.client.readEventlogState('orders', pid)).toEqual({ status: 'shipped', items: 2, paid: true });

      // v4's own order (timestamp, then id) agrees.
      const rows = await m.f.db.query<{ id: string }>('SELECT id FROM event WHERE domain = ? AND pid = ? ORDER BY timestamp, id', ['orders', pid]);
      expect(rows.map((row) => row.id)).toEqual([placed, paid, packed, shipped]);
    } finally {
      await m.stop();
    }
  });

  it('wait({ after }) does not resolve with an outcome a v4 spoke wrote before the request', async () => {
    const m = await startMixed();
    try {
      const pid = 'job-1';
      const stale = await v4Publish(m, { domain: 'jobs', name: 'failed', pid, data: { attempt: 1 } });
      const request = await m.client.publish({ domain: 'jobs', name: 'run', pid });
      const outcome = m.client.wait('jobs', pid, ['success', 'failed'], 15_000, { after: request });
      let settled: StoredEvent | undefined;
      void outcome.then((event) => (settled = event));
      const held = (): boolean => m.hub.subscriptions().some((s) => s.client === m.gateway.id && s.domain === 'jobs' && s.name === 'success');
      await eventually(() => settled !== undefined || held(), 10_000, 'the wait registered at the hub, or answered');
      // A round trip after the wait's registration (its stored-outcome check ran before its answer).
      await fence(() => m.client.readEventlog('jobs', pid));
      expect(settled?.id).toBeUndefined();

      const success = await v4Publish(m, { domain: 'jobs', name: 'success', pid, data: { attempt: 2 } });
      const event = await outcome;
      expect(event.id).toBe(success);
      expect(event.id).not.toBe(stale);
      expect((await m.client.readEventlog('jobs', pid)).map((e) => e.id)).toEqual([stale, request, success]);
    } finally {
      await m.stop();
    }
  });
});
