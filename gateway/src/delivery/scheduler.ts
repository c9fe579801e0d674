/**
 * Fires scheduled events at their due time, for gateways and hubs alike, as v4 intended
 * (eventflow-v4.md §9.5, §11 A4) instead of as it ran (never): a timer on the nearest due row (not a
 * 1 s poll), re-armed after each run and when an earlier event is scheduled here, plus a poll for
 * rows other processes (v4 spokes tell nobody) schedule. Each run claims the due rows with the
 * store's guarded update, so an event fires exactly once across all hubs and gateways; `fire` routes
 * it, and the row is settled success (routed) or failed.
 */
import type { StoredEvent } from '@eventflow/core';
import type { EventStore } from '../store/store.js';
import { GROUP_POLL_MS, MAX_TIMER_MS } from '../defaults.js';


/** The first retry after a failed run; the longest is the consumer groups' (GROUP_POLL_MS). */
const RETRY_MIN_MS = 100;

export interface SchedulerOptions {
  store: Pick<EventStore, 'nextScheduled' | 'claimDueScheduled' | 'settleScheduled'>;
  /** Routes a fired event; true when it was routed (success), false when another router had it (failed). */
  fire(event: StoredEvent): Promise<boolean>;
  /** Reports a problem (a hub writes a log row). */
  log(message: string, error?: unknown): void;
  pollMs: number;
  /** Now (ms) as due times are compared: the database's clock with several gateways (store/lease-clock.ts); Date.now by default. */
  now?: () => number;
}

export class Scheduler {
  readonly #options: SchedulerOptions;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #armedFor: number | undefined;
  #poll: ReturnType<typeof setInterval> | undefined;
  #running: Promise<void> = Promise.resolve();
  #stopped = true;
  /**
   * After a failed run (the store: a full disk, the database away) the timer tries again after a
   * backoff, doubling up to GROUP_POLL_MS, so that a due row the store cannot claim does not spin and a
   * store that is back fires what came due meanwhile within a second: waiting for the poll (30 s) held
   * every event that came due during an outage of a second that long after the store was back.
   */
  #backoffUntil = 0;
  #failures = 0;
  #loggedAt = 0;
  #rescanning = false;
  #rescanAgain = false;

  constructor(options: SchedulerOptions) {
    this.#options = options;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#poll = setInterval(() => void this.#arm(), this.#options.pollMs);
    this.#poll.unref();
    void this.#arm();
  }

  /** An event was scheduled here for `at`: fire earlier than planned if needed. */
  scheduled(at: Date): void {
    this.#setTimer(at.getTime());
  }

  /**
   * Another process scheduled an event (the NATS router says so): read the next due time now, not
   * at the next poll. Coalesced: a rescan asked for while one reads is one more read after it,
   * however many were asked for, so that a flood of notifications is never a query each.
   */
  rescan(): void {
    if (this.#rescanning) {
      this.#rescanAgain = true;
      return;
    }
    this.#rescanning = true;
    void (async () => {
      do {
        this.#rescanAgain = false;
        await this.#arm();
      } while (this.#rescanAgain && !this.#stopped);
      this.#rescanning = false;
    })();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearInterval(this.#poll);
    await this.#running;
  }

  #now(): number {
    return this.#options.now?.() ?? Date.now();
  }

  async #arm(): Promise<void> {
    if (this.#stopped) return;
    try {
      const next = await this.#options.store.nextScheduled();
      if (next) this.#setTimer(Math.max(next.getTime(), this.#backoffUntil));
    } catch (error) {
      this.#options.log('could not read the scheduled events', error);
    }
  }

  #setTimer(at: number): void {
    if (this.#stopped || (this.#armedFor !== undefined && this.#armedFor <= at)) return;
    clearTimeout(this.#timer);
    this.#armedFor = at;
    this.#timer = setTimeout(() => this.#fire(), Math.min(MAX_TIMER_MS, Math.max(0, at - this.#now())));
    this.#timer.unref();
  }

  #fire(): void {
    this.#armedFor = undefined;
    this.#running = this.#running.then(async () => {
      if (this.#stopped) return;
      try {
        for (const event of await this.#options.store.claimDueScheduled(new Date(this.#now()))) {
          let routed = false;
          try {
            routed = await this.#options.fire(event);
            if (!routed) this.#options.log(`scheduled event ${event.id} was already routed by another process`);
          } catch (error) {
            this.#options.log(`failed to route scheduled event ${event.id}`, error);
          }
          // Every claimed event gets its turn, even if the database fails on one.
          await this.#options.store.settleScheduled(event.id, routed ? 'success' : 'failed').catch((error: unknown) => {
            this.#options.log(`could not settle scheduled event ${event.id}`, error);
          });
        }
      } catch (error) {
        this.#failures += 1;
        const now = this.#now();
        this.#backoffUntil = now + Math.min(GROUP_POLL_MS, this.#options.pollMs, RETRY_MIN_MS * 2 ** Math.min(this.#failures - 1, 10));
        // Logged once per poll while it goes on.
        if (now - this.#loggedAt >= this.#options.pollMs) {
          this.#loggedAt = now;
          this.#options.log('scheduled run failed; trying again', error);
        }
        this.#setTimer(this.#backoffUntil);
        return;
      }
      this.#failures = 0;
      this.#loggedAt = 0;
      await this.#arm();
    });
  }
}
