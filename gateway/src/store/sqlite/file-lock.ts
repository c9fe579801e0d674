/**
 * One gateway per SQLite file. Two gateways on one file would both start and report ready, and
 * neither would route the other's events (the local router is in-process), so the second is
 * refused, naming the file and the process that holds it.
 *
 * The lock is SQLite's own file lock, on a small database beside the store (`<file>-lock`): the
 * operating system drops it when its process ends, however it ends (kill -9 included), so a stale
 * lock cannot block a restart, on any path length, and across containers sharing a volume. Who
 * holds it is written in that database before the lock is taken: the holder keeps a SHARED lock
 * (`locking_mode = EXCLUSIVE` holds the first lock taken), under which another process can still
 * read the holder's row, but cannot commit a row of its own.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import Database from 'better-sqlite3';
import { EventflowError } from '@eventflow/core';

export interface LockHolder {
  pid: number;
  host: string;
  gateway: string;
  /** When it took the lock (ISO-8601 UTC). */
  since: string;
}

export interface SqliteFileLock {
  readonly path: string;
  /** Lets the next gateway start on the file. Idempotent. */
  release(): void;
}

const BUSY = new Set(['SQLITE_BUSY', 'SQLITE_LOCKED']);
const isBusy = (error: unknown): boolean => BUSY.has(String((error as { code?: unknown }).code));

/** Another gateway holds `dbPath`: E_EVENTFLOW_STORE_LOCKED, saying which and what to do. */
export function storeLocked(dbPath: string, holder: LockHolder | undefined): EventflowError {
  const who =
    holder === undefined
      ? 'another process (it is starting or stopping)'
      : `gateway ${holder.gateway}, process ${holder.pid}${holder.host === hostname() ? '' : ` on host ${holder.host}`}, since ${holder.since}`;
  return new EventflowError(
    'E_EVENTFLOW_STORE_LOCKED',
    `the SQLite database ${JSON.stringify(dbPath)} is in use by ${who}; stop that gateway, or set EVENTFLOW_SQLITE_PATH to another file (gateways that share a store need EVENTFLOW_STORE=mysql)`,
    { details: { path: dbPath, ...(holder ? { holder } : {}) } },
  );
}

/**
 * Takes the lock of `dbPath` for `gateway`, or throws E_EVENTFLOW_STORE_LOCKED naming the holder.
 * Two gateways starting at once: exactly one gets it (the last row written before any SHARED lock
 * is taken wins; the other reads that row under its own SHARED lock and steps back).
 */
export async function lockSqliteFile(dbPath: string, gateway: string): Promise<SqliteFileLock> {
  const path = `${dbPath}-lock`;
  let holder: LockHolder | undefined;
  // A holder caught between its write and its lock (a few statements) answers BUSY to reads too: try again shortly.
  for (let attempt = 0; attempt < 20; attempt++) {
    const db = new Database(path, { timeout: 0 });
    try {
      const token = randomUUID();
      // One commit, not two: on a new file each is a journal written and synced (~3 ms of a start).
      db.transaction(() => {
        db.exec('CREATE TABLE IF NOT EXISTS holder (id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, host TEXT NOT NULL, gateway TEXT NOT NULL, since TEXT NOT NULL, token TEXT NOT NULL)');
        db.prepare('INSERT OR REPLACE INTO holder (id, pid, host, gateway, since, token) VALUES (1, ?, ?, ?, ?, ?)').run(process.pid, hostname(), gateway, new Date().toISOString(), token);
      })();
      db.pragma('locking_mode = EXCLUSIVE');
      const row = db.prepare('SELECT pid, host, gateway, since, token FROM holder WHERE id = 1').get() as (LockHolder & { token: string }) | undefined;
      if (row?.token === token) return held(db, path);
      // Another gateway wrote its row after ours, before either of us locked: it holds the file.
      const { token: _theirs, ...theirs } = row ?? ({} as LockHolder & { token: string });
      db.close();
      throw storeLocked(dbPath, row ? theirs : undefined);
    } catch (error) {
      if (error instanceof EventflowError) throw error;
      if (!isBusy(error)) {
        db.close();
        throw error;
      }
      // Held: a read is still allowed under the holder's SHARED lock.
      try {
        if (db.inTransaction) db.exec('ROLLBACK');
        holder = db.prepare('SELECT pid, host, gateway, since FROM holder WHERE id = 1').get() as LockHolder | undefined;
        db.close();
        throw storeLocked(dbPath, holder);
      } catch (readError) {
        if (readError instanceof EventflowError) throw readError;
        db.close();
        if (!isBusy(readError)) throw readError;
      }
    }
    // The holder is between statements: no fence to wait on in another process.
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw storeLocked(dbPath, holder);
}

function held(db: Database.Database, path: string): SqliteFileLock {
  let open = true;
  return {
    path,
    release() {
      if (!open) return;
      open = false;
      db.close();
    },
  };
}
