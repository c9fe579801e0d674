/**
 * Log lines of one connection that a client can make happen over and over (refusals, a slow
 * client, parking over budget, failures per request): the first occurrence of each condition is
 * logged in full at its level; later ones are only counted, and summarised in one line ("N more")
 * at most once per SUMMARY_EVERY_MS while they go on, and when the connection closes. So a client
 * stuck in a loop, or a connection being cut off, costs a few lines, not one per frame.
 */
import { SUMMARY_EVERY_MS } from './defaults.js';
import type { LogFields, Logger } from './log.js';

export type ConditionLevel = 'debug' | 'info' | 'warn' | 'error';

interface Condition {
  readonly level: ConditionLevel;
  readonly message: string;
  /** Occurrences not logged yet. */
  pending: number;
  /** When the last line (first occurrence or summary) was logged. */
  loggedAt: number;
}

export class ConditionLog {
  readonly #log: Logger;
  readonly #now: () => number;
  /** Made on the first condition: most connections never note one. */
  #conditions: Map<string, Condition> | undefined;

  constructor(log: Logger, now: () => number = Date.now) {
    this.#log = log;
    this.#now = now;
  }

  /** Records one occurrence of `condition`; `message` and `fields` describe this one. */
  note(condition: string, level: ConditionLevel, message: string, fields: LogFields = {}): void {
    const now = this.#now();
    const known = this.#conditions?.get(condition);
    if (!known) {
      (this.#conditions ??= new Map()).set(condition, { level, message, pending: 0, loggedAt: now });
      this.#log[level](message, { ...fields, condition, note: 'repeats of this condition on this connection are counted and summarised' });
      return;
    }
    known.pending++;
    if (now - known.loggedAt >= SUMMARY_EVERY_MS) this.#summarise(condition, known, now, fields);
  }

  /** Logs the summary of every condition that repeated since its last line (the connection closes). */
  flush(): void {
    const now = this.#now();
    for (const [condition, known] of this.#conditions ?? []) if (known.pending > 0) this.#summarise(condition, known, now, {});
  }

  #summarise(condition: string, known: Condition, now: number, fields: LogFields): void {
    const seconds = Math.round((now - known.loggedAt) / 1000);
    this.#log[known.level](`${known.message} (${known.pending} more in the last ${seconds} s)`, { ...fields, condition, repeated: known.pending });
    known.pending = 0;
    known.loggedAt = now;
  }
}
