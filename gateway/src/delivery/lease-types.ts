/** The types of leases.ts that its callers name: its options, what a consumer settles with, and what it tells the groups. */
import type { GroupKey } from '../store/ledger.js';
import type { LeaseClock } from '../store/lease-clock.js';
import type { ConsumerRef } from './consumers.js';

export interface LeaseOptions {
  /** How long a delivery stays open without being settled or extended (EVENTFLOW_CONSUME_LEASE_MS). */
  leaseMs?: number;
  /** Deliveries of one event before it is failed as a dead letter, without a retry policy (EVENTFLOW_CONSUME_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** The time leases are written and compared in (store/lease-clock.ts); this process's clock by default. */
  clock?: LeaseClock;
}

/** What becomes of a delivery: an outcome, a hand-back (`release`), or a retry after `delayMs`. */
export type Settlement = { outcome: 'success' | 'failed'; error?: string | undefined } | { outcome: 'release' } | { outcome: 'retry'; delayMs: number; error?: string | undefined };

export interface LeaseEvents {
  /**
   * A delivery of `consumer` ended (its credit is free again). `change`: `pending` its event is
   * pending again for the group; `settled` it has an outcome (a later event of its pid may now be
   * taken, in an ordered group); `none` the store did not take what ended it. `unsettled`: the event
   * it ended without an outcome (its lease ran out, its consumer left): another member is preferred
   * for it.
   */
  ended(consumer: ConsumerRef | undefined, key: GroupKey, change: 'pending' | 'settled' | 'none', unsettled?: string): void;
  /** A consume ended failed: the handler threw, or the event became a dead letter. */
  failed(eventId: string, message: string, attempt: number): void;
}
