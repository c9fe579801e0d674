/**
 * Transactions through one better-sqlite3 wrapper per database, the work passed to it:
 * `db.transaction(fn)` builds four wrappers and defines their properties at every call (~4.5 µs a
 * transaction more than a cached wrapper, measured), and the appends made one call per batch, the
 * ledger one per claim and settle batch. Nesting works as with any wrapper (a savepoint inside a
 * transaction).
 */
import type Database from 'better-sqlite3';

type Runner = Database.Transaction<(work: () => unknown) => unknown>;

const runners = new WeakMap<Database.Database, Runner>();

function runner(db: Database.Database): Runner {
  let found = runners.get(db);
  if (!found) runners.set(db, (found = db.transaction((work: () => unknown) => work())));
  return found;
}

/** `work` in a BEGIN IMMEDIATE transaction (the write lock taken up front). */
export function immediate<T>(db: Database.Database, work: () => T): T {
  return runner(db).immediate(work) as T;
}

/** `work` in a plain (deferred) transaction. */
export function deferred<T>(db: Database.Database, work: () => T): T {
  return runner(db)(work) as T;
}

/**
 * How long a write of the open store waits for the write lock (`busy_timeout`). SQLite waits in
 * its busy handler on the gateway's one thread: with 5 s, a process outside holding a write
 * transaction on the file (the `sqlite3` shell, a script) stalled every connection for 5 s at each
 * write tried, /healthz included. Nothing of the gateway's own holds that lock for long (its
 * checkpoint worker copies with PASSIVE, which takes no write lock), so a write that meets such a
 * holder fails soon with SQLITE_BUSY instead: answered as the store's state (nothing stored,
 * retryable; the clients send it again), /readyz 503 until a write goes through again.
 */
export const SQLITE_BUSY_TIMEOUT_MS = 200;
