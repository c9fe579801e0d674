/** The MySQL store's pools, its wrapping of driver errors, and the runners of one statement or one transaction. */
import { createPool, type Pool, type PoolConnection } from 'mysql2/promise';
import { EventflowError } from '@eventflow/core';
import { ownDriverCode } from '../driver-code.js';
import { affected, MAX_PREPARED_PER_CONNECTION, select, setSessionOnConnect, type Params } from './statements.js';
import { STATEMENT_LOG_AT_RUN, STATEMENT_LOG_REFUSED } from './binlog.js';

/** Defaults as v4's: 127.0.0.1:3306, root without password, database eventflow, 10 connections. */
export interface MysqlStoreOptions {
  host?: string | undefined;
  port?: number | undefined;
  user?: string | undefined;
  password?: string | undefined;
  database?: string | undefined;
  connectionLimit?: number | undefined;
  /** The session time_zone of the store's connections (the server's by default). Nothing depends on it; tests prove that. */
  sessionTimeZone?: string | undefined;
  /**
   * eventflow v4 spokes may write events to this database (the gateway's hub mesh): every append first positions
   * the v4-written events of its eventlogs (see appends.ts). Otherwise appends do that only once the store has met
   * an event without a position (its sweeps and reads position them).
   */
  v4Writers?: boolean | undefined;
  /**
   * Whether init refuses a server whose binary log would refuse the store's READ COMMITTED writes (binlog.ts); on by
   * default. The v4 hub turns it off: its claims and firings run at the server's own isolation level.
   */
  checkBinlogFormat?: boolean | undefined;
  /** Whether appends and settles may use their routines (append-routine.ts, settle-routine.ts) where the server and the user allow them; on by default. */
  appendRoutine?: boolean | undefined;
}

export const ATTEMPTS = 5;

export const utcNow = async (on: Pool | PoolConnection): Promise<Date> => (await select<{ now: Date }>(on, 'SELECT UTC_TIMESTAMP(3) AS now'))[0]?.now ?? new Date();

/** The driver's code of an error (driver-code.ts): ER_…, a connection's (ECONNREFUSED, PROTOCOL_CONNECTION_LOST), or ours. */
export const driverCode = ownDriverCode;

/** The server's refusals of the gateway's user (a connection, a database, a table): startup-failure.ts names each at start. */
const CONNECTION_REFUSALS = [
  'ER_ACCESS_DENIED_ERROR',
  'ER_ACCESS_DENIED_NO_PASSWORD_ERROR',
  'ER_DBACCESS_DENIED_ERROR',
  'ER_TABLEACCESS_DENIED_ERROR',
  'ER_HOST_NOT_PRIVILEGED',
  'ER_HOST_IS_BLOCKED',
  'ER_USER_LIMIT_REACHED',
  'ER_MUST_CHANGE_PASSWORD_LOGIN',
];

/**
 * Server errors of the database's state rather than of the statements: a retry of the same work may succeed once it
 * has passed (write-health.ts). Every error that is not the server's (ER_…) is the connection's.
 */
const STATE_ERRORS = new Set([
  'ER_LOCK_WAIT_TIMEOUT',
  'ER_LOCK_DEADLOCK',
  // MariaDB: a transaction the server rolled back (a Galera conflict, say): run again, it may commit.
  'ER_ROLLBACK_ONLY',
  // MariaDB: the user locked or blocked by an operator (ALTER USER … ACCOUNT LOCK, max_password_errors): back once unlocked.
  'ER_ACCOUNT_HAS_BEEN_LOCKED',
  'ER_USER_IS_BLOCKED',
  'ER_CON_COUNT_ERROR',
  'ER_TOO_MANY_USER_CONNECTIONS',
  'ER_SERVER_SHUTDOWN',
  'ER_QUERY_INTERRUPTED',
  // A statement stopped by the server's max_statement_time (MariaDB) or max_execution_time (MySQL): a lock or a load it waited on.
  'ER_STATEMENT_TIMEOUT',
  'ER_QUERY_TIMEOUT',
  'ER_CONNECTION_KILLED',
  'ER_OPTION_PREVENTS_STATEMENT',
  'ER_READ_ONLY_MODE',
  'ER_RECORD_FILE_FULL',
  'ER_DISK_FULL',
  'ER_OUTOFMEMORY',
  'ER_OUT_OF_RESOURCES',
  'ER_ERROR_ON_WRITE',
  'ER_CANT_LOCK',
  'ER_LOCK_OR_ACTIVE_TRANSACTION',
  'ER_TOO_MANY_CONCURRENT_TRXS',
  // A table of the store dropped or renamed under it: back once it is restored (or made again at a restart).
  'ER_NO_SUCH_TABLE',
  // The server refusing the gateway's user a new connection (its password changed, its account dropped, locked out of
  // this host) or its privileges: the operator's doing, back once undone, whatever the statement. Counted as faults of
  // the statements, they failed a publish for good, without its id or `stored`, where the clients send it again.
  ...CONNECTION_REFUSALS,
]);

export function isStoreStateError(code: string | undefined): boolean {
  return code !== undefined && (!code.startsWith('ER_') || STATE_ERRORS.has(code));
}

/**
 * What to do about a driver error: for those that fail every write until someone changes the database, what to change
 * (only a table's name is taken from the server's message: SQL text and values never are).
 */
export function nextStep(error: unknown): string {
  const code = driverCode(error);
  if (code === STATEMENT_LOG_REFUSED) return STATEMENT_LOG_AT_RUN;
  if (READ_ONLY.has(code ?? '') && /read.only/i.test(String((error as { message?: unknown }).message))) return READ_ONLY_STEP;
  return missingTable(error) ?? STEPS.get(code ?? '') ?? 'check the database and the gateway log';
}

const READ_ONLY = new Set(['ER_OPTION_PREVENTS_STATEMENT', 'ER_READ_ONLY_MODE']);
const READ_ONLY_STEP = 'the server is read-only (read_only): writes resume once it is writable again (SET GLOBAL read_only = 0), without a restart';
const LOST_STEP = 'the connection to the database was lost (killed, or the server went away): the gateway opens another; send it again';

/**
 * What to do about the operational faults a database's operator causes (they pass without a restart): the message
 * names them, where "check the database" left an operator to find which it was.
 */
const STEPS: ReadonlyMap<string, string> = new Map([
  [
    'ER_LOCK_WAIT_TIMEOUT',
    "another client's transaction holds rows the store needs past innodb_lock_wait_timeout: find it in information_schema.INNODB_TRX (SHOW ENGINE INNODB STATUS) and end it; send it again",
  ],
  ['ER_LOCK_DEADLOCK', 'a deadlock with other transactions, each time the store ran it again: send it again'],
  ['ER_STATEMENT_TIMEOUT', "a statement ran past the server's max_statement_time (a lock or a load it waited on): send it again, and raise the limit if it lasts"],
  ['ER_QUERY_TIMEOUT', "a statement ran past the server's max_execution_time (a lock or a load it waited on): send it again, and raise the limit if it lasts"],
  ['ER_CON_COUNT_ERROR', "the server refuses new connections (max_connections reached): end other clients' idle connections or raise max_connections"],
  ['ER_TOO_MANY_USER_CONNECTIONS', "the server refuses this user more connections (its MAX_USER_CONNECTIONS or max_user_connections): raise the limit or end the user's other connections"],
  ['ER_CONNECTION_KILLED', LOST_STEP],
  ['ER_QUERY_INTERRUPTED', 'the statement was interrupted (KILL QUERY, or the server shutting down): send it again'],
  ['PROTOCOL_CONNECTION_LOST', LOST_STEP],
  ['ECONNRESET', LOST_STEP],
  ['ECONNREFUSED', 'the database does not accept connections (down, or another host or port): the gateway tries again until it does'],
  ['ER_ROLLBACK_ONLY', 'the server rolled the transaction back (a conflict with another, on a Galera cluster say): send it again'],
  ['ER_ACCOUNT_HAS_BEEN_LOCKED', "the database user's account is locked: unlock it (ALTER USER … ACCOUNT UNLOCK); the gateway connects again by itself"],
  ['ER_USER_IS_BLOCKED', "the database user is blocked after too many wrong passwords (max_password_errors): FLUSH PRIVILEGES, or ALTER USER, unblocks it"],
  [
    'ER_ACCESS_DENIED_ERROR',
    "the server refuses the gateway's database user a new connection (its password changed, or the account was dropped): restore it, or restart the gateway with EVENTFLOW_MYSQL_USER and EVENTFLOW_MYSQL_PASS that the server accepts; the gateway tries again until it is let in",
  ],
  ['ER_DBACCESS_DENIED_ERROR', "the gateway's database user lost its privileges on the database: grant them again (GRANT ALL ON db.* TO …); the gateway tries again"],
  ['ER_TABLEACCESS_DENIED_ERROR', "the gateway's database user lost its privileges on a table of the store: grant them again; the gateway tries again"],
  ['ER_HOST_IS_BLOCKED', 'the server blocks this machine after too many failed connections: run FLUSH HOSTS on the server (mariadb-admin flush-hosts), and raise max_connect_errors if it comes back'],
  ['ER_USER_LIMIT_REACHED', "the gateway's database user is over a resource limit of its account (MAX_USER_CONNECTIONS, MAX_QUERIES_PER_HOUR, …): lift it (ALTER USER … WITH … 0)"],
]);

/** For a table dropped or renamed under the store: which, and what to do. */
export function missingTable(error: unknown): string | undefined {
  if (driverCode(error) !== 'ER_NO_SUCH_TABLE') return undefined;
  const table = /^Table '(?:[^'.]*\.)?([A-Za-z0-9_$]+)' doesn't exist/.exec(String((error as { message?: unknown }).message))?.[1];
  return `the table ${table ? `"${table}" ` : ''}is missing: restore it or restart the gateway (at its start it creates the tables that are missing, empty)`;
}

/** The connection went away under a statement (killed by another client, the server or the network gone), or the statement was interrupted. */
const LOST = new Set(['PROTOCOL_CONNECTION_LOST', 'ER_CONNECTION_KILLED', 'ER_QUERY_INTERRUPTED', 'ECONNRESET', 'EPIPE']);

/**
 * A read, run once more (on another of the pool's connections) when its connection was lost under it: an operator's
 * KILL of a connection failed a request()'s wait with the request(), where a read again would have answered.
 */
export async function readAgain<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (!LOST.has(driverCode(error) ?? '')) throw error;
    return read();
  }
}

/** Wraps a driver error. The message names the driver code only: SQL text and values stay in `cause`. */
export function storeError(error: unknown, what: string): EventflowError {
  if (error instanceof EventflowError) return error;
  const code = driverCode(error);
  const message = `the MySQL store could not ${what}${code ? ` (${code})` : ''}; ${nextStep(error)}`;
  return new EventflowError('E_EVENTFLOW_STORE_FAILED', message, { cause: error });
}

export function validDate(date: Date, what: string): Date {
  if (Number.isNaN(date.getTime())) throw new EventflowError('E_EVENTFLOW_INVALID_DATE', `${what} is not a valid date`);
  return date;
}

export const notOpen = (): EventflowError => new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the MySQL store is not open; call init() first');

/**
 * A pool of `limit` connections on the options' database; `autocommit` false for group commits;
 * `readCommitted`: its transactions at READ COMMITTED (their reads lock nothing, see append-leases.ts).
 */
export function openPool(options: MysqlStoreOptions, limit: number, autocommit: boolean, readCommitted = false): Pool {
  const { host = '127.0.0.1', port = 3306, database = 'eventflow', sessionTimeZone } = options;
  const { user = 'root', password = '' } = options;
  // One statement per query on every pool (multipleStatements off), values only in prepared statements (statements.ts).
  const created = createPool({
    host,
    port,
    user,
    password,
    database,
    connectionLimit: limit,
    multipleStatements: false,
    maxPreparedStatements: MAX_PREPARED_PER_CONNECTION,
    charset: 'utf8mb4',
    timezone: 'Z',
    dateStrings: false,
    jsonStrings: true,
    // mysql2 otherwise captures a stack trace on every query and execute (for the caller's frames in a driver error's
    // stack): 2.5% of a MariaDB gateway's CPU at 9k publishes/s. A driver error still reaches the log wrapped, with
    // its code and message, as the cause of the store's error (storeError), whose own stack has the caller's frames.
    trace: false,
  });
  // The session is set up before the connection's first use (queued ahead of it): a known sql_mode whatever the
  // server's default, and the time zone when asked. A connection whose session cannot be set up is dropped.
  setSessionOnConnect(created, autocommit ? [] : ['autocommit = 0']);
  if (readCommitted) created.pool.on('connection', (conn) => conn.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED', (error) => error && conn.destroy()));
  if (sessionTimeZone !== undefined) {
    created.pool.on('connection', (conn) => conn.execute('SET time_zone = ?', [sessionTimeZone], (error) => error && conn.destroy()));
  }
  return created;
}

/** Runs one store operation, wrapping driver errors. */
export async function run<T>(pool: Pool, what: string, work: (pool: Pool) => Promise<T>): Promise<T> {
  try {
    return await work(pool);
  } catch (error) {
    throw storeError(error, what);
  }
}

/**
 * One statement; returns how many rows it matched (mysql2 sets FOUND_ROWS), so a guarded claim won iff 1. A deadlock
 * victim (a delete racing a firing, say) had no effect and runs again.
 */
export function exec(pool: Pool, what: string, sql: string, params: Params): Promise<number> {
  const attempt = (n: number): Promise<number> =>
    affected(pool, sql, params).catch((error: unknown) => (driverCode(error) === 'ER_LOCK_DEADLOCK' && n < ATTEMPTS ? attempt(n + 1) : Promise.reject(error)));
  return run(pool, what, () => attempt(1));
}

/** Runs `work` in a transaction, again from the start when it fails with one of `retryOn`. */
export async function transaction<T>(pool: Pool, work: (conn: PoolConnection) => Promise<T>, retryOn: readonly string[] = []): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    const conn = await pool.getConnection();
    try {
      await conn.beginTransaction();
      const result = await work(conn);
      await conn.commit();
      conn.release();
      return result;
    } catch (error) {
      await conn.rollback().then(() => conn.release(), () => conn.destroy());
      const code = driverCode(error);
      const retry = code === 'ER_LOCK_DEADLOCK' || (code !== undefined && retryOn.includes(code));
      if (!retry || attempt >= ATTEMPTS) throw error;
    }
  }
}

/**
 * Whether the server runs `INSERT … RETURNING` (MariaDB 10.5 and later; MySQL has none): the appends
 * then read the clock in their event INSERT (appends.ts).
 */
export async function insertReturns(pool: Pool): Promise<boolean> {
  const [row] = await select<{ version: string }>(pool, 'SELECT VERSION() AS version');
  const match = /^(\d+)\.(\d+)\.\d+-MariaDB/i.exec(row?.version ?? '');
  return match !== null && Number(match[1]) * 1000 + Number(match[2]) >= 10_005;
}
