/**
 * The append routine (MariaDB): a stored procedure that runs a batch's INSERTs (append-sql.ts), sets
 * the sequence when the batch took fewer positions than it reserved, and commits, in one CALL: a
 * batch costs two round trips (the sequence, the CALL) where it cost one per table (six for a job
 * leased at append) and then three (v1 left the COMMIT to a statement of its own): on MariaDB each is
 * ~150–250 µs of a publish's, a request()'s or a steady job's way (bench/README.md › work, ninth
 * session of 12-06, nineteenth of 12-07). Values still go only as parameters of prepared statements
 * (db.ts: multipleStatements off).
 *
 * For a batch of more than a few appends, or while appends wait for the next batch, the CALL leaves
 * the COMMIT to a statement of its own, as v1 did (appends.ts COMMIT_IN_CALL_MAX): the next batch starts as that COMMIT is sent, its first round trip overlapping this one's log
 * flush (group-commit.ts); one that starts only once a committing CALL has returned waits for the
 * flush too (MariaDB publish throughput, one pipelined client, measured lower).
 *
 * A CALL that fails before its COMMIT leaves the transaction open (the failed statement undone
 * alone), as a statement does: the caller rolls back and runs the batch again as before. One whose
 * connection is lost or whose statement is interrupted may have committed (appends.ts
 * `maybeCommitted`): its appends are answered as of unknown fate.
 *
 * Made at init with CREATE PROCEDURE IF NOT EXISTS, under a name that carries its version (a later
 * body is a new name, so gateways of two versions on one database each call their own), then called
 * once with nothing to insert to prove this user may run it. A user without CREATE ROUTINE or
 * EXECUTE, a server that refuses it otherwise, or MySQL (no INSERT … RETURNING), appends with one
 * statement per table as before. The procedure runs with the sql_mode of the session that made it,
 * the store's (statements.ts), and with the caller's rights (SQL SECURITY INVOKER).
 */
import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise';
import { appendInserts } from './append-sql.js';

export const APPEND_ROUTINE = 'eventflow_append_v2';

/**
 * What a CALL meets when the routine went away while the store runs: dropped by an operator (or a
 * database restored by mysqldump, which leaves routines out unless told), EXECUTE revoked, or another
 * body under its name. Nothing was written (the CALL is the batch's first INSERT): the batch runs
 * again with statements, and the store makes the routine again (appends.ts, mysql.ts). Before this
 * every publish failed so until the gateway restarted, with /readyz ready.
 */
export const ROUTINE_GONE: readonly string[] = ['ER_SP_DOES_NOT_EXIST', 'ER_PROCACCESS_DENIED_ERROR', 'ER_SP_WRONG_NO_OF_ARGS'];

const PARAMS = ['ev', 'pos', 'pub', 'sch', 'due', 'lse'] as const;

/** The batch's rows, one JSON array per table; `ev` has at least one row. */
export interface RoutineRows {
  ev: string;
  pos: string;
  pub: string;
  sch: string;
  due: string;
  lse: string;
  /** The sequence's value to set before the commit, when the batch took fewer (or more) positions than it reserved. */
  seq: number | null;
  /** Whether the CALL commits: not while appends wait for the next batch, which then starts as a COMMIT of its own is sent (appends.ts). */
  commit: boolean;
}

const optional = (param: (typeof PARAMS)[number], insert: string): string => `IF ${param} <> '[]' THEN ${insert}; END IF;`;

const DDL = `CREATE PROCEDURE IF NOT EXISTS ${APPEND_ROUTINE}(${PARAMS.map((param) => `IN ${param} LONGTEXT CHARACTER SET utf8mb4`).join(', ')}, IN seq BIGINT, IN done TINYINT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  ${appendInserts('ev').eventClocked};
  ${optional('pos', appendInserts('pos').position)}
  ${optional('pub', appendInserts('pub').published)}
  ${optional('sch', appendInserts('sch').scheduled)}
  ${optional('due', appendInserts('due').due)}
  ${optional('lse', appendInserts('lse').leases)}
  IF seq IS NOT NULL THEN UPDATE eventflow_sequence SET value = seq WHERE name = 'event'; END IF;
  IF done THEN COMMIT; END IF;
END`;

const CALL = `CALL ${APPEND_ROUTINE}(${PARAMS.map(() => '?').join(', ')}, ?, ?)`;

/**
 * Makes the routine where missing; whether this store's user can run it. Never fails the store's
 * open: whatever refuses it (no CREATE ROUTINE or EXECUTE, a read-only server, a binary log that
 * wants SUPER for routines) leaves the appends as they were without it.
 */
export async function installAppendRoutine(pool: Pool): Promise<boolean> {
  // Made by another user, perhaps, if refused here: the CALL says whether this one may run it.
  await pool.query(DDL).catch(() => undefined);
  try {
    await pool.execute(CALL, ['[]', '[]', '[]', '[]', '[]', '[]', null, 1]);
    return true;
  } catch {
    return false;
  }
}

/** Whether the appends use the routine: proven at init, and made and proven again when a CALL finds it gone (ROUTINE_GONE), as a restart would. */
export class AppendRoutine {
  usable = false;
  #pool: Pool | undefined;

  async install(pool: Pool): Promise<void> {
    this.close();
    this.#pool = pool;
    this.usable = await installAppendRoutine(pool);
  }

  /** A CALL found it gone: statements from now on, until it is proven again. */
  gone(): void {
    const pool = this.#pool;
    if (!this.usable || pool === undefined) return;
    this.usable = false;
    void installAppendRoutine(pool).then((usable) => (this.usable = usable && this.#pool === pool));
  }

  close(): void {
    this.#pool = undefined;
    this.usable = false;
  }
}

/** The batch's INSERTs (and its COMMIT, with `rows.commit`) in one round trip; the events' stored timestamps by id. `bound`: when it writes ledger rows (append-leases.ts). */
export async function callAppendRoutine(conn: PoolConnection, rows: RoutineRows, bound: (sql: string) => string = (sql) => sql): Promise<Array<{ id: string; timestamp: Date }>> {
  const [sets] = await conn.execute<RowDataPacket[][]>(bound(CALL), [...PARAMS.map((param) => rows[param]), rows.seq, rows.commit ? 1 : 0]);
  return (sets[0] ?? []) as Array<{ id: string; timestamp: Date }>;
}
