/**
 * Consumers' reports (settles) the store could not record, kept until it does (leases.ts #writeReport):
 * which deliveries have one, how soon each is written again, and what operators see of them.
 *
 * Not bounded in tries: a report given up is an outcome lost (the event runs again as a new attempt, and
 * on its last one a handler that succeeded becomes a dead letter), and the DESIGN's promise is that an
 * event reaches its outcome once the store is back, with no restart. What is bounded instead is what
 * they cost: there are at most as many as deliveries open here (the members' credit), each written again
 * with a backoff from REPORT_RETRY_MS to REPORT_RETRY_MAX_MS, all at once as soon as one write is
 * recorded (the store is back; none sooner than REPORT_HURRY_MIN_MS after its last try), and one log
 * line per REPORT_LOG_MS says how many wait.
 */
import { GROUP_POLL_MS, REPORT_RETRY_MAX_MS } from '../defaults.js';
import type { Logger } from '../log.js';

/** The first wait before a report the store refused is written again: the consumer groups' poll. */
export const REPORT_RETRY_MS = GROUP_POLL_MS;
/** A line about the waiting reports at most this often while they wait. */
const REPORT_LOG_MS = 10_000;
/**
 * A report is written again at most this soon after its last refused write when another settle is
 * recorded, and hurried once per refusal. Before, each recorded settle set its timer to 0: a report
 * refused for its own row (another client's lock on it) was written again at every settle recorded
 * beside it, ~700 times a second on a busy group, each waiting out the lock's bound on MariaDB.
 */
const REPORT_HURRY_MIN_MS = 250;

export class WaitingReports {
  readonly #log: Logger;
  /** Delivery id → its report's writes that failed since its lease ran out, when the last one did, and whether it was hurried since. */
  readonly #tries = new Map<string, { tries: number; at: number; hurried: boolean }>();
  /** When the store last refused one, and when that was logged. */
  #since: number | undefined;
  #loggedAt = 0;

  constructor(log: Logger) {
    this.#log = log;
  }

  get count(): number {
    return this.#tries.size;
  }

  ids(): string[] {
    return [...this.#tries.keys()];
  }

  /**
   * Those the gateway writes (their lease ran out; the client still sends the others again itself), each
   * with the ms until it may be written again now that the store recorded another (REPORT_HURRY_MIN_MS);
   * each once per refused write.
   */
  retrying(now: number): Array<{ id: string; wait: number }> {
    const due: Array<{ id: string; wait: number }> = [];
    for (const [id, entry] of this.#tries) {
      if (entry.tries === 0 || entry.hurried) continue;
      entry.hurried = true;
      due.push({ id, wait: Math.max(0, entry.at + REPORT_HURRY_MIN_MS - now) });
    }
    return due;
  }

  /** The consumer's report of `id` could not be recorded: kept, written by the gateway from its lease's end. */
  add(id: string): void {
    if (!this.#tries.has(id)) this.#tries.set(id, { tries: 0, at: 0, hurried: false });
  }

  /** The delivery ended (its report recorded, or not current any more): nothing of it waits. */
  delete(id: string): void {
    this.#tries.delete(id);
    if (this.#tries.size === 0 && this.#since !== undefined) {
      this.#log.info("the store recorded the consumers' reports that waited for it", { waitedMs: Date.now() - this.#since });
      this.#since = undefined;
    }
  }

  /** The gateway's write of `id`'s report failed: the ms until the next one (doubling, jittered, capped). */
  failed(id: string, error: unknown): number {
    const tries = (this.#tries.get(id)?.tries ?? 0) + 1;
    this.#tries.set(id, { tries, at: Date.now(), hurried: false });
    this.#since ??= Date.now();
    if (Date.now() - this.#loggedAt >= REPORT_LOG_MS) {
      this.#loggedAt = Date.now();
      this.#log.warn("consumers' reports wait for the store: written again with backoff until it records them (eventflow_consume_reports_waiting)", { waiting: this.#tries.size, error });
    }
    const full = Math.min(REPORT_RETRY_MAX_MS, REPORT_RETRY_MS * 2 ** Math.min(tries - 1, 16));
    // Half of it random: reports that failed together are not all written again in one burst.
    return full / 2 + Math.random() * (full / 2);
  }
}
