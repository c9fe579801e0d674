/**
 * The delivery ledger: the work queue of every consumer group. Both stores implement it
 * (store/sqlite/ledger.ts, store/mysql/ledger.ts) on tables of the gateway's own
 * (`eventflow_group`, `eventflow_delivery`), created by init() beside v4's.
 *
 * A group is (domain, name, group); `name` may be `*` (every name of the domain). The default
 * group (`group` = '') keeps v4's columns as its claim and outcome: the claim is v4's guarded
 * `event_published.consumed_spoke`, the outcome is `success`/`failed` there, so v4 spokes keep
 * competing with it. The default groups of (domain, name) and (domain, `*`) are one ledger per event
 * (v4 has one consumer claim per event); a named group has a ledger of its own per event.
 *
 * **Rows are the queue.** Every published event of a group's filter after the group's
 * `createdPosition` gets one row per ledger (`eventflow_delivery`), written by the first claim that
 * reaches it (the group's `materialized` watermark moves forward in position order, so the rows up
 * to it are complete). A claim then takes a page of the group's free rows (no outcome, no lease in
 * force, no retry delay) in position order in one transaction: on MariaDB/MySQL with
 * `FOR UPDATE SKIP LOCKED`, so that gateways claiming at once take different rows instead of
 * queueing behind each other. An *ordered* group takes only the first unsettled row of each pid, so
 * at most one delivery per (domain, pid) is open across all gateways, in position order.
 *
 * Every write that ends or moves a delivery (`apply`, `extend`) is guarded by its delivery id, which
 * is unguessable (128 random bits on SQLite; a hash of a secret per claim and the event id on MySQL)
 * and cleared when the delivery ends:
 * what the store answers is what happened, so a gateway answers a settle only with what it recorded.
 *
 * Times are milliseconds since the epoch (lease deadlines, retry delays) on the lease clock
 * (lease-clock.ts): the gateway's own, corrected on MySQL with several gateways by its offset to the
 * database server's clock, so that gateways whose clocks drift still agree on when a lease ran out.
 */
import { createHash, hash } from 'node:crypto';
import { EventflowError, type StoredEvent } from '@eventflow/core';

/** The default group's name. */
export const DEFAULT_GROUP = '';

export interface GroupKey {
  domain: string;
  /** A name, or `*`. */
  name: string;
  /** '' for the default group. */
  group: string;
}

/** What a group's members agree on, stored with the group. */
export interface GroupOptions {
  /** At most one open delivery per (domain, pid), in position order. */
  ordered: boolean;
}

export interface GroupRecord extends GroupKey, GroupOptions {
  /** The head when the group was created: events above it are its backlog. */
  createdPosition: number;
  /** ISO-8601 UTC. */
  createdAt: string;
}

/** A group with the state of its ledger (metrics, the `groups` operation). */
export interface GroupSummary extends GroupRecord {
  /** Events of its backlog with no outcome and no lease in force (available now or after a retry delay). */
  pending: number;
  /** Events under a lease that has not expired. */
  inFlight: number;
  /** Events that were delivered more than once (attempts > 1), outcome or not. */
  redelivered: number;
  deadLetters: number;
  /** The timestamp of the oldest event with no outcome (for its age). */
  oldestPendingAt: string | undefined;
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
  /**
   * Without a domain: only the domains these token patterns (glob.ts) match; undefined: every domain.
   * In the query, so that a page holds the caller's dead letters, not those of all domains filtered after.
   */
  domains?: readonly string[] | undefined;
  limit: number;
  offset: number;
}

export interface ClaimRequest {
  group: GroupRecord;
  /** The lease owner (this gateway instance). */
  owner: string;
  /** v4's `consumer` of the default group's claim (the gateway id). */
  consumer: string;
  /** Makes the claim's delivery ids (deliveryId) where the store hashes them (MySQL); never leaves the gateway. */
  secret: string;
  deadline: number;
  now: number;
  /** Rows to claim at most. */
  limit: number;
  /** A row delivered this many times already is dead-lettered instead of claimed. */
  maxAttempts: number;
  /**
   * The newest position routed here for the group: every position up to it is committed, and the
   * group's rows up to it are written first. Undefined: up to the store's head (a claim not caused by
   * a route: a member joined, a timer).
   */
  upTo?: number | undefined;
  /** Events the caller has at hand (just routed): not read from the store again. */
  known?: ((id: string) => StoredEvent | undefined) | undefined;
  /**
   * Deliveries of the caller whose lease ran out while their consumer's report waits to be written
   * (the store failed; delivery/leases.ts #writeReport): not taken over by this claim (another
   * gateway's, on a shared MySQL database, does not know them).
   */
  held?: readonly string[] | undefined;
  /**
   * The lease clock `now` and `deadline` were read on, read again before the claim commits. A claim
   * whose leases have run out by then (the store, or the link to it, held it longer than a lease) rolls
   * back and rejects with LateClaim: nothing leased, no attempt counted. Committed, such a lease could
   * never be handed out (Leases.open refuses it), and another gateway's claim could take it over as
   * expired before the hand-back took its attempt back: an attempt spent on no run, and on the last
   * attempt a dead letter of an event that never ran.
   */
  clock?: (() => number) | undefined;
}

/**
 * A claim that would have committed leases already run out (ClaimRequest.clock): rolled back. The
 * store is slow, not failing: the caller claims again, with a new lease, after a backoff.
 */
export class LateClaim extends EventflowError {
  constructor(lateMs: number) {
    super('E_EVENTFLOW_STORE_FAILED', `a claim took longer than its lease in the store (${lateMs} ms past its deadline); rolled back, nothing leased; claiming again`, { details: { lateMs } });
  }
}

/** Throws LateClaim when the claim's leases have run out by `clock` (called last in a claim's transaction, before its commit). */
export function checkInTime(clock: (() => number) | undefined, deadline: number): void {
  if (clock === undefined) return;
  const late = clock() - deadline;
  // As Leases.open judges it: a lease with no time left is not handed out.
  if (late >= 0) throw new LateClaim(Math.round(late));
}

export interface Claimed {
  event: StoredEvent;
  delivery: string;
  /** This delivery's attempt number (1 for the first). */
  attempt: number;
  /** The event's data as the store read it, JSON.stringify's text (SQLite): its delivery frame splices it in. */
  dataText?: string | undefined;
}

/** An event whose deliveries ran out (its gateways died or let its leases expire): recorded as a dead letter by the claim. */
export interface ClaimedDead {
  event: StoredEvent;
  attempts: number;
  lastError: string;
}

export interface ClaimResult {
  claimed: Claimed[];
  dead: ClaimedDead[];
  /**
   * Set when the claim took fewer rows than asked: the earliest time after `now` when a row of the
   * group that is leased or delayed now becomes free (a lease deadline, a retry time); `now` when the
   * store read only part of the group's backlog (MySQL writes a backlog's rows a page ahead of its claims).
   */
  nextDue: number | undefined;
  /** The group is not in the store (deleted): the caller creates it again if it still has members. */
  missing: boolean;
}

/**
 * A group whose members wait for work (its last claim came up short): the store may lease the group's
 * events to it as they are appended, in the append's transaction (SQLite), instead of a claim after
 * the route. The store asks `lease` in position order, in the transaction; after the commit it hands
 * over what it leased (`claimed`), or tells that nothing was (`abandoned`, the transaction failed).
 */
export interface AppendClaimer {
  /** The lease to take the event with, or undefined: the group takes no more now (no credit, a claim under way). */
  lease(event: StoredEvent): { owner: string; consumer: string; deadline: number; now: number } | undefined;
  /**
   * Committed: `claimed` were leased, in position order, of the `given` leases asked for (the others'
   * rows another default group of the ledger took); `covered`: every event of the group up to this
   * position was leased at its append (its route needs no claim), or undefined.
   */
  committed(claimed: Claimed[], given: number, covered: number | undefined): void;
  /** The append failed: none of the `given` leases was taken. */
  abandoned(given: number): void;
}

/** What ends or moves a delivery; each is applied only while `delivery` is the row's current delivery. */
export type LedgerAction =
  | { kind: 'outcome'; delivery: string; outcome: 'success' | 'failed'; error?: string | undefined }
  /** `failed` for the group, and a dead letter with `error`. */
  | { kind: 'dead'; delivery: string; error: string }
  /**
   * Pending again from `availableAt` (or now); `uncount` takes the attempt back (a shutdown hand-back:
   * the handler never got to run). The delivery id stops being valid.
   */
  | { kind: 'release'; delivery: string; availableAt?: number | undefined; error?: string | undefined; uncount?: boolean };

/** A delivery as the ledger holds it: which group's row, which event. */
export interface DeliveryRef {
  /** The row's ledger as a group key (the default group's key carries the event's name). */
  key: GroupKey;
  eventId: string;
  attempts: number;
}

export interface DeliveryLedger {
  /**
   * The group, created now (createdPosition = head) if it did not exist. `options` given are stored
   * (an explicit option replaces the stored one); absent ones keep what is stored (default false).
   */
  ensureGroup(key: GroupKey, options?: Partial<GroupOptions>): Promise<GroupRecord>;
  /** The group as stored, or undefined. */
  group(key: GroupKey): Promise<GroupRecord | undefined>;
  /** Removes the group and its ledger rows (not the default group's v4 columns); false when it did not exist. */
  deleteGroup(key: GroupKey): Promise<boolean>;
  /**
   * Groups with their counts, ordered by domain, name, group; `domains` limits them to those domains,
   * `patterns` to the domains these token patterns (glob.ts) match. In the query: every group counted
   * is scans of its ledger and of the events past its watermark, so a token's listing must not count
   * the groups of domains it may not see.
   */
  groups(now: number, domains?: readonly string[], patterns?: readonly string[]): Promise<GroupSummary[]>;
  /** Groups recorded for the domain. */
  countGroups(domain: string): Promise<number>;
  /** Whether any group takes events of (domain, name): its own groups and those of (domain, `*`). */
  consumed(domain: string, name: string): Promise<boolean>;
  /**
   * In one transaction: the group's rows up to the head written (the watermark moved), then up to
   * `limit` free rows leased to `owner` until `deadline` (attempt counted, v4's claim taken for the
   * default group), in position order; an ordered group's only where no earlier row of the pid is
   * unsettled. Rows at `maxAttempts` become dead letters instead.
   */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /**
   * Where the store can (SQLite): the group's events are leased as they are appended while `claimer`
   * is set (undefined: no more). Only an unordered group, and only while its rows are written up to
   * the head (the store checks); anything else goes through `claim`.
   */
  claimAtAppend?(group: GroupRecord, claimer: AppendClaimer | undefined): void;
  /**
   * Applies the actions; per action, the delivery it ended, undefined when it was not current, or the error that
   * kept it from being written while the others were (MySQL: its row under another client's lock past the wait).
   */
  apply(actions: readonly LedgerAction[]): Promise<Array<DeliveryRef | undefined | Error>>;
  /**
   * The current (open) delivery `delivery`, its domain and its lease's deadline (ms; undefined: none),
   * for a settle that did not come through the gateway holding it, and for that gateway's lease timer.
   */
  delivery(delivery: string): Promise<(DeliveryRef & { domain: string; deadline: number | undefined }) | undefined>;
  /** Moves the lease's deadline; false when `delivery` is not the row's current delivery. */
  extend(delivery: string, deadline: number): Promise<boolean>;
  /** Releases every lease `owner` holds (a gateway stopping), attempts taken back; returns how many. */
  releaseOwner(owner: string): Promise<number>;
  /** Dead letters, newest first. */
  deadLetters(query: DeadLetterQuery): Promise<LedgerDeadLetter[]>;
  /**
   * A dead letter of `key` (its domain included: the caller's right was checked on it) back to
   * pending with its attempts at 0 (a new cycle); false when there is no such dead letter.
   */
  requeue(key: GroupKey, eventId: string): Promise<boolean>;
  /** Drops a dead letter of `key` from the list; the event keeps its failed outcome. False when there is none. */
  discard(key: GroupKey, eventId: string): Promise<boolean>;
}

/** The delivery row's group columns: the default groups of a domain share one (v4's one claim per event). */
export function ledgerColumns(key: GroupKey): { gname: string; grp: string } {
  return key.group === DEFAULT_GROUP ? { gname: '', grp: '' } : { gname: key.name, grp: key.group };
}

/** The group a ledger row's columns name (the default group's by the event's name). */
export function keyOf(domain: string, gname: string, grp: string, eventName: string): GroupKey {
  return grp === DEFAULT_GROUP ? { domain, name: eventName, group: DEFAULT_GROUP } : { domain, name: gname, group: grp };
}

/**
 * The start of the delivery ids of one claim: the time in ms (12 hex digits), never lower than the
 * last one this process gave. Both ledgers index the ids of open deliveries, and an id drawn at random
 * put each claimed row's entry, and its removal at the settle, on a page of its own: on SQLite that
 * index was half of a claim's time (20 µs an event in pages of 64, 9.7 with the ids rising from claim
 * to claim). The random rest of the id keeps it unguessable.
 */
export function deliveryPrefix(): string {
  lastPrefix = Math.max(Date.now(), lastPrefix);
  return lastPrefix.toString(16).padStart(12, '0');
}
let lastPrefix = 0;

/**
 * A delivery id: the claim's `prefix` (deliveryPrefix), then a part unguessable without the claim's
 * secret, distinct per claim. The MySQL ledger computes the same in SQL
 * (`CONCAT(prefix, LEFT(SHA2(CONCAT(secret, ':', event_id), 256), 32))`).
 */
export function deliveryId(prefix: string, secret: string, eventId: string): string {
  // crypto.hash (Node 20.12+): a third of createHash's cost, per claimed event.
  const text = `${secret}:${eventId}`;
  return prefix + (typeof hash === 'function' ? hash('sha256', text, 'hex') : createHash('sha256').update(text).digest('hex')).slice(0, 32);
}

/**
 * Whether `id` may name a delivery in a store: the ids are ASCII (deliveryId), and the MySQL column
 * is, so a settle or extend carrying anything else is unknown without asking the store, which would
 * refuse to compare it (ER_CANT_AGGREGATE_2COLLATIONS) and fail the request as a store failure.
 */
export function mayNameDelivery(id: string): boolean {
  return /^[\x00-\x7f]*$/.test(id);
}

/** The events of `ids` the caller has at hand (ClaimRequest.known), and the ids to read from the store. */
export function atHand(ids: readonly string[], known: ((id: string) => StoredEvent | undefined) | undefined): { events: Map<string, StoredEvent>; missing: string[] } {
  const events = new Map<string, StoredEvent>();
  const missing: string[] = [];
  for (const id of ids) {
    const event = known?.(id);
    if (event) events.set(id, event);
    else missing.push(id);
  }
  return { events, missing };
}

/** A text cut to at most `max` characters without splitting a surrogate pair. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = /[\uD800-\uDBFF]/.test(text.charAt(max - 1)) ? max - 1 : max;
  return text.slice(0, end);
}

/** SQL shared by both stores' ledgers (event_published as `p`, eventflow_delivery as `d`): v4's outcome columns unset. */
export const UNSETTLED = 'p.success IS NULL AND p.failed IS NULL';

/**
 * SQL: the default group's row is ours to claim: v4's outcome unset, and v4's claim unset or under a
 * lease of a gateway (a gateway's lease has a deadline; a released one clears the claim; a v4 spoke's
 * claim has none).
 */
export const CLAIMABLE_V4 = `${UNSETTLED} AND (p.consumed_spoke IS NULL OR d.deadline IS NOT NULL)`;

/**
 * SQL: the ledger row `row` (a table name or alias) belongs to a group that exists and was created
 * before its event. A deleted default group's rows stay (v4's claim and outcome are the event's, and
 * the domain's other default group may share them), as may a row a claim on another gateway wrote
 * by its copy of a group deleted meanwhile; a group recorded again starts after them. Without this,
 * such rows were listed as dead letters of no group (a requeue answered `true`, and the event never
 * went out), counted as the new group's pending work for good, and in an ordered group a pending one
 * held its pid's new events back forever.
 */
export const OWNED_ROW = (row: string): string =>
  `EXISTS (SELECT 1 FROM eventflow_group og WHERE og.domain = ${row}.domain AND og.grp = ${row}.grp
    AND ((${row}.grp <> '' AND og.name = ${row}.gname) OR (${row}.grp = '' AND og.name IN (${row}.name, '*'))) AND og.created_position < ${row}.position)`;
