/**
 * Group commit for the ledger's writes: settles, releases and dead letters that arrive in one turn
 * of the event loop, or while a batch is being written, go to the store together (`apply`: one
 * transaction), as appends do (store/group-commit.ts). Each caller learns its own result, and only
 * once the store has committed it: a settle is answered "recorded" only when it was.
 *
 * Appends due in the same turn go first, once: a new job's delivery (and a request()'s answer)
 * waits on its append's commit, while a settle's answer only returns capacity a moment later. On
 * SQLite both are one writer, so a settle batch cut first put a whole transaction before the
 * append's; a settle yields one turn at most, so a stream of appends cannot starve settles.
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

  constructor(ledger: () => DeliveryLedger, appendsDue: () => boolean = () => false) {
    this.#ledger = ledger;
    this.#appendsDue = appendsDue;
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
    if (!this.#yielded && this.#appendsDue()) {
      this.#yielded = true;
      // An immediate queued now runs in the next turn's check phase, after the append batch's.
      setImmediate(() => void this.#flush());
      return;
    }
    this.#yielded = false;
    this.#scheduled = false;
    const batch = this.#queue.slice(0, LEDGER_BATCH);
    this.#queue = this.#queue.slice(batch.length);
    if (batch.length === 0) return;
    this.#writing += 1;
    try {
      const results = await this.#ledger().apply(batch.map((pending) => pending.action));
      batch.forEach((pending, i) => pending.resolve(results[i]));
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    } finally {
      this.#writing -= 1;
      this.#schedule();
    }
  }
}
