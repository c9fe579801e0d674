/**
 * Group commit for EventStore.append: appends that arrive while a batch is being written, or in
 * the same turn of the event loop, are written together by the next `appendBatch` (one
 * transaction, one commit). Each caller's promise is fulfilled only after that commit, with its own
 * outcome: one failed append never fails its neighbours.
 *
 * Why: a commit costs far more than an insert (SQLite: a WAL write per transaction; MySQL: a
 * round trip per statement and a log flush per commit), and a pipelined client, or many clients,
 * keep many appends in flight. Batches keep request order, so positions follow arrival order, and
 * the next batch gathers what arrived meanwhile.
 *
 * One batch at a time, unless the writer hands the turn on early: a writer that calls `release()`
 * (the MySQL store, as it sends a batch's COMMIT: it holds the sequence lock and will write nothing
 * more) lets the next batch start while this one commits, so that the next batch's first round trip
 * overlaps this one's log flush, and the gateway's work on the answers overlaps the database's.
 * A batch is cut only once every earlier one has released (or finished), so at most one is ever
 * before its release; a writer that never calls release() (SQLite) sees one batch at a time.
 * Batches are answered in the order they were cut, whichever commit returns first. Such a writer
 * also has a large queue split in two when nothing is being written (SPLIT_FROM), so that a
 * pipelined client's window becomes two batches that take turns instead of one that waits for itself.
 */
import type { AppendOptions, AppendOutcome, AppendRequest, AppendResult, NewEvent } from './store.js';

/** Appends per transaction, at most: bounds a transaction's size and the wait of its first append. */
export const MAX_BATCH = 1000;
/**
 * With `overlap`, a batch cut while no other is being written takes only half of a queue this long or longer: the
 * other half starts at its release, so that the appends in flight split into two batches that overlap. Otherwise a
 * pipelined client's window stays one batch for good (its next publishes come with the answers to all of this one),
 * and the gateway's work and the database's take turns.
 */
export const SPLIT_FROM = 32;

/** The writer's handle on its batch: `release()` lets the next batch start (see the header). */
export interface BatchTurn {
  release(): void;
}

export type BatchWriter = (requests: readonly AppendRequest[], turn: BatchTurn) => Promise<AppendOutcome[]>;

interface Pending {
  readonly request: AppendRequest;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

export class GroupCommit {
  readonly #write: BatchWriter;
  readonly #maxBatch: number;
  #queue: Pending[] = [];
  /** Batches cut and not yet answered. */
  #unanswered = 0;
  /** The batch being written last has released its turn (or none is being written). */
  #released = true;
  /** A batch is scheduled (setImmediate) and not yet cut. */
  #scheduled = false;
  /** Settles when the batch cut last has been answered: the next one answers after it. */
  #answered: Promise<void> = Promise.resolve();
  #idle: Promise<void> = Promise.resolve();
  #resolveIdle: () => void = () => undefined;

  readonly #overlap: boolean;

  /** `overlap`: the writer releases its batches (see the header), and a large queue is split to make use of it. */
  constructor(write: BatchWriter, { maxBatch = MAX_BATCH, overlap = false }: { maxBatch?: number; overlap?: boolean } = {}) {
    this.#write = write;
    this.#maxBatch = maxBatch;
    this.#overlap = overlap;
  }

  append(event: NewEvent, options: AppendOptions | undefined): Promise<AppendResult> {
    return new Promise<AppendResult>((resolve, reject) => {
      if (this.#queue.length === 0 && this.#unanswered === 0 && !this.#scheduled) this.#idle = new Promise((done) => (this.#resolveIdle = done));
      this.#queue.push({ request: { event, options }, resolve, reject });
      this.#schedule();
    });
  }

  /** Appends wait for a batch that is scheduled and not yet cut: it runs in the check phase now running or the next. */
  get due(): boolean {
    return this.#scheduled;
  }

  /** Appends wait for a later batch (scheduled, or held until the batch being written releases its turn). */
  get queued(): boolean {
    return this.#queue.length > 0;
  }

  /** Settles once every append submitted so far has been written (or has failed). */
  idle(): Promise<void> {
    return this.#idle;
  }

  /** Schedules the next batch if one may start; setImmediate, not a microtask: every frame read in this turn of the event loop joins it. */
  #schedule(): void {
    if (this.#scheduled || this.#queue.length === 0 || !this.#released) return;
    this.#scheduled = true;
    setImmediate(() => this.#cut());
  }

  #cut(): void {
    this.#scheduled = false;
    if (this.#queue.length === 0 || !this.#released) return this.#settleIdle();
    const queued = this.#queue.length;
    const size = Math.min(this.#maxBatch, this.#overlap && this.#unanswered === 0 && queued >= SPLIT_FROM ? Math.ceil(queued / 2) : queued);
    const batch = size === queued ? this.#queue : this.#queue.slice(0, size);
    this.#queue = batch === this.#queue ? [] : this.#queue.slice(size);
    this.#unanswered += 1;
    this.#released = false;
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.#released = true;
      this.#schedule();
    };
    const previous = this.#answered;
    const written = this.#write(
      batch.map((pending) => pending.request),
      { release },
    ).then(
      (outcomes) => ({ outcomes }),
      (error: unknown) => ({ error }),
    );
    this.#answered = (async () => {
      const result = await written;
      release();
      await previous;
      answer(batch, result);
      this.#unanswered -= 1;
      this.#settleIdle();
    })();
  }

  #settleIdle(): void {
    if (this.#queue.length === 0 && this.#unanswered === 0 && !this.#scheduled) this.#resolveIdle();
  }
}

function answer(batch: readonly Pending[], result: { outcomes: AppendOutcome[] } | { error: unknown }): void {
  if ('error' in result) {
    for (const pending of batch) pending.reject(result.error);
    return;
  }
  batch.forEach((pending, i) => {
    const outcome = result.outcomes[i];
    if (outcome === undefined) pending.reject(new Error('the store returned fewer outcomes than appends'));
    else if (outcome.ok) pending.resolve(outcome.result);
    else pending.reject(outcome.error);
  });
}
