/**
 * Whether the database file at the store's path, and its WAL beside it, are still the files the
 * gateway has open.
 *
 * An operator who removes the database file (or its folder), or puts another file in its place,
 * leaves the gateway writing to a file that no process can open again: every write succeeds, /readyz
 * said ready, and everything stored, before the removal too, is gone once the process ends. One who
 * removes the WAL leaves the commits since in a WAL no process can open again: they reach the
 * database file only with a checkpoint, and a crash before it lost what had been acknowledged (145 of
 * 250 publishes, gateway killed with -9 a second later). One who removes the shared-memory file
 * (-shm: the WAL's index and its locks) leaves the next process that opens the database a new one,
 * whose locks the gateway does not take: that process's writes and the gateway's went into one WAL
 * unaware of each other, and the file was corrupt (integrity_check: pages referenced twice, indexes
 * short of rows), with /readyz ready. SQLite refuses writes to a moved database
 * file in rollback-journal mode (SQLITE_READONLY_DBMOVED), not in WAL mode. So the paths' device and
 * inode are compared with the files opened, by /readyz at each call and before a write transaction at
 * most every CHECK_MS (a stat costs ~4 µs on a loaded machine, a small commit ~30), and a write is
 * refused with that code when they differ: appends are answered E_EVENTFLOW_STORE_FAILED (`stored:
 * false`), settles and claims fail, /readyz says 503. Only a restart opens the files at the paths
 * again (or the files moved back to them).
 */
import { statSync, type Stats } from 'node:fs';
import { EventflowError } from '@eventflow/core';

/** SQLite's own code for a write to a database file that was moved or removed while open. */
const moved = Object.assign(new Error('the database file was moved or removed while open'), { code: 'SQLITE_READONLY_DBMOVED' });

/** How old the last comparison may be for a write to go by it. */
const CHECK_MS = 100;

export class StoreFile {
  readonly #path: string;
  readonly #opened: Stats;
  /** The WAL as opened (SQLite keeps it, same inode, while the database is open); none if there was none. */
  readonly #wal: Stats | undefined;
  /** The shared-memory file as opened, likewise. */
  readonly #shm: Stats | undefined;
  #checkedAt = -Infinity;
  #last: EventflowError | undefined;
  /** Told when a comparison finds a path no longer holding its open file (true), or holding it again (false). */
  readonly #onMoved: ((moved: boolean) => void) | undefined;

  /** The files at `path`, `path-wal` and `path-shm` now, as the ones the store has open (read right after opening them). */
  constructor(path: string, onMoved?: (moved: boolean) => void) {
    this.#path = path;
    this.#onMoved = onMoved;
    this.#opened = statSync(path);
    this.#wal = statSync(`${path}-wal`, { throwIfNoEntry: false });
    this.#shm = statSync(`${path}-shm`, { throwIfNoEntry: false });
  }

  /** Before a write: throws moved()'s error, as found within the last CHECK_MS. */
  check(): void {
    const error = Date.now() - this.#checkedAt < CHECK_MS ? this.#last : this.moved();
    if (error) throw error;
  }

  /** E_EVENTFLOW_STORE_FAILED (cause: SQLITE_READONLY_DBMOVED) when a path no longer holds its open file. */
  moved(): EventflowError | undefined {
    this.#checkedAt = Date.now();
    const before = this.#last !== undefined;
    this.#last = this.#compare();
    if (before !== (this.#last !== undefined)) this.#onMoved?.(!before);
    return this.#last;
  }

  #compare(): EventflowError | undefined {
    const database = differs(this.#path, this.#opened);
    const wal = this.#wal && differs(`${this.#path}-wal`, this.#wal);
    if (database === undefined && wal === undefined && this.#shm) {
      const shm = differs(`${this.#path}-shm`, this.#shm);
      if (shm !== undefined) {
        return new EventflowError(
          'E_EVENTFLOW_STORE_FAILED',
          `the shared-memory file (-shm) of ${this.#path} was ${shm} while the gateway had it open: a process that opens the database now does not see the gateway's locks, and its writes and the gateway's would corrupt the file, so nothing more is written to it; stop every other process that has the database open (the sqlite3 shell, a backup), then restart the gateway`,
          { cause: moved },
        );
      }
    }
    const gone = database ?? wal;
    if (gone === undefined) return undefined;
    const recover =
      database === undefined
        ? 'restart the gateway: a graceful stop copies what the removed WAL holds into the database file, a crash loses it'
        : `${process.platform === 'linux' ? `copy the open file back from /proc/${process.pid}/fd/ before the gateway stops (what it holds is lost after that), then ` : ''}restart the gateway`;
    return new EventflowError(
      'E_EVENTFLOW_STORE_FAILED',
      `the ${database === undefined ? 'WAL file' : 'database file'} of ${this.#path} was ${gone} while the gateway had it open, so nothing more is written to it; ${recover}`,
      { cause: moved },
    );
  }
}

/** How the file at `path` differs from `opened`: 'removed', 'replaced', or undefined (it is that file). */
function differs(path: string, opened: Stats): 'removed' | 'replaced' | undefined {
  let now: Stats | undefined;
  try {
    now = statSync(path, { throwIfNoEntry: false });
  } catch {
    // Its folder replaced by a file (ENOTDIR), or no longer searchable: not the file opened either.
  }
  if (now === undefined) return 'removed';
  return now.dev === opened.dev && now.ino === opened.ino ? undefined : 'replaced';
}
