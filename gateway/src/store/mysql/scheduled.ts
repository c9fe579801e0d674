/**
 * Firing scheduled events on MySQL (store.claimDueScheduled): inside the caller's transaction, each due
 * event is claimed with a guarded update (v4's own update of `executed` is not guarded: exactly one
 * claimer wins each), positioned after the head, and stamped with the time it fired.
 *
 * A firing whose COMMIT fails may have committed all the same (its answer lost: the connection killed
 * or cut): what it fired is read back and handed to the scheduler, which routes it (the router's
 * routing claim keeps an event to one route). Those events were fired in the store and routed by
 * nobody, the next run finding nothing due: subscribers and waits got them only at their domain's
 * next publish, and their scheduled rows stayed unsettled.
 */
import type { Pool, PoolConnection } from 'mysql2/promise';
import type { StoredEvent } from '@eventflow/core';
import { lockSequence } from './schema.js';
import { affected, select } from './statements.js';
import { readAgain, transaction, utcNow } from './db.js';
import { setPosition } from './positions.js';
import { COLUMNS, toStoredEvent, WITH_POSITION, type EventRow } from './rows.js';

// Events scheduled by v4 spokes have no eventflow_schedule row: their due time is v4's column.
const DUE = `SELECT s.event_id AS id FROM event_scheduled s
  LEFT JOIN eventflow_schedule d ON d.event_id = s.event_id LEFT JOIN eventflow_position x ON x.event_id = s.event_id
  WHERE s.executed IS NULL AND COALESCE(d.due, s.scheduled) <= ?
  ORDER BY COALESCE(d.due, s.scheduled), x.position IS NULL, x.position, s.event_id`;
const CLAIM = 'UPDATE event_scheduled SET executed = UTC_TIMESTAMP() WHERE event_id = ? AND executed IS NULL';

/** The events due at `now` that this transaction fired, in their new positions' order. */
export async function fireDue(conn: PoolConnection, now: Date): Promise<StoredEvent[]> {
  const base = await lockSequence(conn);
  const due = await select<{ id: string }>(conn, DUE, [now]);
  if (due.length === 0) return [];
  const firedAt = await utcNow(conn);
  const fired: string[] = [];
  for (const { id } of due) {
    if ((await affected(conn, CLAIM, [id])) !== 1) continue;
    fired.push(id);
    await setPosition(conn, id, base + fired.length);
    await affected(conn, 'UPDATE event SET timestamp = ? WHERE id = ?', [firedAt, id]);
  }
  if (fired.length === 0) return [];
  const rows = await select<EventRow>(conn, `SELECT ${COLUMNS} FROM event e ${WITH_POSITION} WHERE e.id IN (?) ORDER BY x.position`, [fired]);
  return rows.map(toStoredEvent);
}

/** fireDue in a transaction of its own; after a COMMIT that failed, the events it fired that the store holds fired. */
export async function fireScheduled(pool: Pool, now: Date): Promise<StoredEvent[]> {
  let fired: StoredEvent[] | undefined;
  try {
    return await transaction(pool, async (conn) => {
      fired = undefined;
      fired = await fireDue(conn, now);
      return fired;
    });
  } catch (error) {
    // Set: the work was done, and the COMMIT failed.
    const ids = (fired ?? []).map((event) => event.id);
    if (ids.length === 0) throw error;
    const sql = `SELECT ${COLUMNS} FROM event e ${WITH_POSITION} WHERE e.id IN (?) AND x.position IS NOT NULL
      AND EXISTS (SELECT 1 FROM event_scheduled s WHERE s.event_id = e.id AND s.executed IS NOT NULL) ORDER BY x.position`;
    const held = await readAgain(() => select<EventRow>(pool, sql, [ids])).catch(() => Promise.reject(error));
    if (held.length === 0) throw error;
    return held.map(toStoredEvent);
  }
}
