/**
 * The hub's own statements on v4's tables (eventflow-v4.md §3.5, §3.6, §2.6): its `hub` row, peers,
 * `log` rows, and the lease sweep over `event_published`. Event routing and scheduling go through
 * MysqlStore (claimForRouting, markOrphan, claimDueScheduled, settleScheduled). Every time written
 * here is UTC_TIMESTAMP(), as v4's state transitions.
 */
import type { Pool, ResultSetHeader, RowDataPacket } from 'mysql2/promise';

export interface HubRow {
  id: string;
  external_ip: string;
  external_port: number;
  internal_ip: string;
  internal_port: number;
}

/** Inserts this hub's row, online (quit NULL). The timestamp is written as UTC (v4 relies on a UTC server). */
export async function persistHub(pool: Pool, hub: HubRow): Promise<void> {
  await pool.query(
    'INSERT INTO hub (id, timestamp, external_ip, external_port, internal_ip, internal_port) VALUES (?, UTC_TIMESTAMP(), ?, ?, ?, ?)',
    [hub.id, hub.external_ip, hub.external_port, hub.internal_ip, hub.internal_port],
  );
}

/** v4's readOnlineHubs: every row with quit NULL, in registration order. */
export async function readOnlineHubs(pool: Pool): Promise<HubRow[]> {
  const [rows] = await pool.query<RowDataPacket[]>(
    'SELECT id, external_ip, external_port, internal_ip, internal_port FROM hub WHERE quit IS NULL ORDER BY timestamp, id',
  );
  return rows.map((row) => ({
    id: String(row.id),
    external_ip: String(row.external_ip),
    external_port: Number(row.external_port),
    internal_ip: String(row.internal_ip),
    internal_port: Number(row.internal_port),
  }));
}

/** v4's updateHubToQuit: true the first time. */
export async function updateHubToQuit(pool: Pool, id: string): Promise<boolean> {
  const [result] = await pool.query<ResultSetHeader>('UPDATE hub SET quit = UTC_TIMESTAMP() WHERE id = ? AND quit IS NULL', [id]);
  return result.affectedRows > 0;
}

/**
 * Clears quit on a running hub's own row (a peer that could not reach it marked it, §11 C18); true if
 * it was set. v4 only noticed this at loop restart, and then destroyed itself if it had no clients.
 */
export async function restoreHubOnline(pool: Pool, id: string): Promise<boolean> {
  const [result] = await pool.query<ResultSetHeader>('UPDATE hub SET quit = NULL WHERE id = ? AND quit IS NOT NULL', [id]);
  return result.affectedRows > 0;
}

/** Keeps log messages ASCII, without control characters, and short. */
export function asciiText(value: unknown, max = 200): string {
  const text = String(value).replace(/[^\x20-\x7e]/g, '?');
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

/**
 * The SERDE encoding (§5.1) of a logged error: `{"$type":"Error","$value":{name, …own properties}}`,
 * recursively, with Dates as `{"$type":"Date",…}`. Depth-limited (v4 has no cycle detection) and
 * BigInt-safe.
 */
export function serdeEncode(value: unknown, depth = 0): unknown {
  if (depth > 6) return null;
  if (value instanceof Date) return { $type: 'Date', $value: Number.isNaN(value.getTime()) ? null : value.toISOString() };
  if (value instanceof Error) {
    const payload: Record<string, unknown> = { name: value.name };
    for (const key of Object.getOwnPropertyNames(value)) payload[key] = serdeEncode((value as unknown as Record<string, unknown>)[key], depth + 1);
    return { $type: 'Error', $value: payload };
  }
  if (Array.isArray(value)) return value.map((item) => serdeEncode(item, depth + 1));
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'function' || typeof value === 'symbol') return undefined;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, serdeEncode(item, depth + 1)]));
  }
  return value;
}

/** v4's persistLog: agent = the hub ID, `error` = `{}` or the SERDE-encoded error. */
export async function persistLog(pool: Pool, agent: string, message: string, error?: unknown): Promise<void> {
  const encoded = error === undefined ? '{}' : JSON.stringify(serdeEncode(error) ?? {});
  await pool.query('INSERT INTO log (timestamp, agent, message, error) VALUES (UTC_TIMESTAMP(3), ?, ?, ?)', [agent, asciiText(message, 2000), encoded]);
}

/** A routed event whose claim ran out of lease; the `*At` strings are the columns' exact values, for the guard. */
export interface StuckClaim {
  eventId: string;
  /** The hub whose routing claim it is: this one, or one that quit (its claims are nobody's to redeliver else). */
  hub: string;
  domain: string;
  name: string;
  pid: string;
  hubAt: string;
  spokeAt: string | null;
  consumer: string | null;
}

const TEXT = "'%Y-%m-%d %H:%i:%s'";

const DB_NOW_MS = 'ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000)';

/**
 * Gateways hold the event's default-group row (eventflow_delivery; times in ms by the database's clock, as
 * gateways' lease clocks go): under a lease in force, or released until its retry time (a consumer's retry
 * policy). A gateway writes v4's claim once, at the claim, and keeps its lease by its own extends, so the
 * claim's age says nothing of it; a release clears v4's claim, and a redelivery then ran the job on a v4
 * spoke before its retry delay.
 */
const GATEWAY_HELD = `d.outcome IS NULL AND ((d.owner IS NOT NULL AND d.deadline > ${DB_NOW_MS}) OR d.available_at > ${DB_NOW_MS})`;
const NO_GATEWAY_LEASE = `NOT EXISTS (SELECT 1 FROM eventflow_delivery d WHERE d.event_id = p.event_id AND d.gname = '' AND d.grp = '' AND ${GATEWAY_HELD})`;

/** Whether gateways' delivery ledger is in this database (they create it; a mesh of v4 spokes only has none). */
export async function hasGatewayLedger(pool: Pool): Promise<boolean> {
  const [rows] = await pool.query<RowDataPacket[]>(
    "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'eventflow_delivery' LIMIT 1",
  );
  return rows.length > 0;
}

/**
 * One page of events routed by `hub`, or by a hub that quit (killed hubs are marked quit by the next hub
 * to start, §6.4 A; a restarted hub has a new id, so nobody else would ever take their claims back),
 * without success, failed or orphan whose consumer claim
 * (consumed_spoke) — or, when no consumer claimed, routing claim (consumed_hub) — is older than
 * `leaseSeconds`. Only claims made within `horizonSeconds` before that are looked at: the range on
 * idx_consumed_hub keeps the query's cost proportional to recent traffic, and an event the sweeper
 * stopped redelivering leaves it. Keyset-paged by (consumed_hub, event_id).
 */
export async function findStuckClaims(
  pool: Pool,
  hub: string,
  leaseSeconds: number,
  horizonSeconds: number,
  limit: number,
  after?: { hubAt: string; eventId: string },
  gatewayLedger = false,
): Promise<StuckClaim[]> {
  const page = after ? 'AND (p.consumed_hub, p.event_id) > (?, ?)' : '';
  const leased = gatewayLedger ? `AND ${NO_GATEWAY_LEASE}` : '';
  const sql = `SELECT p.event_id AS eventId, p.hub, e.domain, e.name, e.pid,
      DATE_FORMAT(p.consumed_hub, ${TEXT}) AS hubAt, DATE_FORMAT(p.consumed_spoke, ${TEXT}) AS spokeAt, p.consumer
    FROM event_published p JOIN event e ON e.id = p.event_id
    WHERE p.consumed_hub >= UTC_TIMESTAMP() - INTERVAL ? SECOND AND p.consumed_hub < UTC_TIMESTAMP() - INTERVAL ? SECOND
      AND (p.hub = ? OR p.hub IN (SELECT q.id FROM hub q WHERE q.quit IS NOT NULL)) AND p.success IS NULL AND p.failed IS NULL AND p.orphan IS NULL
      AND (p.consumed_spoke IS NULL OR p.consumed_spoke < UTC_TIMESTAMP() - INTERVAL ? SECOND)
      ${leased} ${page}
    ORDER BY p.consumed_hub, p.event_id
    LIMIT ?`;
  const params: Array<string | number> = [leaseSeconds + horizonSeconds, leaseSeconds, hub, leaseSeconds];
  if (after) params.push(after.hubAt, after.eventId);
  params.push(limit);
  const [rows] = await pool.query<RowDataPacket[]>(sql, params);
  return rows.map((row) => ({
    eventId: String(row.eventId),
    hub: String(row.hub),
    domain: String(row.domain),
    name: String(row.name),
    pid: String(row.pid),
    hubAt: String(row.hubAt),
    spokeAt: row.spokeAt === null ? null : String(row.spokeAt),
    consumer: row.consumer === null ? null : String(row.consumer),
  }));
}

/**
 * Takes the stuck claim back, only if nothing changed since it was read (no new claim, no outcome):
 * the consumer claim is cleared (consumed_spoke, consumer → NULL) and the routing claim renewed
 * (consumed_hub → now, hub → this hub, which a quit hub's claim thus moves to), as if this hub had just won the claim of a fresh
 * publication. True when this sweeper won the reset.
 *
 * With gateways' ledger, a lease in force keeps the claim (a gateway may have claimed or extended since
 * the read), and a lease that ran out (its gateway died) is ended with the claim: a gateway's claim takes
 * a default-group row under a dead lease whatever v4's columns say, so left in place it took the event
 * back from a v4 spoke that claimed it after this redelivery, and the job ran on both.
 */
export async function resetStuckClaim(pool: Pool, hub: string, claim: StuckClaim, gatewayLedger = false): Promise<boolean> {
  const conn = await pool.getConnection();
  try {
    await conn.beginTransaction();
    let deadLease = false;
    if (gatewayLedger) {
      // The lease row first, locked, then v4's row: the gateways' order (claims, settles), so no deadlock with them.
      const [rows] = await conn.query<RowDataPacket[]>(
        `SELECT ${GATEWAY_HELD} AS held, d.owner IS NOT NULL AND d.deadline IS NOT NULL AS leased FROM eventflow_delivery d
         WHERE d.event_id = ? AND d.gname = '' AND d.grp = '' AND d.outcome IS NULL FOR UPDATE`,
        [claim.eventId],
      );
      if (rows.some((row) => Number(row.held) === 1)) {
        await conn.rollback();
        return false;
      }
      deadLease = rows.some((row) => Number(row.leased) === 1);
    }
    const [result] = await conn.query<ResultSetHeader>(
      `UPDATE event_published SET hub = ?, consumed_hub = UTC_TIMESTAMP(), consumed_spoke = NULL, consumer = NULL
       WHERE event_id = ? AND hub = ? AND consumed_hub = ? AND consumed_spoke <=> ? AND consumer <=> ?
         AND success IS NULL AND failed IS NULL AND orphan IS NULL`,
      [hub, claim.eventId, claim.hub, claim.hubAt, claim.spokeAt, claim.consumer],
    );
    const won = result.affectedRows === 1;
    if (won && deadLease) {
      // As a gateway's release of it would (ledger-settle.ts): free again, its attempt counted.
      await conn.query(
        `UPDATE eventflow_delivery SET owner = NULL, deadline = NULL, delivery = NULL, available_at = NULL, updated = UTC_TIMESTAMP(3)
         WHERE event_id = ? AND gname = '' AND grp = '' AND outcome IS NULL`,
        [claim.eventId],
      );
    }
    await conn.commit();
    return won;
  } catch (error) {
    await conn.rollback().catch(() => undefined);
    throw error;
  } finally {
    conn.release();
  }
}
