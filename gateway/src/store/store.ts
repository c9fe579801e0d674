/**
 * The storage contract of the gateway. Implementations keep eventflow v4's tables and state
 * columns (event, event_published, event_scheduled, event_eid, event_cpid) so that semantics match
 * one to one, plus a strictly increasing `position` per stored event.
 *
 * Reads return events ordered by position, which for events written through the gateway is
 * also timestamp order (v4 orders by timestamp and leaves ties unspecified).
 *
 * A scheduled event joins its eventlog only when it fires (see `claimDueScheduled`): until then
 * every multi-event read (readEventlog*, readDistinctPidByDomain, readPublishedAfter, findOutcome)
 * leaves it out, and only `read(id)` returns it. Subscribers resume by position, so a fired event
 * must come after everything they already saw; and a composed state must not reflect the future.
 */
import { EventflowError, type JsonObject, type Position, type StoredEvent } from '@eventflow/core';
import type { SnapshotStore } from './snapshots.js';
import type { DeliveryLedger, DeliveryRef, LedgerAction } from './ledger.js';
import type { Catalog } from './catalog.js';

export interface NewEvent {
  id: string;
  domain: string;
  name: string;
  pid: string;
  data: JsonObject;
  rid?: string | undefined;
  /** The publisher's W3C trace context (PROTOCOL.md › Event input): stored with the event, returned with it; not part of its identity (same-event.ts). */
  traceparent?: string | undefined;
  tracestate?: string | undefined;
}

export interface AppendOptions {
  /** Creates the event_published row (v4: publish and schedule do, persist does not). */
  publisher?: string | undefined;
  /**
   * With `publisher`: the event_published row is created with the routing claim already taken by
   * this hub id (as claimForRouting would take it), in the same transaction. For a router that
   * routes right after the commit (the embedded one): one write instead of two. Only a created
   * event is claimed so; a retry returns the event as it is stored.
   */
  routedBy?: string | undefined;
  /**
   * Creates the event_scheduled row with this due time. The event stays out of the multi-event
   * reads until it fires (see EventStore.claimDueScheduled).
   */
  scheduledAt?: Date | undefined;
  /**
   * Optimistic concurrency: the number of events the eventlog of (domain, pid) must hold, counted
   * as `countEventlog` counts (unfired scheduled events not counted), for the event to be stored.
   * Checked inside the append's transaction, atomically with the insert; any other count throws
   * E_EVENTFLOW_VERSION_CONFLICT with details { domain, pid, currentVersion, expectedVersion } and
   * stores nothing. Not checked for an idempotent retry (see `append`).
   */
  expectedVersion?: number | undefined;
}

export interface AppendResult {
  event: StoredEvent;
  /** false when the same event (same id and content) was already stored: a retried publish. */
  created: boolean;
}

/** One append of a batch (EventStore.appendBatch). */
export interface AppendRequest {
  event: NewEvent;
  options?: AppendOptions | undefined;
}

/** What became of one append of a batch: its result, or the error that `append` alone would have thrown. */
export type AppendOutcome = { ok: true; result: AppendResult } | { ok: false; error: Error };

export type Outcome = 'success' | 'failed';

/** An event failed because none of its deliveries was settled (see EventStore.deadLetter). */
export interface DeadLetter {
  eventId: string;
  domain: string;
  name: string;
  pid: string;
  /** Deliveries made, the last one included. */
  attempts: number;
  /** Why the last delivery ended unsettled: `lease expired`, `connection closed`, `consumer removed`, `released`. */
  reason: string;
  /** When it was recorded (ISO-8601 UTC). */
  at: string;
}

/** Selects the events a subscription to (domain, name) sees; `*` matches every name. */
export interface EventFilter {
  domain: string;
  name: string;
}

export interface EventStore {
  readonly kind: string;
  /** The operators' reads (catalog.ts): domains, processes, event fates, scheduled events. */
  readonly catalog: Catalog;
  /** Creates missing tables. Safe to call on an existing database. */
  init(): Promise<void>;
  close(): Promise<void>;

  /**
   * The highest position ever assigned (never decreases), 0 for a new store. Deleting events does not
   * lower it; firing a scheduled event raises it to the fired event's new position.
   */
  head(): Promise<Position>;

  /**
   * Resolves when writes work (`/readyz`, readiness.ts): at once unless the last append failed
   * because of the store (no space, I/O, connection lost: write-health.ts); then once a write that
   * stores nothing succeeds, and rejects (coded) while it fails. Optional: a store without it is
   * ready when it reads.
   */
  checkWrites?(): Promise<void>;

  /**
   * Stores an event, and its published/scheduled rows, all or nothing.
   * A retry is matched on id + domain/name/pid/rid/data (data compared as JSON, key order aside)
   * and returns the stored event with `created: false`; the AppendOptions of a retry are ignored,
   * expectedVersion included: a retried publish whose first attempt stored the event must not fail
   * with a conflict that the event itself caused.
   * Throws E_EVENTFLOW_DUPLICATE_ID when the id exists with other content, and
   * E_EVENTFLOW_REFERENCE_NOT_FOUND when `rid` names no stored event, and (after those checks)
   * E_EVENTFLOW_VERSION_CONFLICT when `expectedVersion` is not the eventlog's current count.
   * A failure of the store itself (no space, I/O, connection lost) is E_EVENTFLOW_STORE_FAILED
   * with `details.stored` (`false`, or `'unknown'` when the store cannot tell whether the commit
   * happened) and `details.retryable: true` (write-health.ts): the same append again is the fix.
   */
  append(event: NewEvent, options?: AppendOptions): Promise<AppendResult>;
  /**
   * Appends several events in one transaction (group commit), each exactly as `append` would,
   * in request order: positions ascend in that order, and each request sees the ones before it
   * (a retry of an earlier request's id, a rid naming it, its count toward expectedVersion).
   * One outcome per request, in order: a request that fails (duplicate id, missing rid, version
   * conflict, a driver error of its own) stores nothing and fails alone; the others commit. Nothing
   * is visible before the commit. `append` goes through this: appends that arrive while a commit
   * is running, or in the same turn of the event loop, share the next transaction (group-commit.ts).
   */
  appendBatch(requests: readonly AppendRequest[]): Promise<AppendOutcome[]>;

  /**
   * Any stored event, including a scheduled one that has not fired yet (with its append-time
   * position and timestamp; once fired, with its new ones).
   */
  read(id: string): Promise<StoredEvent | undefined>;

  // Every read below returns only events that have joined their eventlog: scheduled events that
  // have not fired yet (not claimed by claimDueScheduled) are left out.

  /** The events of (domain, pid) with position > after (default 0). Unfired scheduled events are left out. */
  readEventlog(domain: string, pid: string, after?: Position): Promise<StoredEvent[]>;
  /**
   * State snapshots (snapshots.ts): the latest valid snapshot of (domain, pid) and the events after
   * it (or, without one, the whole eventlog), and storing one. Optional: a store without them is
   * answered with the full fold.
   */
  readSnapshot?(domain: string, pid: string): ReturnType<SnapshotStore['readSnapshot']>;
  writeSnapshot?(...args: Parameters<SnapshotStore['writeSnapshot']>): Promise<void>;
  /** How many events the eventlog holds (unfired scheduled events not counted). */
  countEventlog(domain: string, pid: string): Promise<number>;
  /**
   * Inclusive at both ends; a fired scheduled event's timestamp is its fire time.
   * Unfired scheduled events are left out.
   */
  readEventlogByTimestamp(domain: string, pid: string, from: Date, to: Date): Promise<StoredEvent[]>;
  /** Unfired scheduled events are left out. */
  readEventlogFilteredByNames(domain: string, pid: string, names: readonly string[]): Promise<StoredEvent[]>;
  /**
   * `domain` is the association's domain (the child process's), not the event's.
   * Unfired scheduled events are left out.
   */
  readEventlogByChildProcess(domain: string, cpid: string): Promise<StoredEvent[]>;
  /** Unfired scheduled events are left out. */
  readEventlogByEid(eid: string): Promise<StoredEvent[]>;
  /** `domain` is the event's own domain. Unfired scheduled events are left out. */
  readEventlogByDomainAndEid(domain: string, eid: string): Promise<StoredEvent[]>;
  /**
   * Distinct pids of a domain in binary (case-sensitive) ascending order. A pid whose only events
   * are unfired scheduled events is not listed.
   */
  readDistinctPidByDomain(domain: string): Promise<string[]>;

  /**
   * Published (routed) events matching the filter with position > after, oldest first, at most `limit`.
   * Unfired scheduled events are left out; a fired one appears at its new position, after `head()` as
   * it was before it fired, so a subscriber resuming from a position it has seen still gets it.
   * `upTo`: the reader needs every event through this position and no later one (the dispatcher, told
   * of a batch's newest event): a store that just committed them may answer from memory (recent.ts),
   * with or without the events after it.
   */
  readPublishedAfter(filter: EventFilter, after: Position, limit: number, upTo?: Position): Promise<StoredEvent[]>;
  /**
   * Published (routed) events of every domain with position > after, oldest first, at most `limit`:
   * the reads of pattern subscriptions (delivery/patterns.ts), one seek by position for all domains.
   * Unfired scheduled events are left out, as in readPublishedAfter.
   */
  readPublishedSince(after: Position, limit: number): Promise<StoredEvent[]>;
  /**
   * The first published event of (domain, pid) named one of `names` with position > after: what a
   * wait would have seen live. Persisted-only and unfired scheduled events are left out.
   */
  findOutcome(domain: string, pid: string, names: readonly string[], after: Position): Promise<StoredEvent | undefined>;

  /** Deletes the event; its associations and delivery rows cascade, events referring to it lose rid. */
  delete(id: string): Promise<boolean>;
  deleteEventlog(domain: string, pid: string): Promise<boolean>;

  /** Idempotent: associating twice is not an error. Throws E_EVENTFLOW_EVENT_NOT_FOUND for an unknown event. */
  persistEntityAssociation(eventId: string, eid: string): Promise<void>;
  persistChildProcessAssociation(eventId: string, domain: string, cpid: string): Promise<void>;

  // ── delivery lifecycle: v4's guarded updates on event_published ──

  /** consumed_hub NULL → set with `hub`; true when this router won the routing claim. */
  claimForRouting(eventId: string, hub: string): Promise<boolean>;
  /** claimForRouting for several events in one transaction; returns the ids this router won, in the order given. */
  claimAllForRouting(eventIds: readonly string[], hub: string): Promise<string[]>;
  /**
   * consumed_spoke NULL → set with `consumer`, only while the event has no outcome (success and failed NULL: a v4
   * hub may hand back a claim a slow v4 spoke then settles); true when this consumer won.
   */
  claimForConsumer(eventId: string, consumer: string): Promise<boolean>;
  /**
   * claimForConsumer for an event whose delivery this gateway instance holds: consumed_spoke NULL → set with
   * `consumer` only while `lease.owner` holds a lease in force on the event for the default group (the
   * delivery ledger's row: that owner, a deadline after `lease.now`, no outcome) and the event has no outcome,
   * checked and set atomically. A hub that took v4's claim back (its lease sweep) from an event still being
   * handled here gets it back; an event whose claim here is still being decided, or whose delivery ended, is
   * left alone: a gateway sets v4's claim only under its lease, so its own claim never loses to it.
   */
  retakeConsumerClaim(eventId: string, consumer: string, lease: { owner: string; now: number }): Promise<boolean>;
  /** Clears the consumer claim so that the event can be delivered again (lease expired, consumer gone). */
  releaseConsumerClaim(eventId: string): Promise<void>;
  /** Records the outcome once: a second outcome for the same event is ignored. */
  settle(eventId: string, outcome: Outcome): Promise<void>;
  markOrphan(eventId: string): Promise<void>;
  /** markOrphan for several events in one transaction. */
  markOrphans(eventIds: readonly string[]): Promise<void>;
  /**
   * The event's last delivery attempt ended unsettled: records `failed` (first outcome wins) and,
   * if that outcome is the one recorded, a dead letter (the gateway's own table, not a v4 one), in
   * one transaction. True when recorded; false when the event was already settled or is gone.
   */
  deadLetter(eventId: string, attempts: number, reason: string): Promise<boolean>;
  /** Dead letters, newest first, at most `limit` (default 100). Deleting an event deletes its dead letter. */
  deadLetters(limit?: number): Promise<DeadLetter[]>;

  /** The consumer groups' delivery ledger (ledger.ts); available after init(). */
  ledger(): DeliveryLedger;
  /**
   * Appends are waiting for their batch (group-commit.ts), to be cut in this turn of the event loop
   * or the next: the ledger's writes let it go first (delivery/ledger-writer.ts).
   */
  appendsDue(): boolean;
  /**
   * SQLite: the ledger's writes inside the append batch due now (its transaction, one commit for
   * both: sqlite/append-riders.ts), answered once it commits; undefined when none is due (or the
   * store writes them apart, as MySQL does).
   */
  applyWithAppends?(actions: readonly LedgerAction[]): Promise<Array<DeliveryRef | undefined>> | undefined;

  // ── scheduling ──

  /** The earliest due time among scheduled events not yet executed. */
  nextScheduled(): Promise<Date | undefined>;
  /**
   * Claims every scheduled event due at `now` (executed NULL → now, a guarded update) and fires it:
   * the event joins its eventlog with a new position, greater than every position assigned so far
   * (head advances to it), and its timestamp becomes the fire time (the store's clock, not `now`).
   * Returns the claimed events with those new positions and timestamps, in due order (ties by
   * original position), positions increasing in that order. An event is returned by exactly one
   * call across all processes; claiming again returns nothing for it.
   */
  claimDueScheduled(now: Date): Promise<StoredEvent[]>;
  settleScheduled(eventId: string, outcome: Outcome): Promise<void>;
}

/** The error of a failed expectedVersion check (AppendOptions.expectedVersion). */
export function versionConflict(domain: string, pid: string, currentVersion: number, expectedVersion: number): EventflowError {
  return new EventflowError(
    'E_EVENTFLOW_VERSION_CONFLICT',
    `${domain} › ${pid} is at version ${currentVersion}, not ${expectedVersion}: read the eventlog and retry`,
    { details: { domain, pid, currentVersion, expectedVersion } },
  );
}
