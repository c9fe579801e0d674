/**
 * What the gateway does with the store right after an event was stored failing once (another
 * process's SQLite write lock, a full disk, a lost connection) while the event waits to be routed:
 * it still reaches this gateway's subscribers and waits, not only once another event of its domain
 * comes along.
 *  - the routing claim (v4's consumed_hub, written in a transaction of its own after a scheduled
 *    event fired, or for a publish retried after its commit was reported failed);
 *  - the orphan marks of the routed page before it (v4's bookkeeping of events no one here took);
 *  - the pattern subscriptions' read of what was published (made again a second later).
 * Such a failure meeting that moment between two statements is a matter of timing, so the store
 * here refuses once (the only fault not made real).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, expect, it } from 'vitest';
import { createClient, namespacePattern, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { SqliteStore, startGateway, type Gateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { natsUnavailable, natsUrl, uniqueSubjectPrefix } from '@eventflow/test-support/nats';
import { NatsRouter } from '../src/router/nats/router.js';
import type { Logger } from '../src/log.js';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-routing-refused-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let gateway: Gateway | undefined;
let client: EventflowClient | undefined;
afterEach(async () => {
  await client?.close({ drainTimeout: 100 });
  await gateway?.close();
  client = gateway = undefined;
});

const locked = (): Error => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });

/** A SQLite store whose next routing claims (`claims`) or pattern reads (`reads`), or next orphan marks once `marks` resolves, fail as SQLite's writes do when another process holds the write lock. */
class RefusingStore extends SqliteStore {
  claims = 0;
  marks: Promise<void> | undefined;
  reads = 0;
  override async readPublishedSince(after: number, limit: number): Promise<StoredEvent[]> {
    if (this.reads <= 0) return super.readPublishedSince(after, limit);
    this.reads -= 1;
    throw locked();
  }
  override async claimAllForRouting(eventIds: readonly string[], hub: string): Promise<string[]> {
    if (this.claims <= 0) return super.claimAllForRouting(eventIds, hub);
    this.claims -= 1;
    throw locked();
  }
  override async markOrphans(eventIds: readonly string[]): Promise<void> {
    const marks = this.marks;
    if (marks === undefined) return super.markOrphans(eventIds);
    this.marks = undefined;
    await marks;
    throw locked();
  }
}

it('a scheduled event whose routing claim fails reaches the subscribers at once, with no other event to carry it', async () => {
  const store = new RefusingStore({ path: join(dir, 'scheduled.db') });
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' }, { store });
  client = createClient(gateway.url, { onError: () => undefined });
  const seen: StoredEvent[] = [];
  await client.subscribe('reminders', 'due', (event) => void seen.push(event));
  store.claims = 1;
  const id = await client.schedule(Date.now() + 300, { domain: 'reminders', name: 'due', pid: 'r1' });
  // Before: the event fired, its claim failed, and it was never routed: the subscriber got it only
  // with the next event of the domain.
  await eventually(() => seen.some((event) => event.id === id), 5_000, 'the subscriber to get the scheduled event');
  expect(store.claims).toBe(0);
  // Settled as routed, which it was: not `failed`.
  const db = new Database(join(dir, 'scheduled.db'), { readonly: true });
  try {
    await eventually(() => (db.prepare(`SELECT success FROM event_scheduled WHERE event_id = ?`).get(id) as { success: string | null } | undefined)?.success, 5_000, 'the scheduled row settled success');
  } finally {
    db.close();
  }
}, 30_000);

it('an event routed while the page before it failed to mark its orphans reaches its subscriber', async () => {
  const store = new RefusingStore({ path: join(dir, 'orphans.db') });
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' }, { store });
  client = createClient(gateway.url, { onError: () => undefined });
  const seen: StoredEvent[] = [];
  await client.subscribe('orders', 'placed', (event) => void seen.push(event));
  let release!: () => void;
  store.marks = new Promise<void>((resolve) => (release = resolve));
  // Nobody takes `audited`: its page's orphan marks are held, then fail.
  await client.publish({ domain: 'orders', name: 'audited', pid: 'o1' });
  // Meanwhile the subscriber's event is stored, its routing waiting behind that page.
  const placed = await client.publish({ domain: 'orders', name: 'placed', pid: 'o1' });
  release();
  // Before: the pump gave up with the marks, and the event waited for the domain's next publish.
  await eventually(() => seen.some((event) => event.id === placed), 5_000, 'the subscriber to get the event');
  expect(store.marks).toBeUndefined();
}, 30_000);

it("an event whose pattern subscriptions' read failed reaches them a second later, with no other event to carry it", async () => {
  const store = new RefusingStore({ path: join(dir, 'patterns.db') });
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' }, { store });
  client = createClient(gateway.url, { onError: () => undefined });
  const seen: StoredEvent[] = [];
  await client.subscribe(namespacePattern('shop.>'), '*', (event) => void seen.push(event));
  store.reads = 1;
  const id = await client.publish({ domain: 'shop.orders', name: 'placed', pid: 'o1' });
  // Before: the pump gave up with the read, and the event waited for the next publish of any domain.
  await eventually(() => seen.some((event) => event.id === id), 5_000, 'the pattern subscription to get the event');
  expect(store.reads).toBe(0);
}, 30_000);

it.skipIf(natsUnavailable !== undefined)('the NATS router logs a routing claim it could not write, as the embedded one does (it was silent)', async () => {
  const store = new RefusingStore({ path: join(dir, 'nats.db') });
  await store.init();
  const warnings: Array<{ message: string; fields: Record<string, unknown> | undefined }> = [];
  const log: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (message, fields) => void warnings.push({ message, fields }),
    error: () => undefined,
    child: () => log,
  };
  const router = new NatsRouter({ store, id: 'g1', log, connection: { servers: natsUrl }, prefix: uniqueSubjectPrefix() });
  const routed: string[] = [];
  await router.start({ route: async ({ domain }) => void routed.push(domain), routeAnnounced: async () => undefined });
  try {
    const { event } = await store.append({ id: randomUUID(), domain: 'orders', name: 'placed', pid: 'o1', data: {} });
    store.claims = 1;
    await router.publish(event);
    expect(routed).toEqual(['orders']);
    expect(warnings).toEqual([{ message: 'could not write the routing claim of events (routed all the same)', fields: { error: expect.objectContaining({ code: 'SQLITE_BUSY' }), events: [event.id] } }]);
  } finally {
    await router.close();
    await store.close();
  }
});
