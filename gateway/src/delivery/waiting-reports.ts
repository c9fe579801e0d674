/**
 * Consumers' reports (settles) the store could not record, kept until it does (leases.ts #writeReport):
 * which deliveries have one, how soon each is written again, and what operators see of them.
 *
 * Not bounded in tries: a report given up is an outcome lost (the event runs again as a new attempt, and
 * on its last one a handler that succeeded becomes a dead letter), and the DESIGN's promise is that an
 * event reaches its outcome once the store is back, with no restart. What is bounded instead is what
 * they cost: there are at most as many as deliveries open here (the members' credit), each written again
 * with a backoff from REPORT_RETRY_MS to REPORT_RETRY_MAX_MS, all at once as soon as one write is
 * recorded (the store is back), and one log line per REPORT_LOG_MS says how many wait.
 */
import { GROUP_POLL_MS, REPORT_RETRY_MAX_MS } from '../defaults.js';
import type { Logger } from '../log.js';

/** The first wait before a report the store refused is written again: the consumer groups' poll. */
export const REPORT_RETRY_MS = GROUP_POLL_MS;
/** A line about the waiting reports at most this often while they wait. */
const REPORT_LOG_MS = 10_000;

export class WaitingReports {
  readonly #log: Logger;
  /** Delivery id → its report's writes that failed since its lease ran out. */
  readonly #tries = new Map<string, number>();
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

  /** Those the gateway writes (their lease ran out); the client still sends the others again itself. */
  retrying(): string[] {
    return [...this.#tries].filter(([, tries]) => tries > 0).map(([id]) => id);
  }

  /** The consumer's report of `id` could not be recorded: kept, written by the gateway from its lease's end. */
  add(id: string): void {
    if (!this.#tries.has(id)) this.#tries.set(id, 0);
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
    const tries = (this.#tries.get(id) ?? 0) + 1;
    this.#tries.set(id, tries);
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
