/**
 * Whether the database file at the store's path is still the file the gateway has open.
 *
 * An operator who removes the file (or its folder), or puts another file in its place, leaves the
 * gateway writing to a file that no process can open again: every write succeeds, /readyz said
 * ready, and everything stored, before the removal too, is gone once the process ends. SQLite
 * refuses writes to a moved file in rollback-journal mode (SQLITE_READONLY_DBMOVED), not in WAL
 * mode. So the path's device and inode are compared with the file opened, by /readyz at each call
 * and before a write transaction at most every CHECK_MS (a stat costs ~4 µs on a loaded machine, a
 * small commit ~30), and a write is refused with that code when they differ: appends are answered
 * E_EVENTFLOW_STORE_FAILED (`stored: false`), settles and claims fail, /readyz says 503. Only a
 * restart opens the file at the path again (or the file moved back to it).
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
  #checkedAt = -Infinity;
  #last: EventflowError | undefined;

  /** The file at `path` now, as the one the store has open (read right after opening it). */
  constructor(path: string) {
    this.#path = path;
    this.#opened = statSync(path);
  }

  /** Before a write: throws moved()'s error, as found within the last CHECK_MS. */
  check(): void {
    const error = Date.now() - this.#checkedAt < CHECK_MS ? this.#last : this.moved();
    if (error) throw error;
  }

  /** E_EVENTFLOW_STORE_FAILED (cause: SQLITE_READONLY_DBMOVED) when the path no longer holds the open file. */
  moved(): EventflowError | undefined {
    this.#checkedAt = Date.now();
    this.#last = this.#compare();
    return this.#last;
  }

  #compare(): EventflowError | undefined {
    let now: Stats | undefined;
    try {
      now = statSync(this.#path, { throwIfNoEntry: false });
    } catch {
      // Its folder replaced by a file (ENOTDIR), or no longer searchable: not the file opened either.
    }
    if (now !== undefined && now.dev === this.#opened.dev && now.ino === this.#opened.ino) return undefined;
    return new EventflowError(
      'E_EVENTFLOW_STORE_FAILED',
      `the database file ${this.#path} was ${now === undefined ? 'removed' : 'replaced'} while the gateway had it open, so nothing more is written to it; ` +
        `${process.platform === 'linux' ? `copy the open file back from /proc/${process.pid}/fd/ before the gateway stops (what it holds is lost after that), then ` : ''}restart the gateway`,
      { cause: moved },
    );
  }
}
