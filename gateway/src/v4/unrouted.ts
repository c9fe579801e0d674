/**
 * This gateway's publishes that no hub has routed (v4's routing claim `consumed_hub` still free): a
 * `publish` record written into a hub link that broke before the hub read it. v4 spokes learn of an event
 * only from a hub's record, so such a job reached none of them, for good; our own gateways read the store.
 */
import type { Pool, RowDataPacket } from 'mysql2/promise';

export interface UnroutedEvent {
  domain: string;
  id: string;
  name: string;
  pid: string;
}

/**
 * At most `limit` events `publisher` stored in the last `seconds` without a routing claim, oldest first;
 * scheduled events not yet fired are not due to anyone. A range of `idx_published`.
 */
export async function readUnrouted(pool: Pool, publisher: string, seconds: number, limit: number): Promise<UnroutedEvent[]> {
  const [rows] = await pool.query<RowDataPacket[]>(
    `SELECT e.domain, e.id, e.name, e.pid FROM event_published p JOIN event e ON e.id = p.event_id
     WHERE p.published >= UTC_TIMESTAMP() - INTERVAL ? SECOND AND p.publisher = ? AND p.consumed_hub IS NULL
       AND NOT EXISTS (SELECT 1 FROM event_scheduled s WHERE s.event_id = p.event_id AND s.executed IS NULL)
     ORDER BY p.published LIMIT ?`,
    [seconds, publisher, limit],
  );
  return rows.map((row) => ({ domain: String(row.domain), id: String(row.id), name: String(row.name), pid: String(row.pid) }));
}
