/** The types of leases.ts: its options, what a consumer settles with, what it tells the groups, and its open deliveries. */
import type { StoredEvent } from '@eventflow/core';
import type { Span } from '@opentelemetry/api';
import type { GroupKey, LedgerAction } from '../store/ledger.js';
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

/** A delivery open on this gateway (leases.ts). */
export interface Delivery {
  readonly id: string;
  readonly event: StoredEvent;
  readonly consumer: ConsumerRef;
  /** The group whose backlog it came from. */
  readonly key: GroupKey;
  readonly attempt: number;
  /** Expires the lease; cleared when the delivery ends. */
  timer: ReturnType<typeof setTimeout> | undefined;
  /** A settle of it is being written: its expiry waits for the store's answer. */
  settling: boolean;
  /** The lease ran out while a settle was being written. */
  expired: boolean;
  /**
   * What the consumer settled it with, while the store could not record it (a full disk): written by
   * the gateway when the lease runs out, and again until the store takes it (leases.ts #writeReport).
   */
  report: Decision | undefined;
  /** When it started here (ms): its queue time ends and its handler time begins (metrics, the span). */
  readonly started: number;
  /** Its span, when the gateway traces (tracing.ts). */
  readonly span: Span | undefined;
}

export type Metric = 'success' | 'failed' | 'released' | 'retried' | 'dead_lettered';

/** A write for the ledger, what it counts as once recorded, and the failure it reports (a final one). */
export interface Decision {
  action: LedgerAction;
  metric: Metric;
  failure: string | undefined;
}
