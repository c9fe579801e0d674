/**
 * Fires scheduled events at their due time: one timer on the nearest due row (not a 1 s poll),
 * re-armed after each firing and when an earlier event is scheduled. The store's guarded claim
 * makes each event fire exactly once, also across several gateways; the slow safety poll only
 * notices rows that other processes scheduled.
 */
import type { Logger } from './log.js';
import type { Router } from './router/router.js';
import type { EventStore } from './store/store.js';

/** setTimeout cannot wait longer than 2^31-1 ms. */
const MAX_TIMER = 2 ** 31 - 1;

export class Scheduler {
  readonly #store: EventStore;
  readonly #router: Router;
  readonly #log: Logger;
  readonly #pollInterval: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #armedFor: number | undefined;
  #poll: ReturnType<typeof setInterval> | undefined;
  #running: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(store: EventStore, router: Router, log: Logger, pollInterval = 30_000) {
    this.#store = store;
    this.#router = router;
    this.#log = log;
    this.#pollInterval = pollInterval;
  }

  async start(): Promise<void> {
    this.#poll = setInterval(() => void this.#arm(), this.#pollInterval);
    this.#poll.unref();
    await this.#arm();
  }

  /** An event was scheduled for `at`: fire earlier than planned if needed. */
  scheduled(at: Date): void {
    if (this.#armedFor === undefined || at.getTime() < this.#armedFor) this.#setTimer(at.getTime());
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearInterval(this.#poll);
    await this.#running;
  }

  async #arm(): Promise<void> {
    if (this.#stopped) return;
    try {
      const next = await this.#store.nextScheduled();
      if (next) this.#setTimer(next.getTime());
    } catch (error) {
      this.#log.error('could not read scheduled events', { error });
    }
  }

  #setTimer(at: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#armedFor = at;
    this.#timer = setTimeout(() => this.#fire(), Math.min(MAX_TIMER, Math.max(0, at - Date.now())));
    this.#timer.unref();
  }

  #fire(): void {
    this.#armedFor = undefined;
    this.#running = this.#running.then(async () => {
      if (this.#stopped) return;
      try {
        for (const event of await this.#store.claimDueScheduled(new Date())) {
          try {
            await this.#router.publish(event);
            await this.#store.settleScheduled(event.id, 'success');
          } catch (error) {
            this.#log.error('scheduled event could not be routed', { event: event.id, error });
            await this.#store.settleScheduled(event.id, 'failed');
          }
        }
      } catch (error) {
        this.#log.error('scheduled run failed', { error });
      }
      await this.#arm();
    });
  }
}
