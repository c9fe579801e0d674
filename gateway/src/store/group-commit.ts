/**
 * Group commit for EventStore.append: appends that arrive while a batch is being written, or in
 * the same turn of the event loop, are written together by the next `appendBatch` (one
 * transaction, one commit). Each caller's promise is fulfilled only after that commit, with its own
 * outcome: one failed append never fails its neighbours.
 *
 * Why: a commit costs far more than an insert (SQLite: a WAL write per transaction; MySQL: a
 * round trip per statement and a log flush per commit), and a pipelined client, or many clients,
 * keep many appends in flight. One batch at a time per store: batches keep request order, so
 * positions follow arrival order, and the next batch gathers what arrived meanwhile.
 */
import type { AppendOptions, AppendOutcome, AppendRequest, AppendResult, NewEvent } from './store.js';

/** Appends per transaction, at most: bounds a transaction's size and the wait of its first append. */
export const MAX_BATCH = 1000;

interface Pending {
  readonly request: AppendRequest;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

export class GroupCommit {
  readonly #write: (requests: readonly AppendRequest[]) => Promise<AppendOutcome[]>;
  readonly #maxBatch: number;
  #queue: Pending[] = [];
  /** A batch is scheduled or being written; whatever arrives meanwhile waits for the next one. */
  #busy = false;
  #idle: Promise<void> = Promise.resolve();
  #resolveIdle: () => void = () => undefined;

  constructor(write: (requests: readonly AppendRequest[]) => Promise<AppendOutcome[]>, maxBatch = MAX_BATCH) {
    this.#write = write;
    this.#maxBatch = maxBatch;
  }

  append(event: NewEvent, options: AppendOptions | undefined): Promise<AppendResult> {
    return new Promise<AppendResult>((resolve, reject) => {
      this.#queue.push({ request: { event, options }, resolve, reject });
      if (this.#busy) return;
      this.#busy = true;
      this.#idle = new Promise((done) => (this.#resolveIdle = done));
      // setImmediate, not a microtask: every frame read in this turn of the event loop joins the batch.
      setImmediate(() => void this.#drain());
    });
  }

  /** Settles once every append submitted so far has been written (or has failed). */
  idle(): Promise<void> {
    return this.#idle;
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.length <= this.#maxBatch ? this.#queue : this.#queue.slice(0, this.#maxBatch);
      this.#queue = batch === this.#queue ? [] : this.#queue.slice(this.#maxBatch);
      let outcomes: AppendOutcome[];
      try {
        outcomes = await this.#write(batch.map((pending) => pending.request));
      } catch (error) {
        for (const pending of batch) pending.reject(error);
        continue;
      }
      batch.forEach((pending, i) => {
        const outcome = outcomes[i];
        if (outcome === undefined) pending.reject(new Error('the store returned fewer outcomes than appends'));
        else if (outcome.ok) pending.resolve(outcome.result);
        else pending.reject(outcome.error);
      });
    }
    this.#busy = false;
    this.#resolveIdle();
  }
}
