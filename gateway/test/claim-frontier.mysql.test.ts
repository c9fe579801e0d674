/**
 * A long backlog's claims on MariaDB (store/mysql/claim-frontier.ts): a claim writes the group's
 * rows about a page ahead, not the whole backlog at once (~1 s before the first delivery of 20,000
 * queued jobs, every member's first claim with it), and looks for free rows from where the last
 * full page ended; what is freed behind that point is still taken.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as mysqlPromise from 'mysql2/promise';
import type { ClaimResult, GroupRecord } from '../src/store/ledger.js';
import type { MysqlStore } from '../src/store/mysql/mysql.js';
import { FREE_RESCAN_MS } from '../src/store/mysql/claim-frontier.js';
import { newEvent } from './store-suite.js';
import { mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';
import { storeOpener } from './mysql-stores.js';

describe.skipIf(mysqlUnavailable !== undefined)('claims of a long backlog (MariaDB)', () => {
  const databases = useTestDatabases();
  const open = storeOpener(databases);
  const append = async (store: MysqlStore, count: number, fields: { domain?: string; name?: string } = {}): Promise<string[]> => {
    const ids: string[] = [];
    for (let at = 0; at < count; at += 500) {
      const batch = await Promise.all(Array.from({ length: Math.min(500, count - at) }, () => store.append(newEvent(fields), { publisher: 's' })));
      ids.push(...batch.map((appended) => appended.event.id));
    }
    return ids;
  };
  const claim = (store: MysqlStore, group: GroupRecord, limit: number, now = Date.now()): Promise<ClaimResult> =>
    store.ledger().claim({ group, owner: 'gw', consumer: 'CLAIM', secret: `s${now}-${Math.random()}`, deadline: now + 60_000, now, limit, maxAttempts: 5 });
  /** Two gateways' stores on one database, 400 jobs queued, and the first page of 100 claimed on `here`. */
  const twoGatewaysPageClaimed = async () => {
    const db = await databases.fresh();
    const here = await open(db);
    const there = await open(db);
    const group = await here.ledger().ensureGroup({ domain: 'orders', name: 'created', group: 'workers' });
    const queued = await append(here, 400);
    const now = Date.now();
    const page = await claim(here, group, 100, now);
    expect(page.claimed.map((one) => one.event.id)).toEqual(queued.slice(0, 100));
    return { here, there, group, queued, now, page };
  };
  /**
   * Faults in the ledger's statements (mysql2's execute, which select() and affected() use): `fault` sees
   * each statement and may throw (a deadlock) or hold it (a slow statement) before it is sent.
   */
  const injectFaults = (fault: (sql: string) => Promise<void> | void): void => {
    // The class of the pools' connections (exported at run time, not in mysql2's types).
    const { PromiseConnection } = mysqlPromise as unknown as { PromiseConnection: { prototype: { execute: (sql: string, ...rest: unknown[]) => Promise<unknown> } } };
    const prototype = PromiseConnection.prototype;
    const execute = prototype.execute;
    vi.spyOn(prototype, 'execute').mockImplementation(async function (this: unknown, sql: string, ...rest: unknown[]) {
      await fault(sql);
      return execute.call(this, sql, ...rest);
    });
  };
  afterEach(() => void vi.restoreAllMocks());
  const rows = async (db: TestDatabase, grp: string): Promise<number> =>
    Number((await db.query<{ n: number | string }>(`SELECT COUNT(*) AS n FROM eventflow_delivery WHERE grp = ?`, [grp]))[0]?.n);

  it('the first claim of 3,000 queued jobs writes rows about a page ahead; the claims then take every job once, full pages in position order', async () => {
    const db = await databases.fresh();
    const store = await open(db);
    const group = await store.ledger().ensureGroup({ domain: 'orders', name: 'created', group: 'workers' });
    const queued = await append(store, 3000);
    const first = await claim(store, group, 10);
    expect(first.claimed.map((one) => one.event.id)).toEqual(queued.slice(0, 10));
    // All 3,000 before: the first delivery waited for every row of the backlog to be written.
    expect(await rows(db, 'workers')).toBeLessThanOrEqual(600);
    const taken = [...first.claimed];
    for (;;) {
      const next = await claim(store, group, 100);
      if (next.claimed.length === 0) break;
      if (taken.length + next.claimed.length < queued.length) expect(next.claimed).toHaveLength(100);
      taken.push(...next.claimed);
      await store.ledger().apply(next.claimed.map((one) => ({ kind: 'outcome' as const, delivery: one.delivery, outcome: 'success' as const })));
    }
    expect(taken.map((one) => one.event.id)).toEqual(queued);
  });

  it("a group's events spread thin among another domain's: each claim fills its page, writing further as it needs", async () => {
    const db = await databases.fresh();
    const store = await open(db);
    const group = await store.ledger().ensureGroup({ domain: 'orders', name: 'created', group: 'workers' });
    const mine: string[] = [];
    for (let i = 0; i < 30; i++) {
      await append(store, 99, { domain: 'billing' });
      mine.push(...(await append(store, 1)));
    }
    const taken: string[] = [];
    for (let round = 0; round < 3; round++) {
      const next = await claim(store, group, 10);
      expect(next.claimed).toHaveLength(10);
      taken.push(...next.claimed.map((one) => one.event.id));
    }
    expect(taken).toEqual(mine);
    expect((await claim(store, group, 10)).claimed).toEqual([]);
  });

  it("rows written but not claimable (the default group's events a v4 spoke took): a short claim says to claim again at once until the backlog's rows are written", async () => {
    const db = await databases.fresh();
    const store = await open(db);
    const group = await store.ledger().ensureGroup({ domain: 'orders', name: 'created', group: '' });
    const queued = await append(store, 1200);
    const spoken = queued.slice(0, 1150);
    await db.query(`UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = 'SPOKE-1' WHERE event_id IN (?)`, [spoken]);
    const taken: string[] = [];
    for (let round = 0; round < 50 && taken.length < 50; round++) {
      const now = Date.now();
      const next = await claim(store, group, 10, now);
      taken.push(...next.claimed.map((one) => one.event.id));
      // Short with rows still to write: due now, not at the group's poll (1 s later), once per span of rows.
      if (next.claimed.length < 10 && taken.length < 50) expect(next.nextDue).toBe(now);
    }
    expect(taken).toEqual(queued.slice(1150));
  });

  it('a job freed behind the scans is taken again: at once after a release here, within FREE_RESCAN_MS after one on another gateway', async () => {
    const { here, there, group, queued, now, page } = await twoGatewaysPageClaimed();
    await here.ledger().apply([{ kind: 'release', delivery: page.claimed[5]!.delivery }]);
    expect((await claim(here, group, 1, now + 1)).claimed.map((one) => one.event.id)).toEqual([queued[5]]);
    await claim(here, group, 50, now + 2);
    await there.ledger().apply([{ kind: 'release', delivery: page.claimed[7]!.delivery }]);
    const later = await claim(here, group, 1, now + 2 + FREE_RESCAN_MS);
    expect(later.claimed.map((one) => one.event.id)).toEqual([queued[7]]);
  });

  it('a claim run again after a deadlock takes the oldest free rows: its rolled-back attempt does not move where the retry looks from', async () => {
    const db = await databases.fresh();
    const store = await open(db);
    const group = await store.ledger().ensureGroup({ domain: 'orders', name: 'created', group: 'workers' });
    const queued = await append(store, 300);
    // The first attempt's leases are refused as a deadlock victim's (#transaction rolls back and runs the claim again).
    let deadlocks = 0;
    injectFaults((sql) => {
      if (deadlocks === 0 && sql.startsWith('UPDATE eventflow_delivery FORCE INDEX (PRIMARY) SET delivery')) {
        deadlocks += 1;
        throw Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), { code: 'ER_LOCK_DEADLOCK', errno: 1213 });
      }
    });
    const first = await claim(store, group, 10);
    expect(deadlocks).toBe(1);
    // Before: the retry looked for free rows after those the rolled-back attempt had scanned, and took the next page.
    expect(first.claimed.map((one) => one.event.id)).toEqual(queued.slice(0, 10));
    const second = await claim(store, group, 10);
    expect(second.claimed.map((one) => one.event.id)).toEqual(queued.slice(10, 20));
  });

  it("a claim whose scan began before a rescan does not send the next claims' scans past the rows the rescan is taking back", async () => {
    const { here, there, group, queued, now, page } = await twoGatewaysPageClaimed();
    // Another gateway hands 30 of them back (its gateway stopping, say): free behind this gateway's scans.
    await there.ledger().apply(page.claimed.slice(0, 30).map((one) => ({ kind: 'release' as const, delivery: one.delivery, uncount: true })));
    // A claim looks from where the page ended, and its scan is slow (held until the gate opens).
    let letThrough: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (letThrough = resolve));
    let held: () => void = () => undefined;
    const holding = new Promise<void>((resolve) => (held = resolve));
    let hold = true;
    injectFaults(async (sql) => {
      if (hold && sql.includes('FORCE INDEX (idx_delivery_queue)')) {
        hold = false;
        held();
        await gate;
      }
    });
    const slow = claim(here, group, 10, now + 1);
    await holding;
    // Meanwhile a claim past FREE_RESCAN_MS scans from the group's start: the first 10 handed back.
    const rescan = await claim(here, group, 10, now + FREE_RESCAN_MS + 1);
    expect(rescan.claimed.map((one) => one.event.id)).toEqual(queued.slice(0, 10));
    letThrough();
    expect((await slow).claimed.map((one) => one.event.id)).toEqual(queued.slice(100, 110));
    // The next claims go on through the rows handed back. Before, the slow claim's scan set where they looked from
    // (past position 110), and the 20 left waited for the next rescan, a page of them per FREE_RESCAN_MS.
    const next = await claim(here, group, 10, now + FREE_RESCAN_MS + 2);
    expect(next.claimed.map((one) => one.event.id)).toEqual(queued.slice(10, 20));
  });
});
