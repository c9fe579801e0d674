/**
 * The SQLite store's write check, for /readyz (readiness.ts): whether a write would go through now.
 *
 * Another process in a write transaction on the file (the `sqlite3` shell, a script) fails every write of the gateway
 * (SQLITE_BUSY after SQLITE_BUSY_TIMEOUT_MS), but only a write found that out: an idle gateway answered 200 for as long
 * as the lock was held, and a load balancer sent it the clients whose writes then failed. So each check takes the
 * write lock for a moment, which writes nothing. After a failed write (a full disk), it also writes and deletes a few
 * publishes' worth of pages until that succeeds (WriteHealth).
 */
import type Database from 'better-sqlite3';
import { EventflowError } from '@eventflow/core';
import type { WriteHealth } from '../write-health.js';

/** What the write check writes (then deletes) while writes fail: a few publishes' worth of pages. */
const WRITE_CHECK_BYTES = 64 * 1024;

/** Resolves when a write would go through; rejects with E_EVENTFLOW_STORE_FAILED and the driver's error as its cause. */
export function checkSqliteWrites(db: Database.Database, writes: WriteHealth, truncateWal: () => Promise<unknown> | undefined): Promise<void> {
  // Within a transaction of the gateway's own (across an await) the lock is the gateway's.
  if (!db.inTransaction) {
    try {
      db.exec('BEGIN IMMEDIATE');
      db.exec('ROLLBACK');
    } catch (error) {
      writes.failed();
      return Promise.reject(new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the SQLite store cannot take its write lock: another process holds a write transaction on its file', { cause: error }));
    }
  }
  return writes.check(async () => {
    // The WAL's space back first (a full disk); then a write the size of a few publishes, taken
    // back: rewriting a page in place could succeed where a publish cannot.
    await truncateWal();
    db.prepare(`INSERT OR REPLACE INTO meta (key, value) VALUES ('write_check', zeroblob(${WRITE_CHECK_BYTES}))`).run();
    db.prepare(`DELETE FROM meta WHERE key = 'write_check'`).run();
  });
}
