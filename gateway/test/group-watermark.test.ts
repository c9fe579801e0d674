/**
 * A group's watermark (every event up to it has its ledger row) reaches the group's row in the store
 * at most once per second, and also by a claim that does not move it: a drain writes its rows within
 * its first second, and the row kept the watermark of before it until an event moved it again. Every
 * listing (each /metrics scrape) then counted the drain's events one by one, and a restart wrote every
 * row of the drain again. On a SQLite file and on MariaDB, the row read beside the store.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { EventStore } from '../src/store/store.js';
import type { GroupRecord } from '../src/store/ledger.js';
import { SqliteStore } from '../src/store/sqlite/sqlite.js';
import { MysqlStore } from '../src/store/mysql/mysql.js';
import { newEvent } from './store-suite.js';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';

const key = { domain: 'orders', name: 'created', group: 'billing' };

/** Claims of the group at `now` (ms: the ledger's clock as the gateway passes it). */
async function claim(store: EventStore, group: GroupRecord, now: number, limit = 10): Promise<number> {
  const result = await store.ledger().claim({ group, owner: 'gw-1', consumer: 'GW', secret: `s-${now}`, deadline: now + 60_000, now, limit, maxAttempts: 5 });
  return result.claimed.length;
}

/** Two claims within a second write rows for five events; a claim past that second, with nothing new, stores the watermark. */
async function drainThenPoll(store: EventStore, stored: () => Promise<number | null>): Promise<void> {
  const group = await store.ledger().ensureGroup(key);
  for (let i = 0; i < 2; i++) await store.append(newEvent({ domain: 'orders', name: 'created' }), { publisher: 's' });
  const at = Date.now();
  expect(await claim(store, group, at)).toBe(2);
  const events = [];
  for (let i = 0; i < 3; i++) events.push((await store.append(newEvent({ domain: 'orders', name: 'created' }), { publisher: 's' })).event);
  expect(await claim(store, group, at + 10)).toBe(3);
  const head = events[2]!.position;
  // Within the second: the row may lag.
  expect(await stored()).not.toBe(head);
  // The drained group's poll, past the second: nothing to claim, the watermark stored.
  expect(await claim(store, group, at + 1_500)).toBe(0);
  await expect.poll(stored, { timeout: 2_000 }).toBe(head);
}

describe('a group watermark reaches its row after a drain', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eventflow-watermark-'));
  const opened: EventStore[] = [];
  afterEach(async () => void (await Promise.all(opened.splice(0).map((store) => store.close()))));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('SQLite', async () => {
    const file = path.join(dir, 'w.db');
    const store = new SqliteStore({ path: file });
    await store.init();
    opened.push(store);
    const reader = new Database(file, { readonly: true });
    try {
      await drainThenPoll(store, async () => (reader.prepare('SELECT materialized FROM eventflow_group WHERE grp = ?').get(key.group) as { materialized: number | null }).materialized);
    } finally {
      reader.close();
    }
  });

  describe.skipIf(mysqlUnavailable !== undefined)('MariaDB', () => {
    const databases = useTestDatabases();
    it('MariaDB', async () => {
      const db = await databases.fresh();
      const store = new MysqlStore(db.options);
      databases.onCleanup(() => store.close());
      await store.init();
      await drainThenPoll(store, async () => {
        const rows = await db.query<{ materialized: number | string | null }>('SELECT materialized FROM eventflow_group WHERE grp = ?', [key.group]);
        const value = rows[0]?.materialized;
        return value === null || value === undefined ? null : Number(value);
      });
    });
  });
});
