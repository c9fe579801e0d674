/**
 * v4's claim columns of `event_published` that routers and the default group's consumers take (MysqlStore): the
 * routing claim (consumed_hub) and the consumer claim (consumed_spoke) taken back under a gateway's lease.
 */
import type { PoolConnection } from 'mysql2/promise';
import { affected, select } from './statements.js';

/** v4's guarded routing claim: the first router to set consumed_hub wins. */
export const CLAIM_FOR_ROUTING = 'UPDATE event_published SET consumed_hub = UTC_TIMESTAMP(), hub = ? WHERE event_id = ? AND consumed_hub IS NULL';

/**
 * event_published.hub references hub(id): a router's id needs a hub row to claim. A v4 hub inserts its own at start; for
 * any other id (the gateway routing in process) the store inserts one already quit, because v4 spokes connect to, and
 * v4 hubs announce themselves to, every hub whose quit is NULL. An existing row, e.g. a hub's own, is left as it is.
 */
export const PLACEHOLDER_HUB = `INSERT INTO hub (id, timestamp, external_ip, external_port, internal_ip, internal_port, quit)
  VALUES (?, UTC_TIMESTAMP(), '127.0.0.1', 0, '127.0.0.1', 0, UTC_TIMESTAMP()) ON DUPLICATE KEY UPDATE id = id`;

const UNSETTLED = 'success IS NULL AND failed IS NULL';

/**
 * The routing claims of `eventIds` this router wins, in the caller's transaction. The locking read decides them (it
 * waits for, then sees, a concurrent claimer's commit); in id order, so that two routers claiming overlapping sets
 * lock in the same order.
 */
export async function claimAllWon(conn: PoolConnection, eventIds: readonly string[], hub: string): Promise<Set<string>> {
  const sql = 'SELECT event_id AS id FROM event_published WHERE event_id IN (?) AND consumed_hub IS NULL ORDER BY event_id FOR UPDATE';
  const won = (await select<{ id: string }>(conn, sql, [[...eventIds]])).map((row) => row.id);
  if (won.length > 0) await affected(conn, 'UPDATE event_published SET consumed_hub = UTC_TIMESTAMP(), hub = ? WHERE event_id IN (?)', [hub, won]);
  return new Set(won);
}

/**
 * v4's consumer claim taken back for `consumer` while `lease.owner` holds the default group's lease, in the caller's
 * transaction. The lease row first, locked, then v4's row: the ledger's order (claim, settle, release), so no deadlock
 * with them, and a release committing meanwhile (its lease ended, v4's claim cleared) is seen, whatever the isolation.
 */
export async function retakeUnderLease(conn: PoolConnection, eventId: string, consumer: string, lease: { owner: string; now: number }): Promise<boolean> {
  const held = await select<{ one: number }>(
    conn,
    `SELECT 1 AS one FROM eventflow_delivery WHERE event_id = ? AND gname = '' AND grp = '' AND owner = ? AND outcome IS NULL AND deadline > ? FOR UPDATE`,
    [eventId, lease.owner, lease.now],
  );
  if (held.length === 0) return false;
  const sql = `UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = ? WHERE event_id = ? AND consumed_spoke IS NULL AND ${UNSETTLED}`;
  return (await affected(conn, sql, [consumer, eventId])) === 1;
}
