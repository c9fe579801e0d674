/**
 * The binary log's format, checked when the MySQL store opens. The store's appends, claims and settles run at READ
 * COMMITTED (db.ts openPool), and InnoDB refuses every write at that level in a session that logs statements
 * (binlog_format=STATEMENT: error 1665, ER_BINLOG_STMT_MODE_AND_ROW_ENGINE). Unchecked, such a server let the gateway
 * start and say ready, and then failed every publish.
 *
 * The session's format decides, not the global one: a session starts with the global value, but the server's
 * init_connect or a proxy may set its own. Reading the variables needs no privilege, on MySQL 8 as on MariaDB
 * (@@log_bin is 0 or 1 on both; MySQL 8.0 deprecates binlog_format but keeps it). A server where they cannot be read
 * (a proxy, a server without binlog_format) is not refused: a write it refuses says why (db.ts storeError).
 *
 * What the variables point at is then tried, so that only a server that would refuse the writes is refused: a locking
 * statement at READ COMMITTED that matches no row. sql_log_bin=0 or a binlog filter (binlog_ignore_db) leaves the
 * database's statements out of the log, and InnoDB takes them.
 */
import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise';
import { EventflowError } from '@eventflow/core';

/** mysql2's code of error 1665. */
export const STATEMENT_LOG_REFUSED = 'ER_BINLOG_STMT_MODE_AND_ROW_ENGINE';

const SEE = 'see gateway/README.md › Running beside eventflow v4';
const FIX = "SET GLOBAL binlog_format = 'ROW' (or 'MIXED') on the server and binlog_format=ROW in its configuration ([mysqld]) so that a restart keeps it (MySQL 8: SET PERSIST binlog_format = 'ROW' does both)";

/**
 * What a write refused with error 1665 while the gateway runs is told: the format was changed after the start check
 * (SET GLOBAL reaches new sessions only, so the sessions opened since keep it until the gateway restarts).
 */
export const STATEMENT_LOG_AT_RUN = `the server's binary log is in STATEMENT format for this gateway's sessions, and InnoDB refuses the gateway's writes under it (they run at READ COMMITTED); ${FIX}, then restart the gateway; ${SEE}`;

export interface BinlogFormat {
  readonly logBin: boolean;
  /** Upper case, e.g. ROW, MIXED, STATEMENT. */
  readonly session: string;
  readonly global: string;
}

/** Where the store connects, for the message. */
export interface BinlogTarget {
  readonly host: string;
  readonly port: number;
  readonly user: string;
}

const SETTINGS = 'SELECT @@log_bin AS logBin, @@session.binlog_format AS session, @@global.binlog_format AS global';

const isOn = (value: unknown): boolean => ['1', 'ON', 'TRUE'].includes(String(value).toUpperCase());

/** The server's binary log settings as this store's sessions have them, or undefined when they cannot be read. */
export async function readBinlogFormat(pool: Pool): Promise<BinlogFormat | undefined> {
  try {
    const [[row]] = await pool.query<RowDataPacket[]>(SETTINGS);
    if (row === undefined || row.session === null || row.session === undefined) return undefined;
    return { logBin: isOn(row.logBin), session: String(row.session).toUpperCase(), global: String(row.global).toUpperCase() };
  } catch {
    return undefined;
  }
}

/** Whether the settings make InnoDB refuse writes at READ COMMITTED (unless a filter leaves the database unlogged). */
export const logsStatements = (format: BinlogFormat): boolean => format.logBin && format.session === 'STATEMENT';

/** Whether InnoDB refuses a write at READ COMMITTED on `writer`'s sessions; any other failure is not this check's to report. */
async function refusedAtReadCommitted(writer: Pool): Promise<boolean> {
  let conn: PoolConnection | undefined;
  try {
    conn = await writer.getConnection();
    // The statement is checked against the log when its table is locked, before any row is looked for.
    await conn.query(`UPDATE eventflow_sequence SET value = value WHERE name = ''`);
    return false;
  } catch (error) {
    return (error as { code?: unknown } | null)?.code === STATEMENT_LOG_REFUSED;
  } finally {
    const held = conn;
    await held?.query('ROLLBACK').then(
      () => held.release(),
      () => held.destroy(),
    );
  }
}

/** E_EVENTFLOW_STORE_UNSUPPORTED for a server whose binary log refuses the store's writes, saying what to change. */
export function statementLogRefusal(format: BinlogFormat, target: BinlogTarget): EventflowError {
  const where = `MySQL at ${target.host}:${target.port}`;
  const why = "InnoDB refuses the gateway's writes under it (they run at READ COMMITTED: error 1665)";
  const message =
    format.global === 'STATEMENT'
      ? `${where} writes its binary log in STATEMENT format (binlog_format), and ${why}; run ${FIX}, then start the gateway again; ${SEE}`
      : `${where} gives the sessions of user ${JSON.stringify(target.user)} a binary log in STATEMENT format (their binlog_format; the global one is ${format.global}), and ${why}; make what sets it for them (the server's init_connect, or a proxy) set ROW or MIXED, or nothing, then start the gateway again; ${SEE}`;
  return new EventflowError('E_EVENTFLOW_STORE_UNSUPPORTED', message, { details: { setting: 'binlog_format', session: format.session, global: format.global } });
}

/**
 * Refuses, with E_EVENTFLOW_STORE_UNSUPPORTED, a server whose binary log would refuse the store's writes. `writer` is
 * a pool at READ COMMITTED, on the store's database, whose tables exist.
 */
export async function checkBinlogFormat(pool: Pool, writer: Pool, target: BinlogTarget): Promise<void> {
  const format = await readBinlogFormat(pool);
  if (format === undefined || !logsStatements(format)) return;
  if (await refusedAtReadCommitted(writer)) throw statementLogRefusal(format, target);
}
