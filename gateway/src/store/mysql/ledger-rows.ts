/** What the MySQL ledger's parts share (ledger.ts, ledger-operator.ts, append-leases.ts): its group rows and records, the id list of its joins, writing rows. */
import type { Pool, PoolConnection } from 'mysql2/promise';
import { DEFAULT_GROUP, ledgerColumns, UNSETTLED, type ClaimResult, type GroupKey, type GroupRecord } from '../ledger.js';
import { FIRED } from './rows.js';
import { affected, select, type Params } from './statements.js';

/** `ordered` is the group's own option; `claim_ordered` and `across_names` what its claims go by (ordered-claim.ts claimOrderColumns), where read. */
export type GroupRow = { domain: string; name: string; grp: string; created_position: number | string; created_at: Date; ordered: number; materialized: number | string | null; claim_ordered?: number | string; across_names?: number | string };

/** A BIGINT as the driver returns it (a number or a string), or undefined for NULL. */
export const num = (value: string | number | null | undefined): number | undefined => (value === null || value === undefined ? undefined : Number(value));

export const toRecord = (row: GroupRow): GroupRecord => ({
  domain: row.domain,
  name: row.name,
  group: row.grp,
  createdPosition: Number(row.created_position),
  createdAt: row.created_at.toISOString(),
  // As its claims go: an ordered default group sharing its ledger orders it too.
  ordered: Number(row.claim_ordered ?? row.ordered) === 1,
});

/** A JSON_TABLE of strings (ids) for joins: one prepared statement whatever the list's length. */
export const ID_TABLE = `JSON_TABLE(?, '$[*]' COLUMNS (id VARCHAR(96) CHARACTER SET ascii COLLATE ascii_bin PATH '$')) j`;
/** The same, as `h`: the leases a claim leaves alone though they ran out, their reports still to be written here (ClaimRequest.held). */
export const HELD_TABLE = ID_TABLE.replace(/ j$/, ' h');

/** How long a gateway goes by the group row it read (its `ordered`, the watermark in the store). */
export const GROUP_READ_MS = 1_000;

/** A group as the claims of this gateway know it. */
export interface CachedGroup {
  created: number;
  /** As its claims go (claimOrderColumns); `across`: a default group's pid order spans event names. */
  ordered: boolean;
  across: boolean;
  /** Every event of the group's filter up to this position has its row. */
  materialized: number;
  /** The store's head when the row was read. */
  head: number;
  readAt: number;
  /** When the watermark was last written to the store. */
  persistedAt: number;
  /** The watermark the group's row holds, as last read or written. */
  stored: number;
}

export const groupId = (key: GroupKey): string => `${key.domain}\u0000${key.name}\u0000${key.group}`;

/**
 * The group's rows for its events positioned in (`from`, `to`], those without one. Rows written already
 * are left out by a plain read (READ COMMITTED: no lock), not by INSERT IGNORE, whose duplicate check
 * locks the row it meets until the commit: a settle of that row (or an append's lease of it being
 * written) would wait for this transaction. In position order, so that two writers of one range
 * meet in the same order (one waits for the other, neither for both). `bound`: an append's, whose
 * wait for another client's lock is bounded (append-leases.ts).
 */
export function materializeRows(conn: PoolConnection, key: GroupKey, from: number, to: number, bound: (sql: string) => string = (sql) => sql): Promise<number> {
  const { gname, grp } = ledgerColumns(key);
  const name = key.name === '*' ? '' : 'AND e.name = ?';
  const settled = key.group === DEFAULT_GROUP ? `AND ${UNSETTLED}` : '';
  return affected(
    conn,
    bound(`INSERT IGNORE INTO eventflow_delivery (event_id, domain, gname, grp, position, pid, name, attempts, updated)
     SELECT e.id, e.domain, ?, ?, x.position, e.pid, e.name, 0, UTC_TIMESTAMP(3)
     FROM eventflow_position x JOIN event e ON e.id = x.event_id JOIN event_published p ON p.event_id = e.id
     WHERE x.position > ? AND x.position <= ? AND e.domain = ? ${name} AND ${FIRED} ${settled}
       AND NOT EXISTS (SELECT 1 FROM eventflow_delivery w WHERE w.event_id = e.id AND w.gname = ? AND w.grp = ?)
     ORDER BY x.position`),
    [gname, grp, from, to, key.domain, ...(key.name === '*' ? [] : [key.name]), gname, grp],
  );
}

/**
 * Records in the group's row how far a claim that committed wrote its rows (`group.materialized`), in a statement of
 * its own: written in the claim's transaction, it waited there for a lock another client held on the group's row (an
 * operator's SELECT … FOR UPDATE), and with it the claim and every row the claim had written and locked, so the
 * group's work stopped on every gateway until that lock ended. Waits `bound` at most (MariaDB, append-leases.ts), and
 * may fail: the next claim writes the same rows again, ignored, and records it. Only for the group the claim read (its
 * start): one recorded again meanwhile starts later, and rows before its start are not its own.
 */
export async function persistWatermark(pool: Pool, key: GroupKey, group: CachedGroup, bound: (sql: string) => string): Promise<void> {
  const sql = bound(`UPDATE eventflow_group SET materialized = ? WHERE domain = ? AND name = ? AND grp = ? AND created_position = ? AND COALESCE(materialized, 0) < ?`);
  const to = group.materialized;
  await affected(pool, sql, [to, key.domain, key.name, key.group, group.created, to]).then(
    () => void (group.stored = Math.max(group.stored, to)),
    () => undefined,
  );
}

/** The rows of the group's ledger (`d`); the default group of a name takes only that name's rows of the shared ledger. */
export function rowScope(key: GroupKey): { sql: string; params: Params } {
  const { gname, grp } = ledgerColumns(key);
  const named = key.group === DEFAULT_GROUP && key.name !== '*';
  return { sql: `d.domain = ? AND d.gname = ? AND d.grp = ? ${named ? 'AND d.name = ?' : ''}`, params: [key.domain, gname, grp, ...(named ? [key.name] : [])] };
}

/**
 * What a claim whose COMMIT failed holds in the store (the answer lost, the connection killed or cut, it may have
 * committed): the leases it took, found by their delivery ids, and its dead letters, by their outcome. Handed out
 * at once: left, its events waited for their leases to run out (the lease time, and an attempt lost for each, so an
 * event on its last attempt became a dead letter never delivered).
 */
export async function heldAfterLostCommit(pool: Pool, key: GroupKey, result: ClaimResult): Promise<ClaimResult> {
  const ids = [...result.claimed, ...result.dead].map(({ event }) => event.id);
  if (ids.length === 0) return result;
  const { gname, grp } = ledgerColumns(key);
  const rows = await select<{ event_id: string; delivery: string | null; outcome: string | null }>(
    pool,
    `SELECT d.event_id, d.delivery, d.outcome FROM ${ID_TABLE} STRAIGHT_JOIN eventflow_delivery d FORCE INDEX (PRIMARY) ON d.event_id = j.id WHERE d.gname = ? AND d.grp = ?`,
    [JSON.stringify(ids), gname, grp],
  );
  const held = new Map(rows.map((row) => [row.event_id, row]));
  return {
    ...result,
    claimed: result.claimed.filter(({ event, delivery }) => held.get(event.id)?.delivery === delivery && held.get(event.id)?.outcome === null),
    dead: result.dead.filter(({ event }) => held.get(event.id)?.outcome === 'dead'),
  };
}
