/**
 * The settle routine (MariaDB): a few settles that carry nothing of their own (a `success`, a `failed`
 * without an error, a plain hand-back: ledger-settle.ts `plainKind`) written in one CALL that commits,
 * where the statements take four round trips (the locking read, the ledger's UPDATE, v4's UPDATE,
 * COMMIT). At a steady 500 jobs/s settles come one to three at a time, and each round trip is
 * ~150–250 µs of the database's and the gateway's time on this machine kind (bench/README.md › work,
 * nineteenth session). A batch of more than SETTLE_ROUTINE_MAX goes through the statements, whose
 * cost does not grow with the batch, where the routine's loop does.
 *
 * Per delivery, in the batch's order: the row read with `FOR UPDATE SKIP LOCKED` (as the statements'
 * read: a row another transaction holds is passed by, and written after in a transaction that waits
 * for it, MysqlLedger.apply), then, when it is open, the same UPDATEs as the statements (their text
 * shared through ledger-settle.ts `PLAIN`). The rows it locked come back as one JSON array. What is
 * not open (recorded already, or held) is read after, as the statements read it.
 *
 * Made and proven at the ledger's open as the append routine is (append-routine.ts: the version in its
 * name, `SQL SECURITY INVOKER`); without it, or once a CALL finds it gone, the statements.
 */
import type { Pool, RowDataPacket } from 'mysql2/promise';
import { DEFAULT_GROUP, UNSETTLED, type LedgerAction } from '../ledger.js';
import { ATTEMPTS, driverCode } from './db.js';
import { ROUTINE_GONE } from './append-routine.js';
import { answers, firstPerDelivery, notCurrent, PLAIN, plainKind, type HELD, type Plain, type RefRow } from './ledger-settle.js';

export const SETTLE_ROUTINE = 'eventflow_settle_v1';
/** Settles in one CALL at most: the routine's work grows with the batch, the statements' does not. */
export const SETTLE_ROUTINE_MAX = 16;

const ASCII = 'CHARACTER SET ascii COLLATE ascii_bin';
const KINDS = Object.keys(PLAIN) as Plain[];
const branch = (kind: Plain): string => `k = '${kind}' THEN
        UPDATE eventflow_delivery FORCE INDEX (idx_delivery_id) SET ${PLAIN[kind].row}, deadline = NULL, updated = UTC_TIMESTAMP(3), settled_at = settled WHERE delivery = d AND outcome IS NULL;
        IF g = '${DEFAULT_GROUP}' THEN UPDATE event_published p FORCE INDEX (PRIMARY) SET ${PLAIN[kind].v4} WHERE p.event_id = e AND ${UNSETTLED}; END IF;`;

const DDL = `CREATE PROCEDURE IF NOT EXISTS ${SETTLE_ROUTINE}(IN ids LONGTEXT CHARACTER SET utf8mb4, IN kinds LONGTEXT CHARACTER SET utf8mb4, IN settled BIGINT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE i INT DEFAULT 0;
  DECLARE n INT DEFAULT JSON_LENGTH(ids);
  DECLARE d VARCHAR(96) ${ASCII};
  DECLARE k VARCHAR(16) ${ASCII};
  DECLARE e VARCHAR(64) ${ASCII};
  DECLARE g VARCHAR(64) ${ASCII};
  DECLARE r LONGTEXT CHARACTER SET utf8mb4;
  DECLARE locked LONGTEXT CHARACTER SET utf8mb4 DEFAULT '[]';
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET r = NULL;
  WHILE i < n DO
    SET d = JSON_VALUE(ids, CONCAT('$[', i, ']')), k = JSON_VALUE(kinds, CONCAT('$[', i, ']')), r = NULL;
    SELECT JSON_ARRAY(event_id, domain, gname, grp, name, attempts, delivery), event_id, grp INTO r, e, g
      FROM eventflow_delivery FORCE INDEX (idx_delivery_id) WHERE delivery = d AND outcome IS NULL FOR UPDATE SKIP LOCKED;
    IF r IS NOT NULL THEN
      IF ${KINDS.map(branch).join('\n      ELSEIF ')}
      END IF;
      SET locked = JSON_ARRAY_APPEND(locked, '$', JSON_EXTRACT(r, '$'));
    END IF;
    SET i = i + 1;
  END WHILE;
  SELECT locked;
  COMMIT;
END`;

const CALL = `CALL ${SETTLE_ROUTINE}(?, ?, ?)`;

type LockedRow = [event_id: string, domain: string, gname: string, grp: string, name: string | null, attempts: number, delivery: string];

/** Whether the settles use the routine: proven at the ledger's open, made and proven again when a CALL finds it gone. */
export class SettleRoutine {
  usable = false;
  #pool: Pool | undefined;

  async install(pool: Pool): Promise<void> {
    this.#pool = pool;
    await pool.query(DDL).catch(() => undefined);
    this.usable = await pool.execute(CALL, ['[]', '[]', 0]).then(
      () => this.#pool === pool,
      () => false,
    );
  }

  /** A CALL found it gone (append-routine.ts ROUTINE_GONE): statements until it is proven again. */
  gone(): void {
    const pool = this.#pool;
    if (!this.usable || pool === undefined) return;
    this.usable = false;
    void this.install(pool);
  }

  close(): void {
    this.#pool = undefined;
    this.usable = false;
  }

  /** Whether `actions` go through the routine. */
  takes(actions: readonly LedgerAction[]): boolean {
    return this.usable && actions.length <= SETTLE_ROUTINE_MAX && actions.every((action) => plainKind(action) !== undefined);
  }

  /**
   * applyActions' answer (ledger-settle.ts) for `actions`, written and committed in one CALL on a `writer`
   * connection (autocommit off: the routine's statements are one transaction); undefined when the routine is gone.
   */
  async apply(writer: Pool, actions: readonly LedgerAction[]): Promise<Array<RefRow | undefined | typeof HELD> | undefined> {
    const first = firstPerDelivery(actions);
    const acting = [...first.values()];
    const params = [JSON.stringify(acting.map((action) => action.delivery)), JSON.stringify(acting.map(plainKind)), Date.now()];
    for (let attempt = 1; ; attempt += 1) {
      const conn = await writer.getConnection();
      try {
        const [sets] = await conn.execute<RowDataPacket[][]>(CALL, params);
        const locked = JSON.parse(String(sets[0]?.[0]?.locked ?? '[]')) as LockedRow[];
        const current = new Map(locked.map(([event_id, domain, gname, grp, name, attempts, delivery]) => [delivery, { event_id, domain, gname, grp, name, attempts, delivery }]));
        // Committed: what was not open is read after, in a read-only transaction of its own.
        const missing = current.size === first.size ? { again: new Map<string, RefRow>(), held: new Set<string>() } : await notCurrent(conn, first, current);
        if (current.size !== first.size) await conn.query('ROLLBACK');
        conn.release();
        return answers(actions, first, current, missing);
      } catch (error) {
        await conn.query('ROLLBACK').then(() => conn.release(), () => conn.destroy());
        const code = driverCode(error);
        if (code !== undefined && ROUTINE_GONE.includes(code)) {
          this.gone();
          return undefined;
        }
        if (code !== 'ER_LOCK_DEADLOCK' || attempt >= ATTEMPTS) throw error;
      }
    }
  }
}
