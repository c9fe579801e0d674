/**
 * A batch of outcomes (ledger.ts `apply`, the common batch: every action a success or a failure) in
 * two round trips and no transaction of ours: one UPDATE in autocommit, which records each outcome
 * and marks its row with the batch's nonce beside the delivery (`~<nonce>:<delivery>`, never a
 * delivery id, so nothing current matches it), then a read of the rows so marked. On this store a
 * round trip costs more than the rows it carries (ledger-claim.ts), and the locking read and the
 * COMMIT of the general path were two of its four.
 *
 * The read finds every row the UPDATE wrote: a row with an outcome is not claimed again, and only
 * the operator's requeue of a dead letter (not an outcome of this path) reopens one.
 */
import { randomBytes } from 'node:crypto';
import type { Pool } from 'mysql2/promise';
import type { DeliveryRef, LedgerAction } from '../ledger.js';
import { keyOf, UNSETTLED } from '../ledger.js';
import { ATTEMPTS, driverCode } from './db.js';
import { affected, select } from './statements.js';

type Outcome = Extract<LedgerAction, { kind: 'outcome' }>;
type MarkedRow = { event_id: string; domain: string; gname: string; grp: string; name: string | null; attempts: number; delivery: string };

/** Whether every action is an outcome (this path's batch). */
export const outcomesOnly = (actions: readonly LedgerAction[]): actions is readonly Outcome[] => actions.every((action) => action.kind === 'outcome');

/** The same rows and columns as the general path's UPDATE writes for an outcome, the delivery marked instead of cleared. */
const SETTLE = `UPDATE JSON_TABLE(?, '$[*]' COLUMNS (
    dl VARCHAR(96) CHARACTER SET ascii COLLATE ascii_bin PATH '$.d', o VARCHAR(16) PATH '$.o', e LONGTEXT CHARACTER SET utf8mb4 PATH '$.e')) j
    STRAIGHT_JOIN eventflow_delivery d FORCE INDEX (idx_delivery_id) ON d.delivery = j.dl
    LEFT JOIN event_published p FORCE INDEX (PRIMARY) ON d.grp = '' AND p.event_id = d.event_id AND ${UNSETTLED}
  SET d.outcome = j.o, d.last_error = j.e, d.deadline = NULL, d.delivery = CONCAT(?, j.dl), d.updated = UTC_TIMESTAMP(3), d.settled_at = ?,
    p.success = IF(j.o = 'success', UTC_TIMESTAMP(), p.success), p.failed = IF(j.o = 'failed', UTC_TIMESTAMP(), p.failed)
  WHERE d.outcome IS NULL`;

export async function settleOutcomes(pool: Pool, actions: readonly Outcome[]): Promise<Array<DeliveryRef | undefined>> {
  // One action per delivery: the first.
  const first = new Map<string, Outcome>();
  for (const action of actions) if (!first.has(action.delivery)) first.set(action.delivery, action);
  const table = JSON.stringify([...first.values()].map((action) => ({ d: action.delivery, o: action.outcome, ...(action.error === undefined ? {} : { e: action.error }) })));
  const marker = `~${randomBytes(8).toString('hex')}:`;
  // A deadlock victim (a claim locking the same rows) wrote nothing: run again.
  for (let attempt = 1; ; attempt += 1) {
    try {
      await affected(pool, SETTLE, [table, marker, Date.now()]);
      break;
    } catch (error) {
      if (driverCode(error) !== 'ER_LOCK_DEADLOCK' || attempt >= ATTEMPTS) throw error;
    }
  }
  const rows = await select<MarkedRow>(pool, `SELECT event_id, domain, gname, grp, name, attempts, delivery FROM eventflow_delivery WHERE delivery LIKE ?`, [`${marker}%`]);
  const settled = new Map(rows.map((row) => [row.delivery.slice(marker.length), row]));
  return actions.map((action) => {
    const row = first.get(action.delivery) === action ? settled.get(action.delivery) : undefined;
    return row && { key: keyOf(row.domain, row.gname, row.grp, row.name ?? ''), eventId: row.event_id, attempts: Number(row.attempts) };
  });
}
