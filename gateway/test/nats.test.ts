/**
 * Gateways on one MariaDB database notifying each other over NATS (EVENTFLOW_ROUTER=nats): the
 * shared NATS server with a subject prefix per test, and a private nats-server for the test that
 * stops and restarts it.
 */
import { describe, expect, it } from 'vitest';
import { createClient, namespacePattern, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually, fence, FENCE_PID, isFence, sleep } from '@eventflow/test-support/wait';
import { mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';
import { natsServerUnavailable, natsUnavailable, startPrivateNats, uniqueSubjectPrefix } from '@eventflow/test-support/nats';
import { metric, natsGatewaySettings, readyz, startCluster as startNatsCluster, type Cluster } from './nats-support.js';

const databases = useTestDatabases();
const unavailable = mysqlUnavailable ?? natsUnavailable;
if (unavailable !== undefined) console.warn(`Skipping the NATS router tests: ${unavailable}`);

const startCluster = (count: number, servers?: string, extra?: Record<string, string | number>): Promise<Cluster> => startNatsCluster(databases, count, servers, extra);
const routerDegraded = (gateway: Gateway): Promise<number | undefined> => metric(gateway, 'eventflow_router_degraded');

describe.skipIf(unavailable !== undefined)('gateways on NATS', () => {
  it('clients on gateways A and C receive, once and in order, what a client on gateway B publishes', async () => {
    const { gateways, client } = await startCluster(3);
    const [a, b, c] = gateways as [Gateway, Gateway, Gateway];
    // A v4 domain with a dot, a space and the wildcard characters; names with a dot and a space.
    const domain = 'orders.eu *>';
    const seenA: StoredEvent[] = [];
    const seenC: StoredEvent[] = [];
    let fenced = 0;
    // No waiting for NATS to have the subscriptions: a gateway pulls the domain once it does.
    await client(a).subscribe(domain, '*', (event) => void (isFence(event) ? fenced++ : seenA.push(event)));
    await client(c).subscribe(domain, 'placed', (event) => void (isFence(event) ? fenced++ : seenC.push(event)));
    const publisher = client(b);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await publisher.publish({ domain, name: i % 2 ? 'placed' : 'paid.in full', pid: `p${i}`, data: { i } }));
    await eventually(() => seenA.length === 20 && seenC.length === 10, 10_000, 'cross-gateway events');
    // The same publisher's marker: each gateway reads the domain in position order, so a duplicate of the 20 would come before it.
    await fence(() => publisher.publish({ domain, name: 'placed', pid: `${FENCE_PID}1` }), () => fenced === 2, 10_000);
    expect(seenA.map((event) => event.id)).toEqual(ids);
    expect(seenC.map((event) => event.id)).toEqual(ids.filter((_, i) => i % 2));
    expect(seenA[3]?.data).toEqual({ i: 3 });
    expect((await readyz(a)).body.checks.router).toEqual({ ready: true, kind: 'nats' });
  });

  it('three gateways, competing consumers on each: every event is handled exactly once', async () => {
    const { db, gateways, client } = await startCluster(3);
    const handled = new Map<string, number>();
    const count = async (event: StoredEvent): Promise<void> => void handled.set(event.id, (handled.get(event.id) ?? 0) + 1);
    const consumers = gateways.map((gateway) => client(gateway));
    for (const consumer of consumers) await consumer.consume('jobs', 'run', count);
    const ids: string[] = [];
    // Published through all three gateways.
    for (let i = 0; i < 90; i++) ids.push(await consumers[i % 3]!.publish({ domain: 'jobs', name: 'run', pid: `j${i}` }));
    await eventually(() => handled.size === 90, 15_000, 'every job handled');
    // A round trip on each consumer's connection: every delivery sent before it has arrived.
    await fence(() => Promise.all(consumers.map((consumer) => consumer.readEventlog('jobs', 'j0'))));
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
    expect(new Set(handled.keys())).toEqual(new Set(ids));
    // Settles are sent after their handler resolves and group-committed: the last ones may still be
    // on their way when the fence returns, so their outcomes are waited for (and never more than 90).
    const successes = async (): Promise<number> => Number((await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM event_published WHERE success IS NOT NULL'))[0]?.n);
    await eventually(async () => (await successes()) === 90, 10_000, 'every outcome stored');
    expect(await successes()).toBe(90);
  });

  it('a wait on gateway A resolves with the outcome published on gateway B', async () => {
    const { gateways, client } = await startCluster(2);
    const [a, b] = gateways as [Gateway, Gateway];
    const waiting = client(a).wait('payments', 'p1', ['settled'], 10_000);
    await eventually(() => a.dispatcher.stats.waits === 1, 5_000, 'wait registered');
    const publisher = client(b);
    await publisher.publish({ domain: 'payments', name: 'other', pid: 'p1' });
    const id = await publisher.publish({ domain: 'payments', name: 'settled', pid: 'p1', data: { ok: true } });
    expect(await waiting).toMatchObject({ id, name: 'settled', pid: 'p1', data: { ok: true } });
  });

  it('a scheduled event fires once across three gateways, also when the gateway that scheduled it is gone', async () => {
    const { db, gateways, client } = await startCluster(3);
    const [a, b, c] = gateways as [Gateway, Gateway, Gateway];
    const seenB: string[] = [];
    const seenC: string[] = [];
    await client(b).subscribe('timers', 'tick', (event) => void seenB.push(event.id));
    await client(c).subscribe('timers', 'tick', (event) => void seenC.push(event.id));
    // Scheduled through b, which stops before it is due: a or c fires it, told over NATS; their own
    // timers would wait for a's later event or the 30 s poll.
    const early = await client(b).schedule(Date.now() + 1_200, { domain: 'timers', name: 'tick', pid: 't1' });
    const laterAt = Date.now() + 5_000;
    const later = await client(a).schedule(laterAt, { domain: 'timers', name: 'tick', pid: 't2' });
    await b.close();
    await eventually(() => seenC.includes(early), 10_000, 'the early one fired');
    expect(Date.now()).toBeLessThan(laterAt);
    await eventually(() => seenC.length === 2, 10_000, 'both fired');
    // Time is what is tested: every other gateway's timer runs out too, and fires nothing more.
    await sleep(1_500);
    expect(seenC).toEqual([early, later]);
    expect(seenB).toEqual([]);
    const rows = await db.query<{ event_id: string; executed: unknown; success: unknown }>('SELECT event_id, executed, success FROM event_scheduled ORDER BY event_id');
    expect(rows.map((row) => row.executed !== null)).toEqual([true, true]);
  });

  it.skipIf(natsServerUnavailable !== undefined)('NATS stopped and restarted: gateways serve their own clients, report degraded, and catch up without loss or duplicates', async () => {
    const nats = await startPrivateNats();
    databases.onCleanup(() => nats.dispose());
    const { gateways, client } = await startCluster(2, nats.url);
    const [a, b] = gateways as [Gateway, Gateway];
    const seenA: StoredEvent[] = [];
    const seenB: StoredEvent[] = [];
    let fenced = false;
    await client(a).subscribe('orders', '*', (event) => void (isFence(event) ? (fenced = true) : seenA.push(event)));
    await client(b).subscribe('orders', '*', (event) => void (isFence(event) ? undefined : seenB.push(event)));
    // The only consumer of the jobs is on a.
    const handled = new Map<string, number>();
    const worker = client(a);
    await worker.consume('jobs', 'run', async (event) => void handled.set(event.id, (handled.get(event.id) ?? 0) + 1));
    const publisher = client(b);
    const ids: string[] = [];
    const publish = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) ids.push(await publisher.publish({ domain: 'orders', name: 'placed', pid: `p${ids.length}` }));
    };
    await publish(10);
    await eventually(() => seenA.length === 10, 10_000, 'before the outage');

    await nats.stop();
    // Degraded, still 200: a load balancer keeps every gateway while NATS is down.
    await eventually(async () => (await readyz(a)).body.status === 'degraded' && (await readyz(b)).body.status === 'degraded', 10_000, 'both degraded');
    expect(await readyz(a)).toMatchObject({ status: 200, body: { status: 'degraded', checks: { router: { ready: true, degraded: true, kind: 'nats', reason: 'no NATS connection' } } } });
    expect(await routerDegraded(a)).toBe(1);
    // Gateway b still stores and serves its own clients.
    await publish(10);
    const jobs: string[] = [];
    for (let i = 0; i < 5; i++) jobs.push(await publisher.publish({ domain: 'jobs', name: 'run', pid: `j${i}` }));
    await eventually(() => seenB.length === 20, 10_000, 'b serves its own subscriber');

    await nats.start();
    await eventually(async () => (await readyz(a)).body.status === 'ready' && (await readyz(b)).body.status === 'ready', 15_000, 'both ready again');
    expect(await routerDegraded(a)).toBe(0);
    // What b published while NATS was down reaches a: b asks everyone to read the store again.
    await eventually(() => seenA.length === 20, 10_000, 'caught up after the outage');
    await publish(10);
    await fence(() => publisher.publish({ domain: 'orders', name: 'placed', pid: `${FENCE_PID}1` }), () => fenced, 10_000);
    expect(seenA.map((event) => event.id)).toEqual(ids);
    expect(seenB.map((event) => event.id)).toEqual(ids);
    // The jobs stored during the outage reached a's consumer afterwards, once each.
    await eventually(() => handled.size === 5, 10_000, 'jobs handled after the outage');
    await fence(() => worker.readEventlog('jobs', 'j0'));
    expect([...handled.keys()].sort()).toEqual([...jobs].sort());
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
  }, 60_000);

  it.skipIf(natsServerUnavailable !== undefined)('a pattern subscription on gateway A gets what B publishes in the domains it matches, once and in order, also across a NATS restart', async () => {
    const nats = await startPrivateNats();
    databases.onCleanup(() => nats.dispose());
    const { gateways, client } = await startCluster(2, nats.url);
    const [a, b] = gateways as [Gateway, Gateway];
    // A's only registration is the pattern: no (domain, name) interest makes it hear of these domains.
    const seen: StoredEvent[] = [];
    let fenced = false;
    await client(a).subscribe(namespacePattern('shop.*'), '*', (event) => void (isFence(event) ? (fenced = true) : seen.push(event)));
    const publisher = client(b);
    const ids: string[] = [];
    const publish = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        // Domains A has never heard of, and one the pattern does not match.
        ids.push(await publisher.publish({ domain: i % 2 ? 'shop.eu' : `shop.new${ids.length}`, name: 'placed', pid: `p${ids.length}` }));
        await publisher.publish({ domain: 'shopping.eu', name: 'placed', pid: `q${ids.length}` });
      }
    };
    await publish(6);
    await eventually(() => seen.length === 6, 10_000, "B's events at A's pattern subscription");

    await nats.stop();
    await eventually(async () => (await readyz(a)).body.status === 'degraded', 10_000, 'a degraded');
    await publish(4);
    await nats.start();
    await eventually(() => seen.length === 10, 15_000, 'what B published while NATS was down');
    await publish(2);
    await fence(() => publisher.publish({ domain: 'shop.eu', name: 'placed', pid: `${FENCE_PID}1` }), () => fenced, 10_000);
    expect(seen.map((event) => event.id)).toEqual(ids);
  }, 60_000);

  it.skipIf(natsServerUnavailable !== undefined)('a gateway whose NATS is down at start serves anyway, degraded, and becomes ready when NATS comes up', async () => {
    const nats = await startPrivateNats();
    databases.onCleanup(() => nats.dispose());
    await nats.stop();
    const db = await databases.fresh();
    const gateway = await startGateway(natsGatewaySettings(db, nats.url, uniqueSubjectPrefix()));
    databases.onCleanup(() => gateway.close());
    expect((await readyz(gateway)).body).toMatchObject({ status: 'degraded', checks: { router: { ready: true, degraded: true, kind: 'nats', reason: 'no NATS connection' } } });
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close());
    const seen: string[] = [];
    await client.subscribe('orders', '*', (event) => void seen.push(event.id));
    const id = await client.publish({ domain: 'orders', name: 'placed', pid: 'p1' });
    await eventually(() => seen.length === 1, 10_000, 'served without NATS');
    expect(seen).toEqual([id]);
    await nats.start();
    await eventually(async () => (await readyz(gateway)).body.status === 'ready', 15_000, 'ready once NATS is up');
  }, 60_000);
});
