/**
 * The checkpoint worker (store/sqlite/checkpointer.ts) against a writer that never waits for a lock
 * (busy_timeout 0), as the gateway's connection would meet one: the WAL is started over again and
 * again under continuous writes, and no write ever finds the database locked by the worker. Before,
 * the worker started the WAL over with a RESTART checkpoint that held the write lock while it copied
 * and synced, and the gateway's commits that met it slept in SQLite's busy handler on the event loop
 * (1 + 2 + 5 ms and more, about twice a second at a steady 500 jobs/s).
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { startCheckpointer, type Checkpointer } from '../src/store/sqlite/checkpointer.js';
import { eventually } from '@eventflow/test-support/wait';

let dir: string | undefined;
let checkpointer: Checkpointer | undefined;
let db: Database.Database | undefined;
afterEach(async () => {
  await checkpointer?.stop();
  db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  checkpointer = db = dir = undefined;
});

/** The WAL header's checkpoint sequence number: it grows by one each time the WAL is started over. */
function walSequence(wal: string): number {
  const fd = openSync(wal, 'r');
  try {
    const header = Buffer.alloc(32);
    return readSync(fd, header, 0, 32, 0) === 32 ? header.readUInt32BE(12) : 0;
  } finally {
    closeSync(fd);
  }
}

describe('the checkpoint worker', () => {
  it('starts the WAL over under continuous writes through the writer\'s own connection, never holding the write lock', async () => {
    dir = mkdtempSync(join(tmpdir(), 'eventflow-checkpointer-'));
    const path = join(dir, 'store.db');
    const writer = (db = new Database(path));
    writer.pragma('journal_mode = WAL');
    writer.pragma('synchronous = NORMAL');
    writer.pragma('wal_autocheckpoint = 0');
    // A commit that meets a lock fails at once (SQLITE_BUSY) instead of sleeping: the test's proof.
    writer.pragma('busy_timeout = 0');
    writer.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)');
    let limit = 0;
    let restarts = 0;
    checkpointer = await startCheckpointer(
      path,
      (why) => expect.fail(`the worker died: ${why}`),
      (frames) => void (limit = frames),
      () => {
        restarts += 1;
        writer.pragma('wal_checkpoint(PASSIVE)');
      },
    );
    await eventually(() => limit > 0, 5_000, 'the worker to set the WAL limit');
    const wal = `${path}-wal`;
    const insert = writer.prepare('INSERT INTO t (body) VALUES (?)');
    const body = Buffer.alloc(3_000, 7);
    const first = walSequence(wal);
    let busy = 0;
    let commits = 0;
    // A commit at a time, the event loop free between them for the worker's requests, until the WAL
    // has been started over three times (about the limit in pages each: a row of 3 kB is a page).
    const deadline = Date.now() + 30_000;
    while (walSequence(wal) - first < 3 && Date.now() < deadline) {
      try {
        writer.transaction(() => {
          for (let j = 0; j < 20; j++) insert.run(body);
        })();
        commits += 1;
      } catch (error) {
        if ((error as { code?: string }).code !== 'SQLITE_BUSY') throw error;
        busy += 1;
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(busy).toBe(0);
    expect(walSequence(wal) - first).toBeGreaterThanOrEqual(3);
    // The writer's connection finished each restart (its PASSIVE copied the last frames).
    expect(restarts).toBeGreaterThanOrEqual(3);
    expect((writer.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n).toBe(commits * 20);
  }, 60_000);
});
