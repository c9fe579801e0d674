/**
 * Writing a batch of settles and releases (MysqlLedger.apply) into the ledger rows, and for the
 * default group v4's outcome or claim beside them in `event_published`.
 *
 * The common settle carries nothing of its own (a `success`, a `failed` without an error, a plain
 * hand-back): those are one single-table `UPDATE … WHERE delivery IN (…)` per kind, and one of
 * `event_published` for the default group's. A multi-table UPDATE over a JSON_TABLE costs the server
 * about a millisecond whatever its size (MariaDB defers every row of both tables to temporary tables
 * and updates them after the join): at a steady 500 jobs/s, settled a few at a time, that was the
 * largest statement of all. Settles that carry an error or a time (`dead`, a retry's `availableAt`,
 * a failure's message) go through one such statement, so a batch is a handful of statements at most.
 */
import type { PoolConnection } from 'mysql2/promise';
import { EventflowError } from '@eventflow/core';
import { DEFAULT_GROUP, keyOf, UNSETTLED, type DeliveryRef, type LedgerAction } from '../ledger.js';
import { affected, select } from './statements.js';
import { ID_TABLE } from './ledger-rows.js';
import { insertDeadLetters } from './ledger-operator.js';

export type RefRow = { event_id: string; domain: string; gname: string; grp: string; name: string | null; attempts: number; delivery: string };
const REF_COLUMNS = 'd.event_id, d.domain, d.gname, d.grp, d.name, d.attempts, d.delivery';

/** An action whose row is open and another transaction holds (a `SKIP LOCKED` read passed it by). */
export const HELD = Symbol('held');

/**
 * Applies `actions` in the caller's transaction: per action, the row it ended or moved, undefined when its delivery is
 * not current, or HELD. `lock` ends the locking read: `SKIP LOCKED`, or a wait (bounded where the server can).
 */
export async function applyActions(conn: PoolConnection, actions: readonly LedgerAction[], lock: (sql: string) => string): Promise<Array<RefRow | undefined | typeof HELD>> {
  const ids = JSON.stringify(actions.map((action) => action.delivery));
  const rows = await select<RefRow>(
    conn,
    // The JSON table first, then the delivery index: a locking read keeps the lock of every row it
    // examines, so a plan through another index (say outcome's) would lock every open delivery.
    lock(`SELECT ${REF_COLUMNS} FROM ${ID_TABLE} STRAIGHT_JOIN eventflow_delivery d FORCE INDEX (idx_delivery_id) ON d.delivery = j.id WHERE d.outcome IS NULL FOR UPDATE`),
    [ids],
  );
  const current = new Map(rows.map((row) => [row.delivery, row]));
  const first = firstPerDelivery(actions);
  const acting = new Map([...first].filter(([delivery]) => current.has(delivery)));
  const missing = await notCurrent(conn, first, current);
  if (acting.size > 0) await settleRows(conn, [...acting.values()], current);
  const letters = [...acting.values()].filter((action) => action.kind === 'dead' && current.get(action.delivery)?.grp === DEFAULT_GROUP);
  if (letters.length > 0) {
    await insertDeadLetters(
      conn,
      letters.map((action) => {
        const row = current.get(action.delivery) as RefRow;
        return { id: row.event_id, attempts: Number(row.attempts), error: action.error ?? '' };
      }),
    );
  }
  return answers(actions, first, current, missing);
}

/** One action per delivery: the first (a batch may hold a settle and a release of one delivery). */
export function firstPerDelivery(actions: readonly LedgerAction[]): Map<string, LedgerAction> {
  const first = new Map<string, LedgerAction>();
  for (const action of actions) if (!first.has(action.delivery)) first.set(action.delivery, action);
  return first;
}

/** Of the deliveries not `current` (open and locked here): those recorded already (recordedAlready), and those still open but held by another transaction. */
export async function notCurrent(conn: PoolConnection, first: ReadonlyMap<string, LedgerAction>, current: ReadonlyMap<string, RefRow>): Promise<{ again: Map<string, RefRow>; held: Set<string> }> {
  const missing = [...first.values()].filter((action) => !current.has(action.delivery));
  const again = await recordedAlready<RefRow>(conn, missing, REF_COLUMNS);
  // Still open, as a plain read (what is committed) finds them: passed by for another transaction's lock.
  const unread = missing.filter((action) => !again.has(action.delivery));
  const held =
    unread.length === 0
      ? new Set<string>()
      : new Set(
          (await select<{ delivery: string }>(conn, `SELECT d.delivery FROM ${ID_TABLE} STRAIGHT_JOIN eventflow_delivery d FORCE INDEX (idx_delivery_id) ON d.delivery = j.id WHERE d.outcome IS NULL`, [
            JSON.stringify(unread.map((action) => action.delivery)),
          ])).map((row) => row.delivery),
        );
  return { again, held };
}

/** Per action (applyActions' answer): its row, undefined when not current (or not the first of its delivery), or HELD. */
export function answers(
  actions: readonly LedgerAction[],
  first: ReadonlyMap<string, LedgerAction>,
  current: ReadonlyMap<string, RefRow>,
  { again, held }: { again: ReadonlyMap<string, RefRow>; held: ReadonlySet<string> },
): Array<RefRow | undefined | typeof HELD> {
  return actions.map((action) => {
    if (first.get(action.delivery) !== action) return undefined;
    if (held.has(action.delivery)) return HELD;
    return current.get(action.delivery) ?? again.get(action.delivery);
  });
}

/** A row as the ledger answers it (DeliveryRef): a hand-back that takes its attempt back answers the attempts left. */
function toRef(row: RefRow | undefined, action: LedgerAction): DeliveryRef | undefined {
  const uncount = action.kind === 'release' && action.uncount ? 1 : 0;
  return row && { key: keyOf(row.domain, row.gname, row.grp, row.name ?? ''), eventId: row.event_id, attempts: Math.max(0, Number(row.attempts) - uncount) };
}

/** MysqlLedger.apply's answer: `rows` of the first pass, with those HELD answered by `again`, the second pass over them alone. */
export function withHeld(actions: readonly LedgerAction[], rows: ReadonlyArray<RefRow | undefined | typeof HELD>, again: ReadonlyArray<RefRow | undefined | typeof HELD | Error>): Array<DeliveryRef | undefined | Error> {
  let next = 0;
  return rows.map((row, i) => {
    if (row !== HELD) return toRef(row, actions[i] as LedgerAction);
    const written = again[next++];
    if (written === HELD) return new EventflowError('E_EVENTFLOW_STORE_FAILED', "another client's transaction holds the delivery's ledger row; send the settle again");
    return written instanceof Error ? written : toRef(written, actions[i] as LedgerAction);
  });
}

/** What a settle needs of the row it locked: which event, and whether it is the default group's. */
export interface SettledRow {
  event_id: string;
  grp: string;
}

export type Plain = 'success' | 'failed' | 'release' | 'uncount';

/** The kind of a settle that sets nothing of its own, or undefined when it carries an error or a time. */
export function plainKind(action: LedgerAction): Plain | undefined {
  if (action.error !== undefined) return undefined;
  if (action.kind === 'outcome') return action.outcome;
  if (action.kind === 'release' && action.availableAt === undefined) return action.uncount ? 'uncount' : 'release';
  return undefined;
}

/**
 * What a plain kind sets: on the ledger row, and on v4's row for the default group's. An outcome
 * leaves the row's delivery id in place: `outcome IS NULL`, in every statement that takes a delivery
 * id, makes it void, and clearing it moved the row's entry in the index the UPDATE reads its rows by
 * (~8% of a settle's page reads). A release clears it: the row is open again.
 */
export const PLAIN: Record<Plain, { row: string; v4: string }> = {
  success: { row: `outcome = 'success', last_error = NULL`, v4: 'success = UTC_TIMESTAMP()' },
  failed: { row: `outcome = 'failed', last_error = NULL`, v4: 'failed = UTC_TIMESTAMP()' },
  release: { row: 'owner = NULL, available_at = NULL, delivery = NULL', v4: 'consumed_spoke = NULL, consumer = NULL' },
  uncount: { row: 'owner = NULL, available_at = NULL, delivery = NULL, attempts = GREATEST(0, CAST(attempts AS SIGNED) - 1)', v4: 'consumed_spoke = NULL, consumer = NULL' },
};

/** Writes `acting` (one action per delivery, each delivery's row locked by the caller's transaction and in `rows`). */
export async function settleRows(conn: PoolConnection, acting: readonly LedgerAction[], rows: ReadonlyMap<string, SettledRow>): Promise<void> {
  const plain = new Map<Plain, LedgerAction[]>();
  const rest: LedgerAction[] = [];
  for (const action of acting) {
    const kind = plainKind(action);
    if (kind === undefined) rest.push(action);
    else plain.set(kind, [...(plain.get(kind) ?? []), action]);
  }
  const settledAt = Date.now();
  for (const [kind, actions] of plain) {
    const set = PLAIN[kind];
    const deliveries = actions.map((action) => action.delivery);
    // The delivery index, named: a locking statement keeps the lock of every row it examines, and a
    // plan through the outcome's index would examine every open delivery.
    await affected(conn, `UPDATE eventflow_delivery FORCE INDEX (idx_delivery_id) SET ${set.row}, deadline = NULL, updated = UTC_TIMESTAMP(3), settled_at = ? WHERE delivery IN (?) AND outcome IS NULL`, [
      settledAt,
      deliveries,
    ]);
    const v4 = deliveries.flatMap((delivery) => {
      const row = rows.get(delivery);
      return row !== undefined && row.grp === DEFAULT_GROUP ? [row.event_id] : [];
    });
    if (v4.length > 0) await affected(conn, `UPDATE event_published p FORCE INDEX (PRIMARY) SET ${set.v4} WHERE p.event_id IN (?) AND ${UNSETTLED}`, [v4]);
  }
  if (rest.length > 0) await settleCarrying(conn, rest, settledAt);
}

/** Settles that carry an error or a time: one statement over a JSON table of them (absent members are NULL: JSON_TABLE's NULL ON EMPTY). */
async function settleCarrying(conn: PoolConnection, actions: readonly LedgerAction[], settledAt: number): Promise<void> {
  const table = actions.map((action) => ({
    d: action.delivery,
    k: action.kind,
    ...(action.kind === 'release' ? {} : { o: action.kind === 'dead' ? 'dead' : action.outcome }),
    ...(action.error === undefined ? {} : { e: action.error }),
    ...(action.kind === 'release' && action.availableAt !== undefined ? { a: action.availableAt } : {}),
    u: action.kind === 'release' && action.uncount ? 1 : 0,
  }));
  await affected(
    conn,
    `UPDATE JSON_TABLE(?, '$[*]' COLUMNS (
       dl VARCHAR(96) CHARACTER SET ascii COLLATE ascii_bin PATH '$.d', k VARCHAR(16) PATH '$.k', o VARCHAR(16) PATH '$.o',
       e LONGTEXT CHARACTER SET utf8mb4 PATH '$.e', a BIGINT PATH '$.a', u INT PATH '$.u')) j STRAIGHT_JOIN eventflow_delivery d FORCE INDEX (idx_delivery_id) ON d.delivery = j.dl
       LEFT JOIN event_published p FORCE INDEX (PRIMARY) ON d.grp = '' AND p.event_id = d.event_id AND ${UNSETTLED}
     SET d.outcome = j.o, d.last_error = IF(j.k = 'release', COALESCE(j.e, d.last_error), j.e),
       d.available_at = IF(j.k = 'release', j.a, d.available_at), d.attempts = GREATEST(0, CAST(d.attempts AS SIGNED) - j.u),
       d.owner = IF(j.k = 'release', NULL, d.owner), d.deadline = NULL, d.delivery = IF(j.k = 'release', NULL, d.delivery), d.updated = UTC_TIMESTAMP(3), d.settled_at = ?,
       p.success = IF(j.o = 'success', UTC_TIMESTAMP(), p.success), p.failed = IF(j.o IN ('failed', 'dead'), UTC_TIMESTAMP(), p.failed),
       p.consumed_spoke = IF(j.k = 'release', NULL, p.consumed_spoke), p.consumer = IF(j.k = 'release', NULL, p.consumer)
     WHERE d.outcome IS NULL`,
    [JSON.stringify(table), settledAt],
  );
}

/** The outcome an action writes, or undefined for a release (which clears the delivery id: nothing to find it by later). */
const outcomeOf = (action: LedgerAction): string | undefined => (action.kind === 'dead' ? 'dead' : action.kind === 'outcome' ? action.outcome : undefined);

/**
 * Of `actions` whose deliveries are not open, those whose very outcome the store already holds under their delivery id
 * (an outcome keeps the id), by delivery: a settle sent again because its first COMMIT's answer was lost (the
 * connection killed or cut after the server committed). They are answered as recorded, once, instead of as not
 * current: the client was told E_EVENTFLOW_UNKNOWN_DELIVERY, and the metrics never counted what the store holds. An
 * outcome of that id that differs (the lease ran out here and the event was dead-lettered) is not this settle's.
 */
export async function recordedAlready<R extends { delivery: string }>(conn: PoolConnection, actions: readonly LedgerAction[], columns: string): Promise<Map<string, R>> {
  const settles = actions.filter((action) => outcomeOf(action) !== undefined);
  if (settles.length === 0) return new Map();
  const rows = await select<R & { outcome: string }>(
    conn,
    `SELECT ${columns}, d.outcome FROM ${ID_TABLE} STRAIGHT_JOIN eventflow_delivery d FORCE INDEX (idx_delivery_id) ON d.delivery = j.id WHERE d.outcome IS NOT NULL`,
    [JSON.stringify(settles.map((action) => action.delivery))],
  );
  const found = new Map(rows.map((row) => [row.delivery, row]));
  const recorded = new Map<string, R>();
  for (const action of settles) {
    const row = found.get(action.delivery);
    if (row !== undefined && row.outcome === outcomeOf(action) && !recorded.has(action.delivery)) recorded.set(action.delivery, row);
  }
  return recorded;
}
