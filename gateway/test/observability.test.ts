/**
 * Observability: /metrics (Prometheus text) after real traffic, /readyz against a real store and
 * router, and the JSON log lines (ids on them, no secrets in them).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { createConnection } from 'mysql2/promise';
import { createLogger, startGateway, type Gateway, type GatewaySettings } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { useHubFixture } from './hub-support.js';
import { mysqlUnavailable, server } from '@eventflow/test-support/mysql';
import { connect, type Conn } from '@eventflow/test-support/raw-socket';

const hubs = useHubFixture();

const SECRET = 'observability-secret-0123456789-abcdefghijklmnop';
const FORGING_SECRET = 'forging-secret-0123456789-abcdefghijklmnopqrstu';
const MYSQL_PASSWORD = 'mysql-password-that-must-not-be-logged-42';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function gateway(settings: GatewaySettings = {}, lines?: string[]): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-obs-'));
  const started = await startGateway(
    { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: join(dir, 'eventflow.db'), EVENTFLOW_LOG_LEVEL: lines ? 'debug' : 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0, ...settings },
    lines ? { logDestination: (line) => lines.push(line) } : {},
  );
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }), () => started.close());
  return started;
}

async function socket(target: Gateway, options: Parameters<typeof connect>[1] = {}): Promise<Conn> {
  const conn = await connect(target.url, options);
  cleanups.push(() => conn.ws.terminate());
  return conn;
}

const event = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({ domain: 'orders', name: 'placed', pid: 'p1', data: { amount: 1 }, ...overrides });

// ── the Prometheus text format ──

type Samples = Map<string, number>;

/** `name{a="x",b="y"} value` lines → "name{a="x",b="y"}" → value (labels as written, sorted). */
function parseMetrics(text: string): { samples: Samples; types: Map<string, string> } {
  const samples: Samples = new Map();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1] as string, type[2] as string);
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels = (match[2] ?? '')
      .split(/,(?=[a-zA-Z_]\w*=")/)
      .filter(Boolean)
      .sort()
      .join(',');
    samples.set(labels ? `${match[1]}{${labels}}` : (match[1] as string), Number(match[3]));
  }
  return { samples, types };
}

async function scrape(target: Gateway): Promise<Samples> {
  const response = await fetch(`${target.httpUrl}metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/plain');
  return parseMetrics(await response.text()).samples;
}

/** How much each sample moved between two scrapes (a sample missing before counts from 0). */
const delta = (before: Samples, after: Samples, key: string): number => (after.get(key) ?? 0) - (before.get(key) ?? 0);

describe('/metrics', () => {
  it('counts published, delivered, consumed and dropped events, store and router calls, after real traffic', async () => {
    const gw = await gateway();
    const subscriber = await socket(gw);
    const consumer = await socket(gw);
    const publisher = await socket(gw);
    expect(await subscriber.request('subscribe', { domain: 'orders', name: 'placed' })).toMatchObject({ type: 'result' });
    expect(await consumer.request('consume', { consumer: 'c1', domain: 'orders', name: 'placed' })).toMatchObject({ type: 'result' });
    const before = await scrape(gw);
    expect(before.get('eventflow_connections')).toBe(3);
    expect(before.get('eventflow_subscriptions')).toBe(1);
    expect(before.get('eventflow_consumers')).toBe(1);

    for (const id of ['e1', 'e2', 'e3']) expect(await publisher.request('publish', { event: event({ id }) })).toMatchObject({ type: 'result' });
    expect(await publisher.request('persist', { event: event({ id: 'e4' }) })).toMatchObject({ type: 'result' });
    // Nobody takes this one: an orphan.
    expect(await publisher.request('publish', { event: event({ id: 'e5', domain: 'nobody' }) })).toMatchObject({ type: 'result' });

    for (const id of ['e1', 'e2', 'e3']) await subscriber.next((frame) => frame.type === 'event' && (frame.event as { id: string }).id === id);
    const deliveries = [];
    for (const id of ['e1', 'e2', 'e3']) deliveries.push(await consumer.next((frame) => frame.type === 'delivery' && (frame.event as { id: string }).id === id));
    const outcomes = ['success', 'success', 'failed'];
    for (const [index, delivery] of deliveries.entries()) {
      expect(await consumer.request('settle', { delivery: delivery.delivery, outcome: outcomes[index] })).toMatchObject({ type: 'result' });
    }
    // A settle of a settled delivery is an error frame, counted by code.
    expect(await consumer.request('settle', { delivery: deliveries[0]?.delivery, outcome: 'success' })).toMatchObject({ code: 'E_EVENTFLOW_UNKNOWN_DELIVERY' });
    await eventually(async () => delta(before, await scrape(gw), 'eventflow_events_dropped_total{reason="no_recipient"}') === 1, 5_000, 'the orphan counted');

    const after = await scrape(gw);
    const moved = (key: string): number => delta(before, after, key);
    expect(moved('eventflow_events_published_total{operation="publish"}')).toBe(4);
    expect(moved('eventflow_events_published_total{operation="persist"}')).toBe(1);
    expect(moved('eventflow_events_published_total{operation="schedule"}')).toBe(0);
    expect(moved('eventflow_requests_total{operation="publish"}')).toBe(4);
    expect(moved('eventflow_requests_total{operation="settle"}')).toBe(3);
    expect(moved('eventflow_events_delivered_total{kind="subscription"}')).toBe(3);
    expect(moved('eventflow_events_delivered_total{kind="consumer"}')).toBe(3);
    expect(moved('eventflow_events_delivered_total{kind="wait"}')).toBe(0);
    expect(moved('eventflow_consume_outcomes_total{outcome="success"}')).toBe(2);
    expect(moved('eventflow_consume_outcomes_total{outcome="failed"}')).toBe(1);
    expect(moved('eventflow_consume_outcomes_total{outcome="revoked"}')).toBe(0);
    expect(moved('eventflow_redeliveries_total')).toBe(0);
    expect(moved('eventflow_events_dropped_total{reason="no_recipient"}')).toBe(1);
    expect(moved('eventflow_events_dropped_total{reason="slow_client"}')).toBe(0);
    expect(moved('eventflow_errors_total{code="E_EVENTFLOW_UNKNOWN_DELIVERY"}')).toBe(1);
    // One append per write; the router handed 4 published events on.
    expect(moved('eventflow_store_operation_seconds_count{operation="append"}')).toBe(5);
    // Three settles, one after the other (each its own batch of ledger writes), and the fourth (of a
    // delivery no longer open here) looked up in the ledger.
    expect(moved('eventflow_store_operation_seconds_count{operation="ledger.apply"}')).toBe(3);
    expect(moved('eventflow_store_operation_seconds_count{operation="ledger.delivery"}')).toBe(1);
    expect(moved('eventflow_store_operation_seconds_count{operation="markOrphans"}')).toBe(1);
    expect(moved('eventflow_router_publish_seconds_count{router="local"}')).toBe(4);
    expect(after.get('eventflow_router_publish_seconds_bucket{le="+Inf",router="local"}')).toBe(after.get('eventflow_router_publish_seconds_count{router="local"}'));
    expect(after.get('eventflow_store_operation_seconds_sum{operation="append"}')).toBeGreaterThan(0);
    // The default process metrics come along.
    expect(after.has('process_cpu_user_seconds_total')).toBe(true);
    expect(after.has('nodejs_heap_size_used_bytes')).toBe(true);

    // Gauges follow the connections down.
    subscriber.ws.close();
    consumer.ws.close();
    await eventually(async () => {
      const now = await scrape(gw);
      return now.get('eventflow_connections') === 1 && now.get('eventflow_subscriptions') === 0 && now.get('eventflow_consumers') === 0;
    }, 5_000, 'gauges back down');
  });

  it('counts revocations, redeliveries and dead letters of unsettled deliveries, and waits', async () => {
    const gw = await gateway({ EVENTFLOW_CONSUME_LEASE_MS: 100, EVENTFLOW_CONSUME_MAX_ATTEMPTS: 2 });
    const conn = await socket(gw);
    expect(await conn.request('consume', { consumer: 'c1', domain: 'orders', name: 'placed' })).toMatchObject({ type: 'result' });
    expect(await conn.request('wait', { wait: 'w1', domain: 'orders', pid: 'p1', names: ['placed'] })).toMatchObject({ type: 'result' });
    expect((await scrape(gw)).get('eventflow_waits')).toBe(1);
    const before = await scrape(gw);
    expect(await conn.request('publish', { event: event({ id: 'e1' }) })).toMatchObject({ type: 'result' });
    await conn.next((frame) => frame.type === 'waited');
    // Never settled: revoked after the first lease, redelivered once, then a dead letter at the second's end.
    await conn.next((frame) => frame.type === 'delivery' && frame.attempt === 1);
    await conn.next((frame) => frame.type === 'delivery' && frame.attempt === 2);
    await eventually(async () => delta(before, await scrape(gw), 'eventflow_consume_outcomes_total{outcome="dead_lettered"}') === 1, 5_000, 'dead letter counted');
    const after = await scrape(gw);
    // Each delivery ends once in the counter: the first revoked, the last a dead letter (before, also revoked: 3 for 2).
    expect(delta(before, after, 'eventflow_consume_outcomes_total{outcome="revoked"}')).toBe(1);
    expect(delta(before, after, 'eventflow_redeliveries_total')).toBe(1);
    expect(delta(before, after, 'eventflow_events_delivered_total{kind="consumer"}')).toBe(2);
    expect(delta(before, after, 'eventflow_events_delivered_total{kind="wait"}')).toBe(1);
    expect(after.get('eventflow_waits')).toBe(0);
  });

  it('is one registry per gateway: two gateways in one process count their own traffic', async () => {
    const first = await gateway();
    const second = await gateway();
    const conn = await socket(first);
    expect(await conn.request('publish', { event: event({ id: 'e1' }) })).toMatchObject({ type: 'result' });
    expect((await scrape(first)).get('eventflow_events_published_total{operation="publish"}')).toBe(1);
    expect((await scrape(second)).get('eventflow_events_published_total{operation="publish"}')).toBe(0);
    expect((await scrape(first)).get('eventflow_connections')).toBe(1);
    expect((await scrape(second)).get('eventflow_connections')).toBe(0);
  });

  it('declares the metric types, with no label carrying a domain, pid or id', async () => {
    const gw = await gateway();
    const conn = await socket(gw);
    expect(await conn.request('publish', { event: event({ id: 'unique-event-id', domain: 'some-domain', pid: 'some-pid' }) })).toMatchObject({ type: 'result' });
    const text = await (await fetch(`${gw.httpUrl}metrics`)).text();
    const { types } = parseMetrics(text);
    expect(Object.fromEntries([...types].filter(([name]) => name.startsWith('eventflow_')))).toEqual({
      eventflow_requests_total: 'counter',
      eventflow_errors_total: 'counter',
      eventflow_events_published_total: 'counter',
      eventflow_events_delivered_total: 'counter',
      eventflow_events_dropped_total: 'counter',
      eventflow_consume_outcomes_total: 'counter',
      eventflow_store_errors_total: 'counter',
      eventflow_redeliveries_total: 'counter',
      eventflow_connections: 'gauge',
      eventflow_subscriptions: 'gauge',
      eventflow_consumers: 'gauge',
      eventflow_waits: 'gauge',
      // Settles the store has not recorded yet, which the gateway writes again (waiting-reports.ts).
      eventflow_consume_reports_waiting: 'gauge',
      eventflow_store_operation_seconds: 'histogram',
      eventflow_router_publish_seconds: 'histogram',
      // Queue, handler and request() times: one series each (by group and domain only with EVENTFLOW_METRICS_GROUP_LABELS=on).
      eventflow_consume_queue_seconds: 'histogram',
      eventflow_consume_handler_seconds: 'histogram',
      eventflow_request_seconds: 'histogram',
      // Over all consumer groups (labelled per group only with EVENTFLOW_METRICS_GROUP_LABELS=on).
      eventflow_groups: 'gauge',
      eventflow_group_pending: 'gauge',
      eventflow_group_in_flight: 'gauge',
      eventflow_group_redelivered: 'gauge',
      eventflow_group_dead_letters: 'gauge',
      eventflow_group_oldest_pending_age_seconds: 'gauge',
      eventflow_group_reading_age_seconds: 'gauge',
    });
    for (const value of ['unique-event-id', 'some-domain', 'some-pid']) expect(text).not.toContain(value);
  });

  it('names no domain or group by default: 3,000 groups make one series per gauge, a small and quick scrape', async () => {
    const gw = await gateway();
    const ledger = gw.store.ledger();
    for (let i = 0; i < 3000; i++) await ledger.ensureGroup({ domain: `acme-corp-payroll-${i}`, name: 'run', group: 'ceo-bonus-audit' });
    const conn = await socket(gw);
    for (const pid of ['p1', 'p2']) expect(await conn.request('publish', { event: event({ domain: 'acme-corp-payroll-7', name: 'run', pid }) })).toMatchObject({ type: 'result' });
    const started = performance.now();
    const response = await fetch(`${gw.httpUrl}metrics`);
    const text = await response.text();
    const took = performance.now() - started;
    // It was 1.7 MB and 1.6 s with 3,000 groups. The time is mostly the ledger's read of the groups' counts.
    console.info(`/metrics with 3,000 groups: ${text.length} bytes in ${Math.round(took)} ms`);
    expect(text).not.toContain('acme-corp');
    expect(text).not.toContain('ceo-bonus');
    expect(text.length).toBeLessThan(32 * 1024);
    // ~200 ms here with the ledger's counts in a few statements for all groups (it was two per group).
    expect(took).toBeLessThan(1_500);
    const { samples } = parseMetrics(text);
    expect(samples.get('eventflow_groups')).toBe(3000);
    expect(samples.get('eventflow_group_pending')).toBe(2);
    expect([...samples.keys()].filter((key) => key.startsWith('eventflow_group_')).sort()).toEqual([
      'eventflow_group_dead_letters',
      'eventflow_group_in_flight',
      'eventflow_group_oldest_pending_age_seconds',
      'eventflow_group_pending',
      'eventflow_group_reading_age_seconds',
      'eventflow_group_redelivered',
    ]);
  });

  it('EVENTFLOW_METRICS_GROUP_LABELS=on: the 50 groups with the most pending events by name, the rest summed under empty labels', async () => {
    const gw = await gateway({ EVENTFLOW_METRICS_GROUP_LABELS: 'on' });
    const ledger = gw.store.ledger();
    for (let i = 0; i < 60; i++) await ledger.ensureGroup({ domain: `tenant-${i}`, name: 'run', group: 'audit' });
    const conn = await socket(gw);
    // tenant-55 … tenant-59: 3 pending each; the others 1.
    for (let i = 0; i < 60; i++) {
      for (let n = 0; n < (i >= 55 ? 3 : 1); n++) expect(await conn.request('publish', { event: event({ domain: `tenant-${i}`, name: 'run', pid: `p${n}` }) })).toMatchObject({ type: 'result' });
    }
    const samples = await scrape(gw);
    const pending = [...samples].filter(([key]) => key.startsWith('eventflow_group_pending{'));
    expect(pending).toHaveLength(51);
    for (let i = 55; i < 60; i++) expect(samples.get(`eventflow_group_pending{domain="tenant-${i}",group="audit",name="run"}`)).toBe(3);
    expect(samples.get('eventflow_group_pending{domain="",group="",name=""}')).toBe(10);
    expect(pending.reduce((sum, [, value]) => sum + value, 0)).toBe(5 * 3 + 55);
    expect(samples.get('eventflow_groups')).toBe(60);
  });

  it('times deliveries (queue time from the store, handler time to the settle) and request() round trips; per group and domain only with EVENTFLOW_METRICS_GROUP_LABELS=on', async () => {
    const HANDLER_MS = 150;
    for (const labels of ['off', 'on'] as const) {
      const gw = await gateway({ EVENTFLOW_METRICS_GROUP_LABELS: labels });
      const worker = await socket(gw);
      expect(await worker.request('consume', { consumer: 'c1', domain: 'orders', name: 'placed', group: 'billing' })).toMatchObject({ type: 'result' });
      const client = await socket(gw);
      // The round trip's clock starts at the wait's registration, a step before the publish.
      const waitSent = performance.now();
      expect(await client.request('wait', { wait: 'w1', domain: 'orders', pid: 'p1', names: ['success'], request: 'req-1' })).toMatchObject({ type: 'result' });
      const published = performance.now();
      expect(await client.request('publish', { event: event({ id: 'req-1' }) })).toMatchObject({ type: 'result' });
      const delivery = (await worker.next((frame) => frame.type === 'delivery')) as unknown as { delivery: string };
      const queued = performance.now() - published;
      await new Promise((resolve) => setTimeout(resolve, HANDLER_MS));
      expect(await worker.request('settle', { delivery: delivery.delivery, outcome: 'success' })).toMatchObject({ type: 'result' });
      expect(await worker.request('publish', { event: event({ name: 'success', rid: 'req-1' }) })).toMatchObject({ type: 'result' });
      await client.next((frame) => frame.type === 'waited');
      const total = performance.now() - published;
      const sinceWait = performance.now() - waitSent;
      const samples = await scrape(gw);
      const series = (name: string, labelSet: string): { count: number; sum: number } => ({
        count: samples.get(`${name}_count${labelSet}`) ?? -1,
        sum: samples.get(`${name}_sum${labelSet}`) ?? -1,
      });
      const group = labels === 'on' ? '{domain="orders",group="billing",name="placed"}' : '{domain="",group="",name=""}';
      const queue = series('eventflow_consume_queue_seconds', group);
      const handler = series('eventflow_consume_handler_seconds', group);
      const request = series('eventflow_request_seconds', labels === 'on' ? '{domain="orders"}' : '{domain=""}');
      expect([queue.count, handler.count, request.count]).toEqual([1, 1, 1]);
      expect(queue.sum * 1000).toBeLessThanOrEqual(queued + 5);
      expect(handler.sum * 1000).toBeGreaterThanOrEqual(HANDLER_MS - 5);
      expect(handler.sum * 1000).toBeLessThan(total);
      expect(request.sum * 1000).toBeGreaterThanOrEqual(HANDLER_MS - 5);
      // Its clock reads whole ms (Date.now()): 1 ms either way.
      expect(request.sum * 1000).toBeLessThanOrEqual(sinceWait + 2);
    }
  });

  it('EVENTFLOW_METRICS=off: no /metrics', async () => {
    const gw = await gateway({ EVENTFLOW_METRICS: 'off' });
    expect((await fetch(`${gw.httpUrl}metrics`)).status).toBe(404);
    const conn = await socket(gw);
    expect(await conn.request('publish', { event: event() })).toMatchObject({ type: 'result' });
  });
});

describe('/readyz', () => {
  it('is 200 on a healthy gateway', async () => {
    const gw = await gateway();
    const response = await fetch(`${gw.httpUrl}readyz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: 'ready',
      gateway: gw.id,
      ready: true,
      checks: { store: { ready: true, kind: 'sqlite' }, router: { ready: true, kind: 'local' } },
    });
    expect((await fetch(`${gw.httpUrl}healthz`)).status).toBe(200);
  });

  it.skipIf(mysqlUnavailable)('is 503 saying so when the MariaDB store does not answer (its database dropped)', async () => {
    const { db } = await hubs.setup();
    const lines: string[] = [];
    const gw = await gateway({ ...mysqlEnv(db.options), EVENTFLOW_STORE: 'mysql' }, lines);
    expect((await fetch(`${gw.httpUrl}readyz`)).status).toBe(200);
    await db.query(`DROP DATABASE \`${db.name}\``);
    const response = await fetch(`${gw.httpUrl}readyz`);
    expect(response.status).toBe(503);
    const body = (await response.json()) as { status: string; checks: { store: { ready: boolean; reason: string }; router: { ready: boolean } } };
    expect(body.status).toBe('not ready');
    expect(body.checks.store).toMatchObject({ ready: false, kind: 'mysql', reason: expect.stringMatching(/^E_EVENTFLOW_STORE_FAILED \(ER_/) });
    expect(body.checks.router.ready).toBe(true);
    expect(lines.map((line) => JSON.parse(line) as { msg: string; level: string }).filter((entry) => entry.msg === 'gateway not ready')).toHaveLength(1);
  });

  it.skipIf(mysqlUnavailable)('is 503 with the hubs router while no hub is connected, 200 once one is', async () => {
    const f = await hubs.setup();
    const gw = await gateway({ ...f.env(), EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 100 });
    const response = await fetch(`${gw.httpUrl}readyz`);
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ checks: { store: { ready: true }, router: { ready: false, kind: 'hubs', hubs: 0, reason: 'no hub connection' } } });
    expect((await scrape(gw)).get('eventflow_hub_connections')).toBe(0);
    await f.startHub();
    await eventually(async () => (await fetch(`${gw.httpUrl}readyz`)).status === 200, 10_000, 'ready with a hub');
    expect((await scrape(gw)).get('eventflow_hub_connections')).toBe(1);
  });
});

function mysqlEnv(options: { host?: string | undefined; port?: number | undefined; user?: string | undefined; password?: string | undefined; database?: string | undefined }): GatewaySettings {
  return {
    EVENTFLOW_MYSQL_HOST: options.host,
    EVENTFLOW_MYSQL_PORT: options.port,
    EVENTFLOW_MYSQL_USER: options.user,
    EVENTFLOW_MYSQL_PASSWORD: options.password,
    EVENTFLOW_MYSQL_DATABASE: options.database,
  };
}

// ── logs ──

interface Entry {
  level: string;
  msg: string;
  gateway?: string;
  connection?: string;
  request?: number | string;
  [field: string]: unknown;
}

const parse = (lines: string[]): Entry[] => lines.map((line) => JSON.parse(line) as Entry);

async function hs256(secret: string, claims: Record<string, string[]>): Promise<string> {
  return new SignJWT({ eventflow: claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(secret));
}

describe('logs', () => {
  it('are JSON lines with the connection id on connection lines and the request id on request lines, and never a secret', async () => {
    const lines: string[] = [];
    const gw = await gateway({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_MAX_SUBSCRIPTIONS: 1 }, lines);
    const valid = await hs256(SECRET, { publish: ['orders'], subscribe: ['orders'] });
    const forged = await hs256(FORGING_SECRET, { publish: ['*'] });

    // A forged token in hello: refused and closed.
    const refused = await socket(gw, { hello: false });
    refused.send({ type: 'hello', protocol: 1, client: 'forger', token: forged });
    expect((await refused.closed).code).toBe(4401);

    // A good token: a forbidden request, a bad `authenticate`, a limit refusal.
    const conn = await socket(gw, { hello: false });
    conn.send({ type: 'hello', protocol: 1, client: 'worker', token: valid });
    await conn.next((frame) => frame.type === 'welcome');
    const forbidden = conn.sendRequest('publish', { event: event({ domain: 'billing' }) });
    expect(await conn.answer(forbidden)).toMatchObject({ code: 'E_EVENTFLOW_FORBIDDEN' });
    const badAuth = conn.sendRequest('authenticate', { token: forged });
    expect(await conn.answer(badAuth)).toMatchObject({ code: 'E_EVENTFLOW_UNAUTHORIZED' });
    expect(await conn.request('subscribe', { domain: 'orders', name: 'a' })).toMatchObject({ type: 'result' });
    const overLimit = conn.sendRequest('subscribe', { domain: 'orders', name: 'b' });
    expect(await conn.answer(overLimit)).toMatchObject({ code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });
    const again = conn.sendRequest('subscribe', { domain: 'orders', name: 'c' });
    expect(await conn.answer(again)).toMatchObject({ code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });
    expect(await conn.request('publish', { event: event() })).toMatchObject({ type: 'result' });

    // A bearer token in a URL and a header of a plain HTTP request.
    const bearer = 'bearer-token-in-the-url-0123456789';
    expect((await fetch(`${gw.httpUrl}healthz?token=${bearer}`, { headers: { authorization: `Bearer ${bearer}` } })).status).toBe(200);
    conn.ws.close();
    await gw.close();

    const entries = parse(lines);
    for (const entry of entries) {
      expect(entry).toMatchObject({ level: expect.stringMatching(/^(debug|info|warn|error)$/), time: expect.any(String), msg: expect.any(String), gateway: gw.id });
    }
    const find = (msg: string): Entry[] => entries.filter((entry) => entry.msg === msg);
    expect(find('gateway listening')).toHaveLength(1);
    expect(find('gateway stopping')).toHaveLength(1);
    expect(find('gateway stopped')).toHaveLength(1);

    // Auth failures: the handshake, a forbidden request and a failed `authenticate`, each with its ids.
    const handshake = find('handshake refused: bad token');
    expect(handshake).toHaveLength(1);
    expect(handshake[0]).toMatchObject({ level: 'info', connection: expect.any(String), client: 'forger' });
    const workerConnection = entries.find((entry) => entry.msg === 'client connected' && entry.client === 'worker')?.connection;
    expect(workerConnection).toBeDefined();
    expect(workerConnection).not.toBe(handshake[0]?.connection);
    expect(find('request refused: not authorized')).toEqual([
      expect.objectContaining({ level: 'info', connection: workerConnection, request: forbidden, code: 'E_EVENTFLOW_FORBIDDEN' }),
    ]);
    expect(find('request refused: not authenticated')).toEqual([
      expect.objectContaining({ level: 'info', connection: workerConnection, request: badAuth, code: 'E_EVENTFLOW_UNAUTHORIZED' }),
    ]);
    // Limit refusals: the first one on a connection in full, the next ones counted in a summary (at the latest when it closes).
    const limits = entries.filter((entry) => entry.msg.startsWith('request refused: connection limit reached'));
    expect(limits.map((entry) => [entry.level, entry.request, entry.connection, entry.repeated])).toEqual([
      ['info', overLimit, workerConnection, undefined],
      ['info', undefined, workerConnection, 1],
    ]);
    expect(again).toBeGreaterThan(overLimit);
    // HTTP requests get an id of their own and log the path only.
    expect(find('http request')).toEqual([expect.objectContaining({ level: 'debug', path: '/healthz', request: expect.stringMatching(/^http-\d+$/) })]);
    // Every line logged for a connection carries its id.
    for (const entry of entries.filter((candidate) => /client|refused|request refused|error sent/.test(candidate.msg) && candidate.msg !== 'http request')) {
      expect(entry.connection, entry.msg).toEqual(expect.any(String));
    }
    // No publish is logged at info: the hot path stays quiet.
    expect(entries.filter((entry) => entry.level !== 'debug' && entry.op === 'publish' && entry.msg !== 'request refused: not authorized')).toEqual([]);

    const all = lines.join('\n');
    for (const secret of [SECRET, FORGING_SECRET, valid, forged, bearer]) expect(all).not.toContain(secret);
    // Not even a piece of a token (its signature).
    for (const token of [valid, forged]) expect(all).not.toContain(token.split('.')[2]);
  });

  it('a bad configuration is logged without the values of secret variables', async () => {
    const lines: string[] = [];
    await expect(
      startGateway(
        {
          EVENTFLOW_PORT: 'not-a-port',
          EVENTFLOW_AUTH: 'jwt',
          EVENTFLOW_JWT_SECRET: 'too-short-secret-zq',
          EVENTFLOW_MYSQL_PASSWORD: MYSQL_PASSWORD,
          EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: 'cert-key-that-must-not-be-logged',
        },
        { logDestination: (line) => lines.push(line) },
      ),
    ).rejects.toMatchObject({ code: 'E_EVENTFLOW_CONFIG' });
    const entries = parse(lines);
    expect(entries).toEqual([expect.objectContaining({ level: 'error', msg: 'gateway not started: invalid configuration' })]);
    expect(JSON.stringify(entries[0]?.error)).toContain('EVENTFLOW_JWT_SECRET');
    for (const secret of ['too-short-secret-zq', MYSQL_PASSWORD, 'cert-key-that-must-not-be-logged']) expect(lines.join('\n')).not.toContain(secret);
  });

  it.skipIf(mysqlUnavailable)('a MySQL store refusing the password is logged without it', async () => {
    // The test server's root has no password: any password is refused.
    const probe = await createConnection({ ...server, password: MYSQL_PASSWORD }).then(
      async (connection) => {
        await connection.end();
        return 'accepted';
      },
      () => 'refused',
    );
    if (probe === 'accepted') return;
    const lines: string[] = [];
    await expect(
      startGateway(
        { ...mysqlEnv({ ...server, database: 'eventflow_unused' }), EVENTFLOW_MYSQL_PASSWORD: MYSQL_PASSWORD, EVENTFLOW_STORE: 'mysql', EVENTFLOW_PORT: 0 },
        { logDestination: (line) => lines.push(line) },
      ),
    ).rejects.toBeDefined();
    expect(parse(lines)).toEqual([expect.objectContaining({ level: 'error', msg: 'gateway not started' })]);
    expect(lines.join('\n')).not.toContain(MYSQL_PASSWORD);
  });

  it('redacts fields named like secrets, should a call site ever pass one', () => {
    const lines: string[] = [];
    const log = createLogger('debug', {}, (line) => lines.push(line));
    log.child({ connection: '7' }).info('oops', {
      token: 'a-token',
      password: 'a-password',
      headers: { authorization: 'Bearer a-bearer' },
      config: { EVENTFLOW_JWT_SECRET: 'a-secret', EVENTFLOW_MYSQL_PASSWORD: 'a-mysql-password' },
      kept: 'visible',
    });
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      connection: '7',
      token: '[redacted]',
      password: '[redacted]',
      headers: { authorization: '[redacted]' },
      config: { EVENTFLOW_JWT_SECRET: '[redacted]', EVENTFLOW_MYSQL_PASSWORD: '[redacted]' },
      kept: 'visible',
    });
    for (const secret of ['a-token', 'a-password', 'a-bearer', 'a-secret', 'a-mysql-password']) expect(lines[0]).not.toContain(secret);
  });

  it('EVENTFLOW_LOG_LEVEL=silent logs nothing', async () => {
    const lines: string[] = [];
    const gw = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: ':memory:', EVENTFLOW_LOG_LEVEL: 'silent' }, { logDestination: (line) => lines.push(line) });
    await gw.close();
    expect(lines).toEqual([]);
  });
});
