/**
 * The delivery ledger: which consumer group has handled which event, and who holds a lease on it
 * now. Both stores implement it (store/sqlite/ledger.ts, store/mysql/ledger.ts) on tables of the
 * gateway's own (`eventflow_group`, `eventflow_delivery`), created by init() beside v4's.
 *
 * A group is (domain, name, group); `name` may be `*` (every name of the domain). The default
 * group (`group` = '') keeps v4's columns as its ledger: the claim is v4's guarded update on
 * `event_published.consumed_spoke`, the outcome is `success`/`failed` there, so v4 spokes keep
 * competing with it. The default groups of (domain, name) and (domain, `*`) are one ledger per event
 * (v4 has one consumer claim per event); a named group has a ledger of its own per event.
 *
 * A group exists from its first registration (`ensureGroup`, which records the head as its
 * `createdPosition`) until `deleteGroup`. Every published event of its filter with a position above
 * `createdPosition` is in its backlog until it has an outcome for the group.
 *
 * Times are milliseconds since the epoch from the gateways' clocks (lease deadlines, retry delays):
 * gateways sharing a store are expected to keep their clocks in step (NTP).
 */
import type { StoredEvent } from '@eventflow/core';

/** The default group's name. */
export const DEFAULT_GROUP = '';

export interface GroupKey {
  domain: string;
  /** A name, or `*`. */
  name: string;
  /** '' for the default group. */
  group: string;
}

export interface GroupRecord extends GroupKey {
  /** The head when the group was created: events above it are its backlog. */
  createdPosition: number;
  /** ISO-8601 UTC. */
  createdAt: string;
}

/** A group with the state of its ledger (metrics, the `groups` operation). */
export interface GroupSummary extends GroupRecord {
  /** Events of its backlog with no outcome and no lease (available now or after a retry delay). */
  pending: number;
  /** Events under a lease that has not expired. */
  inFlight: number;
  /** Events that were delivered more than once (attempts > 1), outcome or not. */
  redelivered: number;
  deadLetters: number;
  /** The position of the oldest event with no outcome, and its timestamp (for its age). */
  oldestPendingAt: string | undefined;
}

/** An event of a group's backlog with no outcome for the group yet. */
export interface Unsettled {
  event: StoredEvent;
  /** Deliveries made so far. */
  attempts: number;
  /** The lease's owner (a gateway instance), while a lease holds or held. */
  owner: string | undefined;
  /** Until when the lease holds (ms); undefined when there is no lease. */
  deadline: number | undefined;
  /** Not to be delivered before (ms), after a retry(ms). */
  availableAt: number | undefined;
  /** Claimed by a v4 spoke (default group): v4's business, never ours to deliver. */
  foreign: boolean;
  lastError: string | undefined;
}

/** A delivery that ended (settle, release, dead letter): what it was of. */
export interface EndedDelivery {
  key: GroupKey;
  eventId: string;
  attempts: number;
}

export interface LedgerDeadLetter {
  eventId: string;
  domain: string;
  name: string;
  pid: string;
  /** The name the group consumes (its (domain, name, group) key's name: the event name, or `*`); `group` is the group ('' = default). */
  consumes: string;
  group: string;
  attempts: number;
  /** Why the last delivery ended: the handler's error message, or `lease expired` and the like. */
  lastError: string;
  /** When it was recorded (ISO-8601 UTC). */
  at: string;
}

export interface DeadLetterQuery {
  domain?: string | undefined;
  limit: number;
  offset: number;
}

export interface ClaimRequest {
  key: GroupKey;
  event: StoredEvent;
  /** The lease owner (this gateway instance). */
  owner: string;
  /** v4's `consumer` of the default group's claim (the gateway id). */
  consumer: string;
  delivery: string;
  deadline: number;
  now: number;
}

export interface DeliveryLedger {
  /** The group, created now (createdPosition = head) if it did not exist. */
  ensureGroup(key: GroupKey): Promise<GroupRecord>;
  /** Removes the group and its ledger rows; false when it did not exist. */
  deleteGroup(key: GroupKey): Promise<boolean>;
  /** Every group with its counts, ordered by domain, name, group. */
  groups(now: number): Promise<GroupSummary[]>;
  /** Whether any group takes events of (domain, name): its own groups and those of (domain, `*`). */
  consumed(domain: string, name: string): Promise<boolean>;
  /**
   * Events of the group's backlog above `after` with no outcome for the group, in position order,
   * at most `limit`; leased and delayed ones included (the caller tells them apart).
   */
  unsettled(group: GroupRecord, after: number, limit: number): Promise<Unsettled[]>;
  /**
   * Takes a lease on the event for the group (no outcome, no lease in force, no retry delay in
   * force, and for the default group not claimed by a v4 spoke), counting an attempt. Returns the
   * attempt number, or undefined when another took it first (across gateways: guarded updates).
   */
  claim(request: ClaimRequest): Promise<number | undefined>;
  /** Moves the lease's deadline; false when `delivery` is not the event's current delivery. */
  extend(delivery: string, deadline: number): Promise<boolean>;
  /** Records the outcome of the current delivery `delivery`; undefined when it is not current (superseded, settled). */
  settle(delivery: string, outcome: 'success' | 'failed', error: string | undefined): Promise<EndedDelivery | undefined>;
  /**
   * Ends the lease without an outcome: the event is pending again, from `availableAt` on.
   * `uncount` takes back the attempt (a shutdown hand-back: the handler never got to run).
   */
  release(delivery: string, options: { availableAt?: number | undefined; error?: string | undefined; uncount?: boolean }): Promise<EndedDelivery | undefined>;
  /** Releases every lease `owner` holds (a gateway stopping); returns how many. */
  releaseOwner(owner: string): Promise<number>;
  /** Records `failed` and a dead letter for the group; false when the event has an outcome already. */
  deadLetter(key: GroupKey, eventId: string, attempts: number, lastError: string): Promise<boolean>;
  /** The earliest lease deadline or retry time after `now` among events with no outcome. */
  nextDue(now: number): Promise<number | undefined>;
  /** Dead letters, newest first. */
  deadLetters(query: DeadLetterQuery): Promise<LedgerDeadLetter[]>;
  /** A dead letter back to pending with its attempts at 0 (a new cycle); false when there is no such dead letter. */
  requeue(key: GroupKey, eventId: string): Promise<boolean>;
  /** Drops a dead letter from the list; the event keeps its failed outcome. */
  discard(key: GroupKey, eventId: string): Promise<boolean>;
}

/** The delivery row's group columns: the default groups of a domain share one (v4's one claim per event). */
export function ledgerColumns(key: GroupKey): { gname: string; grp: string } {
  return key.group === DEFAULT_GROUP ? { gname: '', grp: '' } : { gname: key.name, grp: key.group };
}

/** The group a dead letter's columns name. */
export function keyOf(domain: string, gname: string, grp: string, eventName: string): GroupKey {
  return grp === DEFAULT_GROUP ? { domain, name: eventName, group: DEFAULT_GROUP } : { domain, name: gname, group: grp };
}

/** SQL shared by both stores' ledgers (event_published as `p`, eventflow_delivery as `d`): v4's outcome columns unset. */
export const UNSETTLED = 'p.success IS NULL AND p.failed IS NULL';

/**
 * SQL: 1 for an event of the default group claimed by a v4 spoke: v4's claim, set and not under a
 * lease of a gateway (a gateway's lease has a deadline; a released one clears the claim).
 */
export const foreign = (key: GroupKey): string =>
  key.group === DEFAULT_GROUP ? 'CASE WHEN p.consumed_spoke IS NOT NULL AND d.deadline IS NULL THEN 1 ELSE 0 END' : '0';

/** A row of eventflow_delivery with its event's name, as the stores read it (`T`: how the driver returns BIGINTs). */
export interface LedgerRow<T> {
  event_id: string;
  domain: string;
  gname: string;
  grp: string;
  name: string;
  owner: string | null;
  deadline: T | null;
  available_at: T | null;
  attempts: number;
  outcome: string | null;
}
