import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/sqlite.js';
import { WAL_BOUNDS, walLimitFrames } from '../src/store/sqlite/checkpointer.js';
import { describeEventStore, expectCode, newEvent } from './store-suite.js';
import { eventually } from '@eventflow/test-support/wait';
import { mulberry32 } from './fuzz-support.js';

let dir = '';
let files = 0;
const nextFile = (): string => path.join(dir, `store-${++files}.db`);

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eventflow-store-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describeEventStore('sqlite file', async () => {
  const store = new SqliteStore({ path: nextFile() });
  await store.init();
  return store;
});

describe('SqliteStore', () => {
  it("refuses a cacheMb that is not a whole number of MiB from 1 to 65536 (an embedder's option)", async () => {
    for (const cacheMb of [0, -1, 1.5, Number.NaN, 65_537]) {
      expect(() => new SqliteStore({ path: ':memory:', cacheMb }), String(cacheMb)).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG', message: expect.stringContaining('from 1 to 65536') }));
    }
    const store = new SqliteStore({ path: ':memory:', cacheMb: 1 });
    await store.init();
    await store.close();
  });

  const opened: SqliteStore[] = [];
  const open = async (file: string): Promise<SqliteStore> => {
    const store = new SqliteStore({ path: file });
    await store.init();
    opened.push(store);
    return store;
  };
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((store) => store.close()));
  });

  it('checkpoints the WAL into the database file off the event loop, well before SQLite\'s own 1,000-page threshold', async () => {
    const file = nextFile();
    const store = await open(file);
    const before = fs.statSync(file).size;
    const payload = 'x'.repeat(1_000);
    // ~2 MB of WAL: half of SQLite's automatic threshold (1,000 pages of 4 kB), which is switched off here.
    await Promise.all(Array.from({ length: 2_000 }, (_, i) => store.append(newEvent({ pid: `p${i}`, data: { payload } }))));
    await eventually(() => fs.statSync(file).size > before + 1_500_000, 5_000, 'the events to reach the database file');
    // The appends are readable, and a reopened store sees them all.
    await store.close();
    const reopened = await open(file);
    expect(await reopened.head()).toBeGreaterThanOrEqual(2_000);
  });

  it('lets the WAL hold up to 4,000 pages before starting it over where that is an eighth of the room at most, 500 on a small disk', () => {
    const page = 4096;
    const MB = 2 ** 20;
    // A roomy disk: few restarts (each one stalls a commit that meets it).
    expect(walLimitFrames(100_000 * MB, page, WAL_BOUNDS)).toBe(4_000);
    // In steps of two: 1,000 pages × 4 kB × 8 = 31.25 MB of room; 2,000 need 62.5 MB.
    expect(walLimitFrames(32 * MB, page, WAL_BOUNDS)).toBe(1_000);
    expect(walLimitFrames(62.5 * MB, page, WAL_BOUNDS)).toBe(2_000);
    expect(walLimitFrames(62.5 * MB - 1, page, WAL_BOUNDS)).toBe(1_000);
    // A small or full disk (disk-full.test.ts): never under 500, and 500 there.
    expect(walLimitFrames(10 * MB, page, WAL_BOUNDS)).toBe(500);
    expect(walLimitFrames(0, page, WAL_BOUNDS)).toBe(500);
    // Larger pages: the same bytes, fewer frames.
    expect(walLimitFrames(60 * MB, 2 * page, WAL_BOUNDS)).toBe(500);
    expect(walLimitFrames(60 * MB, page, WAL_BOUNDS)).toBe(1_000);
  });

  /** A second, read-only connection that looks at the state columns the interface does not expose. */
  const inspect = <T>(file: string, sql: string, ...params: unknown[]): T | undefined => {
    const db = new Database(file, { readonly: true });
    try {
      return db.prepare<unknown[], T>(sql).get(...params);
    } finally {
      db.close();
    }
  };

  it('keeps data across close and reopen of the same file', async () => {
    const file = nextFile();
    const first = await open(file);
    const a = (await first.append(newEvent({ data: { n: 1 } }), { publisher: 's' })).event;
    const b = (await first.append(newEvent({ rid: a.id }), { publisher: 's', scheduledAt: new Date(0) })).event;
    await first.persistEntityAssociation(a.id, 'customer-1');
    await first.delete(b.id);
    await first.close();

    const second = await open(file);
    expect(await second.read(a.id)).toEqual(a);
    expect(await second.head()).toBe(b.position);
    expect(await second.readEventlogByEid('customer-1')).toEqual([a]);
    expect(await second.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toEqual([a]);
    expect((await second.append(newEvent())).event.position).toBeGreaterThan(b.position);
  });

  it('uses WAL, creates the parent directory and records the schema version', async () => {
    const file = path.join(dir, 'nested', 'deeper', 'events.db');
    await open(file);
    const db = new Database(file, { readonly: true });
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).pluck().get()).toBe('2');
    } finally {
      db.close();
    }
  });

  it('works in memory', async () => {
    const store = await open(':memory:');
    const { event } = await store.append(newEvent());
    expect(await store.read(event.id)).toEqual(event);
  });

  it('refuses to work before init and after close', async () => {
    const store = new SqliteStore({ path: nextFile() });
    await expectCode(store.head(), 'E_EVENTFLOW_STORE_FAILED');
    await store.init();
    await store.close();
    await expectCode(store.read('x'), 'E_EVENTFLOW_STORE_FAILED');
  });

  it('refuses an invalid due date and stores nothing', async () => {
    const store = await open(nextFile());
    const input = newEvent();
    const invalid = { publisher: 's', scheduledAt: new Date(Number.NaN) };
    await expectCode(store.append(input, invalid), 'E_EVENTFLOW_INVALID_DATE');
    expect(await store.read(input.id)).toBeUndefined();
  });

  it('records the first outcome only, and the orphan time once', async () => {
    const file = nextFile();
    const store = await open(file);
    const { event } = await store.append(newEvent(), { publisher: 'spoke-1' });
    expect(await store.claimForRouting(event.id, 'hub-1')).toBe(true);
    expect(await store.claimForConsumer(event.id, 'c1')).toBe(true);
    await store.settle(event.id, 'failed');
    await store.settle(event.id, 'success');
    await store.markOrphan(event.id);
    type Row = { publisher: string; hub: string; consumer: string } & Record<'success' | 'failed' | 'orphan', string | null>;
    const row = inspect<Row>(file, 'SELECT * FROM event_published WHERE event_id = ?', event.id);
    expect(row).toMatchObject({ publisher: 'spoke-1', hub: 'hub-1', consumer: 'c1', success: null });
    expect(row?.failed).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const orphan = row?.orphan;
    // Time is what is tested: a second markOrphan, a later millisecond, leaves the first timestamp.
    await new Promise((resolve) => setTimeout(resolve, 3));
    await store.markOrphan(event.id);
    expect(inspect<Row>(file, 'SELECT * FROM event_published WHERE event_id = ?', event.id)?.orphan).toBe(orphan);
  });

  it('records scheduled execution and its first outcome', async () => {
    const file = nextFile();
    const store = await open(file);
    const due = new Date(Date.now() - 1000);
    const { event } = await store.append(newEvent(), { publisher: 's', scheduledAt: due });
    await store.claimDueScheduled(new Date());
    await store.settleScheduled(event.id, 'success');
    await store.settleScheduled(event.id, 'failed');
    type Row = { scheduled: string; executed: string | null; success: string | null; failed: string | null };
    const row = inspect<Row>(file, 'SELECT * FROM event_scheduled WHERE event_id = ?', event.id);
    expect(row?.scheduled).toBe(due.toISOString());
    expect(row?.executed).not.toBeNull();
    expect(row?.success).not.toBeNull();
    expect(row?.failed).toBeNull();
  });

  it('lets exactly one of two connections win each claim', async () => {
    const file = nextFile();
    const [one, two] = [await open(file), await open(file)];
    const { event } = await one.append(newEvent(), { publisher: 's', scheduledAt: new Date(0) });
    const routed = await Promise.all([one.claimForRouting(event.id, 'h1'), two.claimForRouting(event.id, 'h2')]);
    expect(routed.filter(Boolean)).toHaveLength(1);
    const consumed = await Promise.all([one.claimForConsumer(event.id, 'c1'), two.claimForConsumer(event.id, 'c2')]);
    expect(consumed.filter(Boolean)).toHaveLength(1);
    const scheduled = await Promise.all([one.claimDueScheduled(new Date()), two.claimDueScheduled(new Date())]);
    const fired = scheduled.flat();
    expect(fired.map((claimed) => claimed.id)).toEqual([event.id]);
    // Firing re-sequenced it; both connections see the new position.
    expect(fired[0]?.position).toBeGreaterThan(event.position);
    expect(await two.read(event.id)).toEqual(fired[0]);
    expect(await one.head()).toBe(fired[0]?.position);
  });

  it('answers the head and the reads after its own appends as the database does, with other connections writing, deleting and firing in between', async () => {
    // The store keeps its latest batches' published events for these reads (recent.ts); a store that
    // never appends answers every read from the database, and is the reference here.
    const file = nextFile();
    const [one, two, reference] = [await open(file), await open(file), await open(file)];
    const random = mulberry32(0x5eed);
    const int = (max: number): number => Math.floor(random() * max);
    const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
    const appended: string[] = [];
    // Recent events mostly: those are the ones the store keeps.
    const anEvent = (): string => pick(random() < 0.8 ? appended.slice(-8) : appended);
    let reads = 0;
    for (let step = 0; step < 400; step++) {
      const writer = pick([one, one, one, two]);
      const roll = int(10);
      if (roll < 6) {
        // A batch: several appends in one turn (one group commit), published, persisted, due-scheduled, with a rid.
        const batch = Array.from({ length: 1 + int(5) }, () => {
          const kind = int(6);
          const rid = kind === 5 && appended.length > 0 ? anEvent() : undefined;
          const options = kind === 3 ? {} : kind === 4 ? { publisher: 's', scheduledAt: new Date(Date.now() - 1000) } : { publisher: 's' };
          return writer.append(newEvent({ domain: pick(['a', 'b']), name: pick(['x', 'y']), rid }), options).catch(() => undefined);
        });
        for (const outcome of await Promise.all(batch)) if (outcome) appended.push(outcome.event.id);
      } else if (roll === 6 && appended.length > 0) await writer.delete(anEvent());
      else if (roll === 7) await writer.claimDueScheduled(new Date());
      else if (roll === 8 && appended.length > 0) await writer.catalog.cancelScheduled(anEvent(), pick(['a', 'b']));
      else if (roll === 9 && appended.length > 0) await writer.append(newEvent({ id: anEvent() }), { publisher: 's' }).catch(() => undefined);
      const head = await reference.head();
      for (const store of [one, two]) {
        // The head too: a store answers it from its last batch while no other connection has committed since.
        expect(await store.head()).toBe(head);
        const after = Math.max(0, head - int(12));
        const limit = pick([1, 3, 100]);
        const filter = { domain: pick(['a', 'b']), name: pick(['*', 'x', 'y']) };
        expect(await store.readPublishedAfter(filter, after, limit)).toEqual(await reference.readPublishedAfter(filter, after, limit));
        expect(await store.readPublishedSince(after, limit)).toEqual(await reference.readPublishedSince(after, limit));
        reads++;
      }
    }
    expect(reads).toBe(800);
  });

  it('reads the rid a cancelled scheduled event cleared, right after the publish that named it', async () => {
    const store = await open(nextFile());
    const later = await store.append(newEvent(), { publisher: 's', scheduledAt: new Date(Date.now() + 60_000) });
    const child = await store.append(newEvent({ rid: later.event.id }), { publisher: 's' });
    expect(await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toEqual([child.event]);
    expect(await store.catalog.cancelScheduled(later.event.id, later.event.domain)).toBe(true);
    expect(await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toEqual([{ ...child.event, rid: null }]);
  });

  it('leases a waiting group\'s new events in their append, in position order and up to what it takes; the rest wait for a claim', async () => {
    const store = await open(nextFile());
    const ledger = store.ledger();
    const group = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: 'billing' });
    const claim = (now = Date.now()) => ledger.claim({ group, owner: 'gw', consumer: 'GW', secret: 's', deadline: now + 10_000, now, limit: 10, maxAttempts: 5 });
    const publish = (name = 'created') => store.append(newEvent({ name }), { publisher: 's' });
    let credit = 2;
    const committed: Array<{ ids: string[]; given: number; covered: number | undefined }> = [];
    const claimer = {
      lease: () => (credit-- > 0 ? { owner: 'gw', consumer: 'GW', deadline: Date.now() + 10_000, now: Date.now() } : undefined),
      committed: (claimed: Array<{ event: { id: string } }>, given: number, covered: number | undefined) => void committed.push({ ids: claimed.map((c) => c.event.id), given, covered }),
      abandoned: () => expect.unreachable('the appends commit'),
    };
    // Its rows are written up to an event appended before it waited, not to the head: nothing is leased at append.
    expect((await claim()).claimed).toEqual([]);
    const unseen = await publish();
    ledger.claimAtAppend?.(group, claimer);
    const before = await publish();
    expect(committed).toEqual([]);
    expect((await claim()).claimed.map((c) => c.event.id)).toEqual([unseen.event.id, before.event.id]);
    // Written up to the head now: one batch of four, two of the group's taken, one left free.
    const batch = await Promise.all([publish(), publish('other'), publish(), publish()]);
    expect(committed).toEqual([{ ids: [batch[0]!.event.id, batch[2]!.event.id], given: 2, covered: undefined }]);
    // Leased once: a claim takes only the one left, and the leased ones settle by their delivery ids.
    const rest = await claim();
    expect(rest.claimed.map((c) => c.event.id)).toEqual([batch[3]!.event.id]);
    // Credit again, every event of the group leased at its append: covered up to the batch's head.
    credit = 5;
    const next = await Promise.all([publish(), publish('other')]);
    expect(committed[1]).toEqual({ ids: [next[0]!.event.id], given: 1, covered: next[1]!.event.position });
    expect((await claim()).claimed).toEqual([]);
    // Disarmed: appends are claimed as before.
    ledger.claimAtAppend?.(group, undefined);
    const later = await publish();
    expect(committed).toHaveLength(2);
    expect((await claim()).claimed.map((c) => c.event.id)).toEqual([later.event.id]);
  });

  it('rows leased at append carry their pid from the moment an ordered group reads their ledger (a default group of the domain made ordered)', async () => {
    const file = nextFile();
    const store = await open(file);
    const ledger = store.ledger();
    const group = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: '' });
    const now = Date.now();
    expect((await ledger.claim({ group, owner: 'gw', consumer: 'GW', secret: 's', deadline: now + 10_000, now, limit: 10, maxAttempts: 5 })).claimed).toEqual([]);
    const leased: string[] = [];
    ledger.claimAtAppend?.(group, {
      lease: () => ({ owner: 'gw', consumer: 'GW', deadline: Date.now() + 10_000, now: Date.now() }),
      committed: (claimed: Array<{ event: { id: string } }>) => void leased.push(...claimed.map((c) => c.event.id)),
      abandoned: () => expect.unreachable('the appends commit'),
    });
    const reader = new Database(file, { readonly: true });
    const pid = (id: string): string | null => (reader.prepare(`SELECT pid FROM eventflow_delivery WHERE event_id = ?`).get(id) as { pid: string | null }).pid;
    try {
      const before = await store.append(newEvent({ pid: 'p-before' }), { publisher: 's' });
      expect(pid(before.event.id)).toBeNull();
      // The default groups of a domain share one ledger: one of them ordered, every row of it carries its pid.
      await ledger.ensureGroup({ domain: 'orders', name: 'shipped', group: '' }, { ordered: true });
      const after = await store.append(newEvent({ pid: 'p-after' }), { publisher: 's' });
      expect(leased).toEqual([before.event.id, after.event.id]);
      expect([pid(before.event.id), pid(after.event.id)]).toEqual(['p-before', 'p-after']);
    } finally {
      reader.close();
    }
  });

  it("a member registered again with the group's options leaves the group as it is (nothing written); a change of `ordered` is written, and back", async () => {
    const file = nextFile();
    const store = await open(file);
    const ledger = store.ledger();
    const key = { domain: 'orders', name: 'created', group: 'shipping' };
    await ledger.ensureGroup(key, { ordered: true });
    await Promise.all(Array.from({ length: 200 }, (_, i) => store.append(newEvent({ name: 'created', pid: `p${i % 10}` }), { publisher: 's' })));
    const reader = new Database(file, { readonly: true });
    // Changes when another connection commits a write to the file.
    const version = (): number => reader.pragma('data_version', { simple: true }) as number;
    try {
      const before = version();
      expect(await ledger.ensureGroup(key, { ordered: true })).toMatchObject({ ordered: true });
      expect(await ledger.ensureGroup(key)).toMatchObject({ ordered: true });
      expect(version()).toBe(before);
      // A change is written.
      expect(await ledger.ensureGroup(key, { ordered: false })).toMatchObject({ ordered: false });
      expect(version()).not.toBe(before);
      expect(await ledger.ensureGroup(key, { ordered: true })).toMatchObject({ ordered: true });
    } finally {
      reader.close();
    }
  });

  it("claims of an unordered group's backlog write only the rows they lease (not the backlog's ahead, in one long transaction); an ordered group's are written ahead", async () => {
    const file = nextFile();
    const store = await open(file);
    const ledger = store.ledger();
    const unordered = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: 'billing' });
    const ordered = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: 'shipping' }, { ordered: true });
    await Promise.all(Array.from({ length: 1_000 }, (_, i) => store.append(newEvent({ name: 'created', pid: `p${i % 10}` }), { publisher: 's' })));
    const claim = (group: typeof unordered, limit: number) => {
      const now = Date.now();
      return ledger.claim({ group, owner: 'gw', consumer: 'GW', secret: 's', deadline: now + 10_000, now, limit, maxAttempts: 5 });
    };
    const reader = new Database(file, { readonly: true });
    const rows = (grp: string): number => (reader.prepare(`SELECT COUNT(*) AS n FROM eventflow_delivery WHERE grp = ?`).get(grp) as { n: number }).n;
    try {
      expect((await claim(unordered, 5)).claimed).toHaveLength(5);
      expect(rows('billing')).toBe(5);
      expect((await claim(unordered, 300)).claimed).toHaveLength(300);
      expect(rows('billing')).toBe(305);
      expect((await ledger.groups(Date.now())).find((summary) => summary.group === 'billing')).toMatchObject({ pending: 695, inFlight: 305 });
      // An ordered group reads the first unsettled row of each pid: its backlog's rows come first.
      expect((await claim(ordered, 5)).claimed).toHaveLength(5);
      expect(rows('shipping')).toBe(1_000);
    } finally {
      reader.close();
    }
  });
});
