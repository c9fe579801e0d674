/**
 * Lease-based redelivery (eventflow-v4.md §11 A1): v4 never re-sends an event stuck in HUB_CLAIMED
 * (routed, nobody claimed it: the consumer was disconnected) or SPOKE_CLAIMED (the consumer crashed
 * before success/failed). Periodically, this finds such events among those THIS hub routed
 * (`hub` = own ID), or a hub that quit routed (killed or stopped: its claims were nobody's, and a v4 spoke's
 * job stuck under one stayed so for good) whose claim is older than the lease, takes the claim back with a guarded UPDATE
 * (only if the row is unchanged since read: consumed_spoke/consumer → NULL, consumed_hub renewed),
 * and re-broadcasts `publish` as for a fresh publication.
 *
 * Caveat (§11 A1): native components treat a redelivery as a new publication. A v4 spoke that is still
 * working on the event after the lease processes it twice, and subscribers see it again; the lease
 * must exceed the slowest consumer. v4 spokes also claim events they only subscribe to without ever
 * settling them, so such events are redelivered too, at most `maxRedeliveries` times.
 *
 * A job a gateway's consumer holds under a lease in force, or that waits for its retry delay
 * (eventflow_delivery), is not stuck, however old its v4 claim: gateways keep their leases by extends, which v4's columns do not show. Taken back, it went
 * out again beside the running handler, and a v4 spoke of the same group could claim and run it too.
 *
 * Conservative and bounded: at most `maxPages × batch` rows a sweep, only claims made within a
 * horizon before the lease expired (older rows, including the ones given up on, are never looked
 * at again), at most `maxRedeliveries` per event and hub life (counted in memory: a hub that takes
 * over a quit hub's claim routes it under its own id, and counts from there).
 */
import type { Pool } from 'mysql2/promise';
import { findStuckClaims, hasGatewayLedger, resetStuckClaim, type StuckClaim } from './store.js';

export interface HubSweeperOptions {
  pool: Pool;
  hubId: string;
  leaseMs: number;
  /** 0 disables the sweeper. */
  maxRedeliveries: number;
  /** Sends the event again (route or mark orphan). `attempt` counts from 1. */
  redeliver(claim: StuckClaim, attempt: number): Promise<void>;
  /** Writes a log row. */
  log(message: string, error?: unknown): void;
  /** Rows a query; default 100. */
  batch?: number;
  /** Queries a sweep; default 5. */
  maxPages?: number;
  /** Default: a third of the lease, between 250 ms and 10 s. */
  intervalMs?: number;
}

interface Attempts {
  count: number;
  last: number;
  gaveUp: boolean;
}

export class HubSweeper {
  readonly #options: HubSweeperOptions;
  readonly #attempts = new Map<string, Attempts>();
  readonly #interval: number;
  readonly #leaseSeconds: number;
  readonly #horizonSeconds: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #stopped = true;
  /** Gateways' delivery ledger seen in the database (once there, it stays). */
  #gatewayLedger = false;

  constructor(options: HubSweeperOptions) {
    this.#options = options;
    this.#interval = options.intervalMs ?? Math.min(10_000, Math.max(250, Math.floor(options.leaseMs / 3)));
    this.#leaseSeconds = Math.ceil(options.leaseMs / 1000);
    // Long enough for several sweeps to see every expired claim, short enough to stay a small range scan.
    this.#horizonSeconds = Math.max(60, 2 * this.#leaseSeconds);
  }

  start(): void {
    if (this.#options.maxRedeliveries <= 0 || !this.#stopped) return;
    this.#stopped = false;
    this.#schedule();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  /** One sweep; returns how many events were redelivered. */
  sweep(): Promise<number> {
    const run = this.#running.then(() => this.#sweep());
    this.#running = run.catch(() => undefined);
    return run;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.sweep()
        .catch((error: unknown) => this.#options.log('lease sweep failed', error))
        .finally(() => this.#schedule());
    }, this.#interval);
    this.#timer.unref();
  }

  async #sweep(): Promise<number> {
    const { pool, hubId, maxRedeliveries } = this.#options;
    const batch = this.#options.batch ?? 100;
    const now = Date.now();
    this.#prune(now);
    let redelivered = 0;
    let after: { hubAt: string; eventId: string } | undefined;
    this.#gatewayLedger ||= await hasGatewayLedger(pool);
    for (let page = 0; page < (this.#options.maxPages ?? 5) && !this.#stopped; page++) {
      const claims = await findStuckClaims(pool, hubId, this.#leaseSeconds, this.#horizonSeconds, batch, after, this.#gatewayLedger);
      for (const claim of claims) {
        if (this.#stopped) break;
        const attempts = this.#attempts.get(claim.eventId) ?? { count: 0, last: now, gaveUp: false };
        if (attempts.count >= maxRedeliveries) {
          if (!attempts.gaveUp) {
            attempts.gaveUp = true;
            this.#attempts.set(claim.eventId, attempts);
            this.#options.log(`gave up redelivering event ${claim.eventId} after ${attempts.count} redeliveries (claim by ${claim.consumer ?? 'no spoke'})`);
          }
          continue;
        }
        if (!(await resetStuckClaim(pool, hubId, claim, this.#gatewayLedger))) continue; // settled or claimed meanwhile
        attempts.count += 1;
        attempts.last = Date.now();
        this.#attempts.set(claim.eventId, attempts);
        const what = `${claim.consumer === null ? 'unclaimed' : `claimed by ${claim.consumer} at ${claim.spokeAt}`}${claim.hub === hubId ? '' : `, routed by quit hub ${claim.hub}`}`;
        this.#options.log(`redelivering event ${claim.eventId} (${what}, attempt ${attempts.count} of ${maxRedeliveries})`);
        await this.#options.redeliver(claim, attempts.count);
        redelivered += 1;
      }
      if (claims.length < batch) break;
      const last = claims[claims.length - 1]!;
      after = { hubAt: last.hubAt, eventId: last.eventId };
    }
    return redelivered;
  }

  /** Forgets events whose rows can no longer be in the queried range. */
  #prune(now: number): void {
    const keep = (this.#leaseSeconds + this.#horizonSeconds) * 1000 + this.#interval;
    for (const [id, attempts] of this.#attempts) if (now - attempts.last > keep) this.#attempts.delete(id);
  }
}
