/**
 * Ledger writes (settles, releases) that ride the append batch due in the same turn: written in a
 * savepoint of its transaction, after its appends, and answered with it, once it commits.
 *
 * Why: on SQLite both are one writer, and a transaction's cost is mostly its commit (the WAL frames
 * of every page it touched, each written whole) plus BEGIN/COMMIT themselves. A settle and the next
 * publish touch the same pages (the newest rows of `event_published` and of the ledger), so one
 * commit writes them once. And a settle batch of its own, cut in a turn where a job's append was
 * due, ran before or after it on the gateway's one thread: before, it held back that job's delivery
 * (or a `request()`'s outcome) by a whole transaction and its answer's write (bench/README.md ›
 * work, tenth session).
 *
 * A rider that fails rolls back its savepoint only: the appends commit, and it is answered with its
 * error. A batch that fails (or that never takes the rider: none was cut in time) leaves its
 * riders to run alone, each in a transaction of its own, as if they had never ridden.
 */

interface Rider {
  readonly work: () => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** A rider run inside a batch's transaction: its value or error, to hand over after the commit. */
export interface RodeRider {
  readonly rider: Rider;
  readonly ok: boolean;
  readonly value: unknown;
}

export class AppendRiders {
  /** Runs work in a transaction: a savepoint of the one running (a batch's), else one of its own. */
  readonly #transact: (work: () => unknown) => unknown;
  #waiting: Rider[] = [];

  constructor(transact: (work: () => unknown) => unknown) {
    this.#transact = transact;
  }

  /**
   * `work` in the next batch's transaction; resolves with its value once that commits. The batch is
   * due (cut in this check phase); should it not take the rider, the rider runs alone in the next
   * turn: an immediate queued now runs after every one already queued.
   */
  add<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const rider: Rider = { work, resolve: resolve as (value: unknown) => void, reject };
      this.#waiting.push(rider);
      setImmediate(() => {
        const at = this.#waiting.indexOf(rider);
        if (at < 0) return;
        this.#waiting.splice(at, 1);
        this.#runAlone(rider);
      });
    });
  }

  /** In a batch's transaction, after its appends: every waiting rider, each in its savepoint. */
  ride(): RodeRider[] {
    if (this.#waiting.length === 0) return [];
    const riders = this.#waiting;
    this.#waiting = [];
    return riders.map((rider) => {
      try {
        return { rider, ok: true, value: this.#transact(rider.work) };
      } catch (error) {
        return { rider, ok: false, value: error };
      }
    });
  }

  /** The batch committed: each rider learns its own result. */
  committed(rode: readonly RodeRider[]): void {
    for (const { rider, ok, value } of rode) (ok ? rider.resolve : rider.reject)(value);
  }

  /** The batch did not commit: its riders' work was rolled back with it, and runs again alone. */
  failed(rode: readonly RodeRider[]): void {
    for (const { rider } of rode) this.#runAlone(rider);
  }

  #runAlone(rider: Rider): void {
    try {
      rider.resolve(this.#transact(rider.work));
    } catch (error) {
      rider.reject(error);
    }
  }
}
