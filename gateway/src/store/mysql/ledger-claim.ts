/**
 * The reads of a MySQL ledger claim (ledger.ts), shaped to take few round trips: on this store a
 * round trip costs both processes a socket write and a wake-up, which on a small host is more CPU
 * than the rows it carries.
 *
 * - claimState: the group row, the head and the expired leases in one unlocked read, the first
 *   statement of the claim's transaction (no read of the group before it).
 * - lockRows: the locking read carries the events' columns (scalar subqueries, which take no locks:
 *   a claim locks ledger rows only), so a claim of events not at hand reads them in the same trip.
 * - nextDue: through the queue index (its deadlines, then the free rows' retry times).
 */
import type { PoolConnection } from 'mysql2/promise';
import type { StoredEvent } from '@eventflow/core';
import type { GroupKey } from '../ledger.js';
import { CLAIMABLE_V4, DEFAULT_GROUP, ledgerColumns } from '../ledger.js';
import { num } from './ledger-rows.js';
import { toStoredEvent } from './rows.js';
import { select, type Params } from './statements.js';

/** The rows of the group's ledger (`d`); the default group of a name takes only that name's rows of the shared ledger. */
export function rowScope(key: GroupKey): { sql: string; params: Params } {
  const { gname, grp } = ledgerColumns(key);
  const named = key.group === DEFAULT_GROUP && key.name !== '*';
  return { sql: `d.domain = ? AND d.gname = ? AND d.grp = ? ${named ? 'AND d.name = ?' : ''}`, params: [key.domain, gname, grp, ...(named ? [key.name] : [])] };
}

/** What a claim reads before it writes anything. */
export interface ClaimState {
  created: number;
  ordered: boolean;
  /** The watermark as stored (created when never written). */
  materialized: number;
  head: number;
  /** Rows whose lease ran out, earliest deadline first (at most the claim's limit). */
  expired: string[];
}

/**
 * The group (undefined when deleted), the store's head, and the rows whose leases ran out, read
 * without locks: a locking read of the range `deadline <= now` would also lock the first lease in
 * force past it, an open delivery whose settle would then wait for this claim. They are locked by
 * key after (lockRows).
 */
export async function claimState(conn: PoolConnection, key: GroupKey, now: number, limit: number): Promise<ClaimState | undefined> {
  const scope = rowScope(key);
  const v4 = key.group === DEFAULT_GROUP;
  const [row] = await select<{ created_position: number | string; ordered: number; materialized: number | string | null; head: number | string; expired: string | null }>(
    conn,
    `SELECT g.created_position, g.ordered, g.materialized, (SELECT value FROM eventflow_sequence WHERE name = 'event') AS head,
       (SELECT JSON_ARRAYAGG(t.event_id) FROM (
         SELECT d.event_id FROM eventflow_delivery d ${v4 ? 'JOIN event_published p ON p.event_id = d.event_id' : ''}
         WHERE ${scope.sql} AND d.outcome IS NULL AND d.deadline <= ? ${v4 ? `AND ${CLAIMABLE_V4}` : ''}
           AND d.position > (SELECT created_position FROM eventflow_group WHERE domain = ? AND name = ? AND grp = ?)
         ORDER BY d.deadline LIMIT ?) t) AS expired
     FROM eventflow_group g WHERE g.domain = ? AND g.name = ? AND g.grp = ?`,
    [...scope.params, now, key.domain, key.name, key.group, limit, key.domain, key.name, key.group],
  );
  if (!row) return undefined;
  return {
    created: Number(row.created_position),
    ordered: Number(row.ordered) === 1,
    materialized: Number(row.materialized ?? row.created_position),
    head: Number(row.head),
    expired: row.expired === null ? [] : (JSON.parse(row.expired) as string[]),
  };
}

/** A row a claim locked, with its event's columns (NULL when the event is gone, or was not read). */
export interface LockedRow {
  event_id: string;
  attempts: number;
  last_error: string | null;
  domain: string;
  pid: string | null;
  name: string | null;
  position: number | string | null;
  timestamp: Date | null;
  rid: string | null;
  data: string | Buffer | null;
  traceparent: string | null;
  tracestate: string | null;
}

/** The event's columns the ledger row does not have, one primary-key lookup each. */
const EVENT_COLUMNS = ['timestamp', 'rid', 'data'].map((column) => `(SELECT e.${column} FROM event e WHERE e.id = d.event_id) AS ${column}`);
const POSITION_COLUMNS = ['traceparent', 'tracestate'].map((column) => `(SELECT x.${column} FROM eventflow_position x WHERE x.event_id = d.event_id) AS ${column}`);
/** For a locking read of `d`: its columns and its event's. */
export const LOCKED_COLUMNS = ['d.event_id', 'd.attempts', 'd.last_error', 'd.domain', 'd.pid', 'd.name', 'd.position', ...EVENT_COLUMNS, ...POSITION_COLUMNS].join(', ');

/** The locked rows' events: at hand (`known`), or from the columns read; `missing` those to read again. */
export function lockedEvents(rows: readonly LockedRow[], known: ((id: string) => StoredEvent | undefined) | undefined): { events: Map<string, StoredEvent>; missing: string[] } {
  const events = new Map<string, StoredEvent>();
  const missing: string[] = [];
  for (const row of rows) {
    const id = row.event_id;
    const event = known?.(id);
    if (event) events.set(id, event);
    else if (row.data !== null && row.timestamp !== null && row.pid !== null && row.name !== null && row.position !== null) {
      events.set(id, toStoredEvent({ id, timestamp: row.timestamp, domain: row.domain, rid: row.rid, pid: row.pid, name: row.name, data: row.data, position: Number(row.position), traceparent: row.traceparent, tracestate: row.tracestate }));
    } else missing.push(id);
  }
  return { events, missing };
}

/** The earliest time after `now` a leased or delayed row of the group comes free (ClaimResult.nextDue). */
export async function nextDue(conn: PoolConnection, key: GroupKey, now: number): Promise<number | undefined> {
  const scope = rowScope(key);
  // Two ranges of the queue index: a whole-table scan otherwise, whatever the table's statistics say.
  const [due] = await select<{ lease: number | string | null; retry: number | string | null }>(
    conn,
    `SELECT (SELECT MIN(d.deadline) FROM eventflow_delivery d FORCE INDEX (idx_delivery_queue) WHERE ${scope.sql} AND d.outcome IS NULL AND d.deadline > ?) AS lease,
       (SELECT MIN(d.available_at) FROM eventflow_delivery d FORCE INDEX (idx_delivery_queue)
        WHERE ${scope.sql} AND d.outcome IS NULL AND (d.deadline IS NULL OR d.deadline <= ?) AND d.available_at > ?) AS retry`,
    [...scope.params, now, ...scope.params, now, now],
  );
  const lease = num(due?.lease);
  const retry = num(due?.retry);
  return lease === undefined ? retry : retry === undefined ? lease : Math.min(lease, retry);
}
