/**
 * The storage contract of the gateway. Implementations keep eventflow v4's tables and state
 * columns (event, event_published, event_scheduled, event_eid, event_cpid) so that semantics match
 * one to one, plus a strictly increasing `position` per stored event.
 *
 * Reads return events ordered by position, which for events written through the gateway is
 * also timestamp order (v4 orders by timestamp and leaves ties unspecified).
 */
import type { JsonObject, Position, StoredEvent } from '@eventflow/core';

export interface NewEvent {
  id: string;
  domain: string;
  name: string;
  pid: string;
  data: JsonObject;
  rid?: string | undefined;
}

export interface AppendOptions {
  /** Creates the event_published row (v4: publish and schedule do, persist does not). */
  publisher?: string | undefined;
  /** Creates the event_scheduled row with this due time. */
  scheduledAt?: Date | undefined;
}

export interface AppendResult {
  event: StoredEvent;
  /** false when the same event (same id and content) was already stored: a retried publish. */
  created: boolean;
}

export type Outcome = 'success' | 'failed';

/** Selects the events a subscription to (domain, name) sees; `*` matches every name. */
export interface EventFilter {
  domain: string;
  name: string;
}

export interface EventStore {
  readonly kind: string;
  /** Creates missing tables. Safe to call on an existing database. */
  init(): Promise<void>;
  close(): Promise<void>;

  /** The newest position stored, 0 for an empty store. */
  head(): Promise<Position>;

  /**
   * Stores an event, and its published/scheduled rows, all or nothing.
   * Throws E_EVENTFLOW_DUPLICATE_ID when the id exists with other content, and
   * E_EVENTFLOW_REFERENCE_NOT_FOUND when `rid` names no stored event.
   */
  append(event: NewEvent, options?: AppendOptions): Promise<AppendResult>;

  read(id: string): Promise<StoredEvent | undefined>;
  readEventlog(domain: string, pid: string, after?: Position): Promise<StoredEvent[]>;
  /** Inclusive at both ends. */
  readEventlogByTimestamp(domain: string, pid: string, from: Date, to: Date): Promise<StoredEvent[]>;
  readEventlogFilteredByNames(domain: string, pid: string, names: readonly string[]): Promise<StoredEvent[]>;
  /** `domain` is the association's domain (the child process's), not the event's. */
  readEventlogByChildProcess(domain: string, cpid: string): Promise<StoredEvent[]>;
  readEventlogByEid(eid: string): Promise<StoredEvent[]>;
  /** `domain` is the event's own domain. */
  readEventlogByDomainAndEid(domain: string, eid: string): Promise<StoredEvent[]>;
  /** Distinct pids of a domain in binary (case-sensitive) ascending order. */
  readDistinctPidByDomain(domain: string): Promise<string[]>;

  /** Published (routed) events matching the filter with position > after, oldest first, at most `limit`. */
  readPublishedAfter(filter: EventFilter, after: Position, limit: number): Promise<StoredEvent[]>;
  /** The first event of (domain, pid) named one of `names` with position > after. */
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
  /** consumed_spoke NULL → set with `consumer`; true when this consumer won. */
  claimForConsumer(eventId: string, consumer: string): Promise<boolean>;
  /** Clears the consumer claim so that the event can be delivered again (lease expired, consumer gone). */
  releaseConsumerClaim(eventId: string): Promise<void>;
  /** Records the outcome once: a second outcome for the same event is ignored. */
  settle(eventId: string, outcome: Outcome): Promise<void>;
  markOrphan(eventId: string): Promise<void>;

  // ── scheduling ──

  /** The earliest due time among scheduled events not yet executed. */
  nextScheduled(): Promise<Date | undefined>;
  /**
   * Claims every scheduled event due at `now` (executed NULL → now, a guarded update) and returns
   * the claimed events; an event is returned by exactly one call across all processes.
   */
  claimDueScheduled(now: Date): Promise<StoredEvent[]>;
  settleScheduled(eventId: string, outcome: Outcome): Promise<void>;
}
