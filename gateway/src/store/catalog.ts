/**
 * The store's read side for operators (the console): what domains exist, the processes of a
 * domain with their status, what happened to each event of a process, and the scheduled events
 * still to come. Each store implements it in a file of its own (sqlite/catalog.ts,
 * mysql/catalog.ts); the gateway filters every answer by the connection's rights.
 */
import type { Position, StoredEvent } from '@eventflow/core';

export interface DomainSummary {
  domain: string;
  /** Events that joined their eventlog (unfired scheduled events not counted). */
  events: number;
  /** The newest event's timestamp (ISO-8601 UTC). */
  lastEvent: string;
}

/**
 * A process's status, first match wins: `failed` (a consume that failed, a dead letter, in the
 * default group or a named one, or its newest outcome event is named `failed`), `pending` (an
 * event claimed by a consumer and not settled yet), `scheduled` (an event due later), `completed`
 * (its newest outcome event is named `success`, or a consume of one of its events succeeded),
 * else `open` (no outcome yet).
 */
export type ProcessStatus = 'failed' | 'pending' | 'scheduled' | 'completed' | 'open';

export interface ProcessSummary {
  pid: string;
  status: ProcessStatus;
  events: number;
  firstEvent: string;
  lastEvent: string;
}

export interface ProcessQuery {
  /** Only pids starting with this. */
  prefix?: string | undefined;
  /** `pid` (binary pid order, the default) or `recent` (the process with the newest event first). */
  order?: 'pid' | 'recent' | undefined;
  /** The cursor of pid order: pids after this one. */
  after?: string | undefined;
  /** The cursor of recent order: a row's `cursor`, the processes after it. */
  cursor?: string | undefined;
  limit: number;
}

/** A process as the catalog lists it; in recent order with `cursor`, where the next page starts after it. */
export type ProcessRow = ProcessSummary & { cursor?: string };

/** What became of one event of a process (absent fields: not applicable). */
export interface EventFate {
  eventId: string;
  /** The consumer that claimed it (v4 `consumer`), and when. */
  consumer?: string | undefined;
  claimed?: string | undefined;
  success?: string | undefined;
  failed?: string | undefined;
  orphan?: string | undefined;
  /** Published (routed), not only persisted. */
  published: boolean;
  /** Its dead letter: deliveries made and why the last one ended unsettled. */
  deadLetter?: { attempts: number; reason: string; at: string } | undefined;
  /** Its rows in the delivery ledger, one per consumer group that took it (absent: none). */
  deliveries?: EventDelivery[] | undefined;
}

/** One consumer group's delivery of an event (a row of eventflow_delivery). */
export interface EventDelivery {
  /** '' for the default group. */
  group: string;
  /** The group's filter name ('' for the default group, whose row is shared by the domain's names). */
  name: string;
  /** Deliveries made so far. */
  attempts: number;
  /** success, failed, dead or discarded; absent while unsettled. */
  outcome?: string | undefined;
  lastError?: string | undefined;
  /** When its current (or last) delivery began (ISO-8601, ms), and when that delivery ended. */
  claimedAt?: string | undefined;
  settledAt?: string | undefined;
}

/** A row of eventflow_delivery as the catalogs read it. `claimedAt`/`settledAt`: ms since the epoch (MySQL's BIGINT may come as text), NULL before the first claim/settle or from older gateways. */
export type DeliveryRow = { eventId: string; grp: string; gname: string; attempts: number | string; outcome: string | null; lastError: string | null; claimedAt?: number | string | null; settledAt?: number | string | null };

/** A page's ledger rows as each event's `deliveries` (one extra query per page, not per event). */
export function withDeliveries(fates: EventFate[], rows: readonly DeliveryRow[]): EventFate[] {
  const byEvent = new Map<string, EventDelivery[]>();
  for (const row of rows) {
    const delivery: EventDelivery = { group: row.grp, name: row.gname, attempts: Number(row.attempts) };
    if (row.outcome !== null) delivery.outcome = row.outcome;
    if (row.lastError !== null) delivery.lastError = row.lastError;
    if (row.claimedAt != null) delivery.claimedAt = new Date(Number(row.claimedAt)).toISOString();
    // Only an end of the current delivery: a settle before its claim was an earlier attempt's.
    if (row.settledAt != null && Number(row.settledAt) >= Number(row.claimedAt ?? 0)) delivery.settledAt = new Date(Number(row.settledAt)).toISOString();
    const list = byEvent.get(row.eventId);
    if (list) list.push(delivery);
    else byEvent.set(row.eventId, [delivery]);
  }
  return fates.map((fate) => {
    const deliveries = byEvent.get(fate.eventId);
    return deliveries ? { ...fate, deliveries } : fate;
  });
}

export interface Associations {
  /** Child processes associated with events of the process. */
  children: Array<{ eventId: string; domain: string; cpid: string }>;
  /** Entity ids associated with events of the process. */
  entities: Array<{ eventId: string; eid: string }>;
}

export interface ScheduledSummary {
  id: string;
  domain: string;
  name: string;
  pid: string;
  /** When it fires (ISO-8601 UTC). */
  due: string;
  /** When it was scheduled. */
  timestamp: string;
}

export interface ScheduledQuery {
  domain?: string | undefined;
  /**
   * Only domains matching one of these token patterns (`*`: any run of characters, every other
   * character itself; connection/glob.ts); undefined: every domain. The connection's rights, pushed
   * into the query so that rows it may not see are not read one page at a time.
   */
  domains?: readonly string[] | undefined;
  /** The cursor: the last (due, id) of the previous page. */
  after?: { due: string; id: string } | undefined;
  limit: number;
}

/** Settled deliveries of (domain, name) in a window of settle times (ms), the newest first, at most `limit`. */
export interface SettledQuery {
  domain: string;
  name: string;
  /** A group ('' the default group); absent: every group. */
  group?: string | undefined;
  from: number;
  to: number;
  limit: number;
}

/** A delivery that reached an outcome, with its event's times (ms since the epoch). */
export interface SettledDelivery {
  eventId: string;
  pid: string;
  group: string;
  outcome: string;
  attempts: number;
  storedAt: number;
  claimedAt: number;
  settledAt: number;
}

export interface Catalog {
  /** Every domain with events, in binary order. */
  domains(): Promise<DomainSummary[]>;
  /**
   * A page of the processes of `domain`: in binary pid order (the domain-pid index, one page
   * read), or in recent order (the newest event first: the index entries of the domain's, or the
   * prefix's, processes are read and sorted, then the page's processes summed up).
   */
  processes(domain: string, query: ProcessQuery): Promise<ProcessRow[]>;
  /** At most `limit` events of (domain, pid) after `after`, as readEventlog returns them: a timeline page without reading the rest. */
  eventlogPage(domain: string, pid: string, after: Position, limit: number): Promise<StoredEvent[]>;
  /** The fate of each listed event of (domain, pid) that has one, and the process's associations. */
  fates(domain: string, pid: string, eventIds: readonly string[]): Promise<EventFate[]>;
  associations(domain: string, pid: string): Promise<Associations>;
  /** The latency view's rows (readLatency): the ledger's settled deliveries, by the index on (domain, name, settled_at). */
  settledDeliveries(query: SettledQuery): Promise<SettledDelivery[]>;
  /** Scheduled events not fired yet, soonest first. */
  scheduled(query: ScheduledQuery): Promise<ScheduledSummary[]>;
  /**
   * Deletes the scheduled event `id` of `domain` that has not fired; false when there is none
   * (fired, cancelled, never scheduled, or of another domain). `domain` is the one the caller's
   * right was checked on, matched in the deleting statement itself.
   */
  cancelScheduled(id: string, domain: string): Promise<boolean>;
  /**
   * The position after which the newest `count` published events of (domain, name) lie (`*`: any
   * name), 0 when there are fewer: where a subscription "from the last N" replays from.
   */
  positionBeforeLast(domain: string, name: string, count: number): Promise<Position>;
  /** Published events that no consumer has settled (or that one holds now), orphans left out. */
  backlog(): Promise<number>;
  /**
   * Of the events positioned after `after`, those another publisher stored (publisher set and not `publisher`), counted
   * by publisher (the first PUBLISHERS_SEEN of them), and the highest position read. Optional: only a store that several
   * processes can write (MySQL) has it; the routers ask it to find a gateway on their database whose events do not reach
   * them (router/elsewhere.ts).
   */
  publishedElsewhere?(publisher: string, after: Position): Promise<{ head: Position; publishers: PublishedBy[] }>;
}

/** Events of one publisher that publishedElsewhere found. */
export interface PublishedBy {
  publisher: string;
  events: number;
}

/** How many publishers publishedElsewhere names at most: a look needs one; a few help the log. */
export const PUBLISHERS_SEEN = 10;

/** A ledger row of the event (any consumer group) whose outcome matches `outcome` (SQL). */
const delivered = (outcome: string): string => `EXISTS (SELECT 1 FROM eventflow_delivery d WHERE d.event_id = e.id AND ${outcome})`;

/**
 * The SELECT and FROM of a page of processes, the same SQL on both stores (the WHERE, with the
 * domain, the cursor and the prefix range, is each store's; `join` joins the page's pids in recent
 * order, `columns` adds to the select list, `order` orders the outcome events: SQLite's position,
 * MySQL's timestamp, where v4's rows have no position): one row per pid with its count (unfired scheduled events left out), first and last
 * event, and what its status is made of (statusOf): v4's outcome columns (the default group), the
 * delivery ledger (named groups), and the newest outcome events.
 */
export const processSummary = (join = '', columns = '', order = 'e.timestamp'): string => `SELECT e.pid AS pid${columns},
         SUM(CASE WHEN s.event_id IS NOT NULL AND s.executed IS NULL THEN 0 ELSE 1 END) AS events,
         MIN(e.timestamp) AS firstEvent, MAX(e.timestamp) AS lastEvent,
         MAX(p.failed IS NOT NULL OR ${delivered(`d.outcome IN ('failed', 'dead', 'discarded')`)}) AS failed,
         MAX((p.consumed_spoke IS NOT NULL AND p.success IS NULL AND p.failed IS NULL) OR ${delivered('d.outcome IS NULL AND d.attempts > 0')}) AS pending,
         MAX(s.event_id IS NOT NULL AND s.executed IS NULL) AS scheduled,
         MAX(p.success IS NOT NULL OR ${delivered(`d.outcome = 'success'`)}) AS succeeded,
         MAX(CASE WHEN e.name = 'failed' THEN ${order} END) AS lastFailed,
         MAX(CASE WHEN e.name = 'success' THEN ${order} END) AS lastSuccess
       FROM event e ${join} LEFT JOIN event_published p ON p.event_id = e.id LEFT JOIN event_scheduled s ON s.event_id = e.id`;

/** What a row of processSummary gives statusOf (flags as numbers or strings, times as ISO strings or Dates). */
export interface StatusFlags {
  failed: unknown;
  pending: unknown;
  scheduled: unknown;
  succeeded: unknown;
  /** When (a timestamp) or where (a position) the newest outcome events are. */
  lastFailed: string | number | Date | null;
  lastSuccess: string | number | Date | null;
}

/**
 * Token patterns (glob.ts) as SQL LIKE patterns with `!` as the escape character: `*` → `%`, and
 * `%`, `_`, `!` escaped. Patterns with characters outside ASCII are left out: domains are ASCII,
 * so they match nothing (and an ASCII column would turn them into `?`, which might).
 */
export function likePatterns(patterns: readonly string[]): string[] {
  return patterns.filter(isAscii).map((pattern) => pattern.replace(/[!%_]/g, '!$&').replaceAll('*', '%'));
}

/** The same as SQLite GLOB patterns (case-sensitive, unlike its LIKE): `*` stays, `[` and `?` are bracketed. */
export function globPatterns(patterns: readonly string[]): string[] {
  return patterns.filter(isAscii).map((pattern) => pattern.replace(/[[?]/g, '[$&]'));
}

const isAscii = (text: string): boolean => /^[\x00-\x7f]*$/.test(text);

/** `prefix` as a half-open range [low, high) of pids: ids are printable ASCII, 0x7f sorts after all of them. */
export function prefixRange(prefix: string | undefined): { low: string; high: string } {
  return prefix ? { low: prefix, high: `${prefix}\x7f` } : { low: '', high: '\x7f' };
}

/** The status of a process (ProcessStatus) from its row: the newer outcome event wins; with timestamps, a `failed` beats a `success` of the same millisecond. */
export function statusOf(row: StatusFlags): ProcessStatus {
  const at = (time: string | number | Date | null): number => (time === null ? -Infinity : typeof time === 'number' ? time : new Date(time).getTime());
  if (Number(row.failed) > 0 || (row.lastFailed !== null && at(row.lastFailed) >= at(row.lastSuccess))) return 'failed';
  if (Number(row.pending) > 0) return 'pending';
  if (Number(row.scheduled) > 0) return 'scheduled';
  if (row.lastSuccess !== null || Number(row.succeeded) > 0) return 'completed';
  return 'open';
}

/** A row of processSummary as a ProcessSummary, its times as ISO strings. */
export function summaryOf(row: StatusFlags & { pid: string; events: number | string; firstEvent: string | Date; lastEvent: string | Date }, cursor?: string): ProcessRow {
  const iso = (time: string | Date): string => (typeof time === 'string' ? time : time.toISOString());
  const summary: ProcessRow = { pid: row.pid, status: statusOf(row), events: Number(row.events), firstEvent: iso(row.firstEvent), lastEvent: iso(row.lastEvent) };
  if (cursor !== undefined) summary.cursor = cursor;
  return summary;
}

/** A row of the settled deliveries query as either store reads it (MySQL: BIGINT as text, DATETIME as a Date). */
export type SettledRow = { eventId: string; pid: string; grp: string; outcome: string; attempts: number | string; storedAt: string | Date; claimedAt: number | string; settledAt: number | string };

export function toSettled(row: SettledRow): SettledDelivery {
  return {
    eventId: row.eventId,
    pid: row.pid,
    group: row.grp,
    outcome: row.outcome,
    attempts: Number(row.attempts),
    storedAt: row.storedAt instanceof Date ? row.storedAt.getTime() : Date.parse(row.storedAt),
    claimedAt: Number(row.claimedAt),
    settledAt: Number(row.settledAt),
  };
}

/** SQL over eventflow_delivery `d` joined to its event `e`: the settled deliveries of a SettledQuery, newest first (placeholders `?`: domain, name, from, to, [group], limit). */
export function settledSql(group: boolean): string {
  return `SELECT d.event_id AS eventId, e.pid, d.grp, d.outcome, d.attempts, e.timestamp AS storedAt, d.claimed_at AS claimedAt, d.settled_at AS settledAt
    FROM eventflow_delivery d JOIN event e ON e.id = d.event_id
    WHERE d.domain = ? AND d.name = ? AND d.settled_at >= ? AND d.settled_at < ? AND d.outcome IS NOT NULL AND d.claimed_at IS NOT NULL ${group ? 'AND d.grp = ?' : ''}
    ORDER BY d.settled_at DESC LIMIT ?`;
}
