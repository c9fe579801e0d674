/**
 * Ledger writes that ride an append batch's transaction (store/sqlite/append-riders.ts): a settle
 * due in the turn of an append is committed with it, by the same transaction; a rider that fails
 * rolls back alone; a batch that fails, or never comes, leaves its riders to run alone. Real SQLite
 * files throughout.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { AppendRiders, type RodeRider } from '../src/store/sqlite/append-riders.js';
import { immediate } from '../src/store/sqlite/transactions.js';
import { SqliteStore } from '../src/store/sqlite/sqlite.js';
import { LedgerWriter } from '../src/delivery/ledger-writer.js';
import type { LedgerAction } from '../src/store/ledger.js';
import { newEvent } from './store-suite.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eventflow-riders-'));
let files = 0;
const nextFile = (): string => path.join(dir, `riders-${++files}.db`);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function table(): { db: Database.Database; riders: AppendRiders; insert(x: number): number; rows(): number[] } {
  const db = new Database(nextFile());
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (x INTEGER)');
  const riders = new AppendRiders((work) => immediate(db, work));
  return {
    db,
    riders,
    insert: (x) => db.prepare('INSERT INTO t (x) VALUES (?)').run(x).changes,
    rows: () => db.prepare('SELECT x FROM t ORDER BY x').pluck().all() as number[],
  };
}

describe('AppendRiders', () => {
  it('runs its riders inside the batch and answers each once the batch commits; one that throws rolls back alone', async () => {
    const { db, riders, insert, rows } = table();
    const one = riders.add(() => insert(1));
    const two = riders.add(() => {
      insert(2);
      throw new Error('rider two refused');
    });
    let answered = false;
    void one.then(() => (answered = true));
    let rode: RodeRider[] = [];
    immediate(db, () => {
      insert(0);
      rode = riders.ride();
      // Inside the batch's transaction: the riders' rows are there, not yet committed.
      expect(db.inTransaction).toBe(true);
    });
    await Promise.resolve();
    expect(answered).toBe(false);
    riders.committed(rode);
    await expect(one).resolves.toBe(1);
    await expect(two).rejects.toThrow('rider two refused');
    expect(rows()).toEqual([0, 1]);
    db.close();
  });

  it('runs the riders of a batch that failed alone, each in a transaction of its own', async () => {
    const { db, riders, insert, rows } = table();
    const rider = riders.add(() => insert(3));
    let rode: RodeRider[] = [];
    expect(() =>
      immediate(db, () => {
        insert(0);
        rode = riders.ride();
        throw new Error('the batch failed');
      }),
    ).toThrow('the batch failed');
    expect(rows()).toEqual([]);
    riders.failed(rode);
    await expect(rider).resolves.toBe(1);
    expect(rows()).toEqual([3]);
    db.close();
  });

  it('runs a rider alone in the next turn when no batch takes it', async () => {
    const { db, riders, insert, rows } = table();
    await expect(riders.add(() => insert(4))).resolves.toBe(1);
    expect(rows()).toEqual([4]);
    // Taken by nothing, it is not run twice by a batch that comes later.
    immediate(db, () => expect(riders.ride()).toEqual([]));
    db.close();
  });
});

describe('a settle due in the turn of an append (SQLite store)', () => {
  it('is committed by the append batch\'s transaction, and both are answered', async () => {
    const store = new SqliteStore({ path: nextFile() });
    await store.init();
    try {
      const ledger = store.ledger();
      const group = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: 'billing' });
      const job = await store.append(newEvent(), { publisher: 's' });
      const now = Date.now();
      const [claimed] = (await ledger.claim({ group, owner: 'gw', consumer: 'GW', secret: 's', deadline: now + 10_000, now, limit: 10, maxAttempts: 5 })).claimed;
      expect(claimed?.event.id).toBe(job.event.id);
      // The ledger's own transaction is not used: the settle goes through the store's append batch.
      const alone: LedgerAction[][] = [];
      const apply = ledger.apply.bind(ledger);
      ledger.apply = (actions) => (alone.push([...actions]), apply(actions));
      const writer = new LedgerWriter(() => ledger, () => store.appendsDue(), (actions) => store.applyWithAppends(actions));
      const settle: LedgerAction = { kind: 'outcome', delivery: claimed!.delivery, outcome: 'success' };
      const [ended, next] = await Promise.all([writer.write(settle), store.append(newEvent(), { publisher: 's' })]);
      expect(alone).toEqual([]);
      expect(ended?.eventId).toBe(job.event.id);
      expect(next.event.position).toBeGreaterThan(job.event.position);
      // Recorded: the same settle again finds the delivery ended.
      expect(await apply([settle])).toEqual([undefined]);
      // With no append due, the settle is written by the ledger's own transaction, as before.
      const later = Date.now();
      const [second] = (await ledger.claim({ group, owner: 'gw', consumer: 'GW', secret: 's', deadline: later + 10_000, now: later, limit: 10, maxAttempts: 5 })).claimed;
      expect(second?.event.id).toBe(next.event.id);
      expect((await writer.write({ kind: 'outcome', delivery: second!.delivery, outcome: 'success' }))?.eventId).toBe(next.event.id);
      expect(alone).toHaveLength(1);
    } finally {
      await store.close();
    }
  });
});
