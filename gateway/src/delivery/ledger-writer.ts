/**
 * Group commit for the ledger's writes: settles, releases and dead letters that arrive in one turn
 * of the event loop, or while a batch is being written, go to the store together (`apply`: one
 * transaction), as appends do (store/group-commit.ts). Each caller learns its own result, and only
 * once the store has committed it: a settle is answered "recorded" only when it was.
 *
 * Appends due in the same turn go first: a new job's delivery (and a request()'s answer) waits on
 * its append's commit, while a settle's answer only returns capacity a moment later. Where the
 * store can (SQLite: both are one writer), the batch rides the appends' transaction
 * (EventStore.applyWithAppends): one commit for both, and no settle transaction between a job's
 * frame and its append. Elsewhere (MySQL) a settle yields one turn at most, so a stream of appends
 * cannot starve settles.
 */
import { LEDGER_BATCH } from '../defaults.js';
import type { DeliveryLedger, DeliveryRef, LedgerAction } from '../store/ledger.js';

/** Batches written at once, at most. */
const MAX_WRITING = 2;

interface Pending {
  readonly action: LedgerAction;
  resolve(ended: DeliveryRef | undefined): void;
  reject(error: unknown): void;
}

export class LedgerWriter {
  readonly #ledger: () => DeliveryLedger;
  #queue: Pending[] = [];
  /** Batches being written (two may overlap: on MariaDB one's round trips overlap the other's commit). */
  #writing = 0;
  #scheduled = false;
  /** The store's appends are waiting for their batch (EventStore.appendsDue). */
  readonly #appendsDue: () => boolean;
  /** The scheduled batch has already let appends go first. */
  #yielded = false;

  /** The store writes ledger actions inside the append batch due now (EventStore.applyWithAppends), or says undefined. */
  readonly #withAppends: WithAppends;

  constructor(ledger: () => DeliveryLedger, appendsDue: () => boolean = () => false, withAppends: WithAppends = () => undefined) {
    this.#ledger = ledger;
    this.#appendsDue = appendsDue;
    this.#withAppends = withAppends;
  }

  /** The delivery the action ended or moved, or undefined when it was not current; rejects when the store failed. */
  write(action: LedgerAction): Promise<DeliveryRef | undefined> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ action, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#writing >= MAX_WRITING || this.#queue.length === 0) return;
    this.#scheduled = true;
    // setImmediate, not a microtask: every settle frame read in this turn joins the batch.
    setImmediate(() => void this.#flush());
  }

  async #flush(): Promise<void> {
    // Where the store can, the batch rides the appends' transaction instead of waiting for it.
    const riding = this.#appendsDue() ? this.#take((batch) => this.#withAppends(batch)) : undefined;
    if (riding) return riding;
    if (!this.#yielded && this.#appendsDue()) {
      this.#yielded = true;
      // An immediate queued now runs in the next turn's check phase, after the append batch's.
      setImmediate(() => void this.#flush());
      return;
    }
    return this.#take((batch) => this.#ledger().apply(batch));
  }

  /** Cuts the next batch and writes it with `write`; undefined (nothing cut) when `write` says undefined. */
  #take(write: (actions: readonly LedgerAction[]) => Promise<Array<DeliveryRef | undefined | Error>> | undefined): Promise<void> | undefined {
    const batch = this.#queue.slice(0, LEDGER_BATCH);
    if (batch.length === 0) {
      this.#scheduled = this.#yielded = false;
      return undefined;
    }
    let written: Promise<Array<DeliveryRef | undefined | Error>> | undefined;
    try {
      written = write(batch.map((pending) => pending.action));
    } catch (error) {
      written = Promise.reject(error);
    }
    if (written === undefined) return undefined;
    this.#scheduled = this.#yielded = false;
    this.#queue = this.#queue.slice(batch.length);
    this.#writing += 1;
    return written.then(
      // An Error for one action: the store wrote the others (MySQL: that row under another client's lock).
      (results) => batch.forEach((pending, i) => (results[i] instanceof Error ? pending.reject(results[i]) : pending.resolve(results[i]))),
      (error: unknown) => {
        for (const pending of batch) pending.reject(error);
      },
    ).finally(() => {
      this.#writing -= 1;
      this.#schedule();
    });
  }
}

type WithAppends = (actions: readonly LedgerAction[]) => Promise<Array<DeliveryRef | undefined>> | undefined;
