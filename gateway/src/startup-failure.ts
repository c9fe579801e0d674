/**
 * Start-up failures a person can act on. The errors of a store that cannot be opened or reached
 * and of an address that cannot be listened on are turned into coded errors whose message names
 * what is wrong (the path, host, port, database, user) and the variable to change; a store that
 * refuses a start itself with its own code (a SQLite file held, a MySQL server setting that would
 * refuse its writes) keeps it. `explainStartupFailure` gives the bins their first stderr line and
 * their exit code.
 */
import { statSync } from 'node:fs';
import { EventflowError } from '@eventflow/core';

/** The bins' exit codes (also in `eventflow-gateway --help` and gateway/README.md). */
export const exitCodes = {
  ok: 0,
  /** Failed while running or while stopping, or an unexpected start-up failure. */
  failed: 1,
  /** Bad command line. */
  usage: 2,
  /** E_EVENTFLOW_CONFIG: an EVENTFLOW_* variable is invalid. */
  config: 3,
  /** E_EVENTFLOW_LISTEN_FAILED: the address is in use or not available. */
  listen: 4,
  /** E_EVENTFLOW_STORE_UNAVAILABLE: the database cannot be opened or reached. */
  store: 5,
  /** E_EVENTFLOW_STORE_LOCKED: another gateway holds the SQLite file. */
  storeLocked: 6,
  /** E_EVENTFLOW_STORE_UNSUPPORTED: the MySQL server answers, but a setting of it (binlog_format) would refuse the gateway's writes. */
  storeUnsupported: 7,
} as const;

export type StoreTarget =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'mysql'; readonly host: string; readonly port: number; readonly database: string; readonly user: string };

interface Coded {
  code?: unknown;
  errno?: unknown;
  path?: unknown;
  message?: unknown;
}

const codeOf = (error: unknown): string | undefined => {
  const code = (error as Coded | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
};
/** The first error below our own wrappers (E_EVENTFLOW_STORE_FAILED around a mysql2 error): what actually failed. */
const cause = (error: unknown): Coded | undefined => {
  for (let at: unknown = error, depth = 0; at !== undefined && at !== null && depth < 5; at = (at as { cause?: unknown }).cause, depth++) {
    const code = codeOf(at);
    if (code !== undefined && !code.startsWith('E_EVENTFLOW_')) return at as Coded;
  }
  return undefined;
};
const causeCode = (error: unknown): string | undefined => codeOf(cause(error));

/**
 * The store's own tables are not what this gateway can open or upgrade (a column or index missing,
 * renamed or of another type; a table replaced by a view): the database answers, and another file
 * or database would start empty. SQLite reports them as SQLITE_ERROR (a statement that cannot run
 * on these tables) or a constraint an upgrade step broke; the MySQL codes are the server's.
 */
const sqliteSchemaCodes: ReadonlySet<string> = new Set(['SQLITE_ERROR', 'SQLITE_SCHEMA', 'SQLITE_MISMATCH', 'SQLITE_CONSTRAINT', 'SQLITE_CONSTRAINT_NOTNULL', 'SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_CONSTRAINT_PRIMARYKEY']);
const mysqlSchemaCodes: ReadonlySet<string> = new Set([
  'ER_BAD_FIELD_ERROR',
  'ER_KEY_COLUMN_DOES_NOT_EXITS',
  'ER_CANT_DROP_FIELD_OR_KEY',
  'ER_WRONG_OBJECT',
  'ER_NO_SUCH_TABLE',
  'ER_DUP_ENTRY',
  'ER_WRONG_FIELD_SPEC',
  'ER_DATA_TOO_LONG',
  'ER_TRUNCATED_WRONG_VALUE_FOR_FIELD',
  'ER_WARN_DATA_OUT_OF_RANGE',
  'ER_BLOB_KEY_WITHOUT_LENGTH',
  'ER_TOO_LONG_KEY',
]);
const namesOnly: ReadonlySet<string> = new Set(['ER_BAD_FIELD_ERROR', 'ER_KEY_COLUMN_DOES_NOT_EXITS', 'ER_CANT_DROP_FIELD_OR_KEY', 'ER_WRONG_OBJECT', 'ER_NO_SUCH_TABLE']);
const keptAsIs = 'its data is kept as it is: repair those tables, restore a backup, or run the gateway version that wrote them';
const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** Start-up failures of a store that already say what to do: kept, not made E_EVENTFLOW_STORE_UNAVAILABLE. */
const ownStoreCodes: ReadonlySet<string> = new Set(['E_EVENTFLOW_STORE_UNAVAILABLE', 'E_EVENTFLOW_STORE_LOCKED', 'E_EVENTFLOW_STORE_UNSUPPORTED']);

/** A store's open/connect failure as E_EVENTFLOW_STORE_UNAVAILABLE, saying what to check and which variable to set. */
export function storeUnavailable(error: unknown, target: StoreTarget): EventflowError {
  if (error instanceof EventflowError && ownStoreCodes.has(error.code)) return error;
  return new EventflowError('E_EVENTFLOW_STORE_UNAVAILABLE', target.kind === 'sqlite' ? sqliteProblem(error, target.path) : mysqlProblem(error, target), { cause: error });
}

function sqliteProblem(error: unknown, path: string): string {
  const fix = 'set EVENTFLOW_SQLITE_PATH to a file in a directory this process can write';
  const code = causeCode(error);
  const syscall = (error as { syscall?: unknown }).syscall;
  if (syscall === 'mkdir' || syscall === 'stat') {
    return `cannot create the directory ${JSON.stringify(String((error as Coded).path ?? ''))} for the SQLite database ${JSON.stringify(path)} (${code}); ${fix}`;
  }
  // Another process in a write transaction on the file (the sqlite3 shell, a backup, a script): the
  // file is fine, and another path would start on an empty store.
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
    return `the SQLite database ${JSON.stringify(path)} is locked by another process in a write transaction on it (the sqlite3 shell, a backup, a script) (${code}); end that transaction, then start the gateway again`;
  }
  // A database that exists, on a read-only mount or owned by another user: another path would start on an empty store.
  if ((code?.startsWith('SQLITE_READONLY') || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_PERM') && path !== ':memory:' && statSync(path, { throwIfNoEntry: false })?.isFile() === true) {
    return `the SQLite database ${JSON.stringify(path)} exists, but this process cannot write to it or to its directory (${code}); give it write access to both (the file's owner or mode, a read-only mount), then start the gateway again (another EVENTFLOW_SQLITE_PATH would start on an empty store)`;
  }
  if (code === 'SQLITE_NOTADB') return `${JSON.stringify(path)} is not a SQLite database; set EVENTFLOW_SQLITE_PATH to another file (a new one is created)`;
  if (code?.startsWith('SQLITE_CORRUPT')) return `the SQLite database ${JSON.stringify(path)} is damaged: ${messageOf(error)} (${code}); restore it from a backup (another EVENTFLOW_SQLITE_PATH starts on an empty store)`;
  if (code !== undefined && sqliteSchemaCodes.has(code)) {
    return `the SQLite database ${JSON.stringify(path)} holds eventflow tables this gateway cannot open or upgrade: ${messageOf(cause(error) ?? error)} (${code}); ${keptAsIs} (another EVENTFLOW_SQLITE_PATH starts on an empty store)`;
  }
  return `cannot open the SQLite database ${JSON.stringify(path)}: ${messageOf(error)}${code ? ` (${code})` : ''}; ${fix}`;
}

function mysqlProblem(error: unknown, target: Extract<StoreTarget, { kind: 'mysql' }>): string {
  const where = `MySQL at ${target.host}:${target.port}`;
  const as = `(database ${JSON.stringify(target.database)}, user ${JSON.stringify(target.user)})`;
  const code = causeCode(error) ?? 'unknown error';
  switch (code) {
    case 'ECONNREFUSED':
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ECONNRESET':
    case 'PROTOCOL_CONNECTION_LOST':
      return `cannot reach ${where} ${as}: ${code}; start the server, or set EVENTFLOW_MYSQL_HOST and EVENTFLOW_MYSQL_PORT to where it runs`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `cannot resolve the MySQL host ${JSON.stringify(target.host)} ${as}: ${code}; set EVENTFLOW_MYSQL_HOST to the server's name or address`;
    case 'ER_BAD_DB_ERROR':
      return `${where} has no database ${JSON.stringify(target.database)} (user ${JSON.stringify(target.user)}); create it (CREATE DATABASE \`${target.database}\`) or set EVENTFLOW_MYSQL_DB to an existing one`;
    case 'ER_ACCESS_DENIED_ERROR':
    case 'ER_NOT_SUPPORTED_AUTH_MODE':
      return `${where} refused user ${JSON.stringify(target.user)} (database ${JSON.stringify(target.database)}): ${code}; check EVENTFLOW_MYSQL_USER and EVENTFLOW_MYSQL_PASS`;
    // Whatever the password: an account of an authentication plugin that takes none (unix_socket), or an unknown user
    // that MariaDB, not to tell which users exist, answers as one of its accounts would.
    case 'ER_ACCESS_DENIED_NO_PASSWORD_ERROR':
      return (
        `${where} refused user ${JSON.stringify(target.user)} (database ${JSON.stringify(target.database)}): ${code}, MariaDB's answer for an account that signs in as the system user of its name over the server's socket ` +
        `(unix_socket, as Debian's root@localhost does), which a gateway connecting over TCP cannot use, or for a user it does not know; make a user with a password for the gateway ` +
        `(CREATE USER 'eventflow'@'%' IDENTIFIED BY '...'; GRANT ALL ON \`${target.database}\`.* TO 'eventflow'@'%') and set EVENTFLOW_MYSQL_USER and EVENTFLOW_MYSQL_PASS`
      );
    case 'ER_MUST_CHANGE_PASSWORD_LOGIN':
      return `${where}: the password of user ${JSON.stringify(target.user)} has expired (${code}); give it a new one (ALTER USER ... IDENTIFIED BY ...) and set EVENTFLOW_MYSQL_PASS to it`;
    case 'ER_HOST_NOT_PRIVILEGED':
      return `${where} lets no account of this machine's address connect (${code}); create user ${JSON.stringify(target.user)} for it (CREATE USER '${target.user}'@'<this address>' ..., with its grants), or set EVENTFLOW_MYSQL_HOST to a server that has one`;
    case 'ER_HOST_IS_BLOCKED':
      return `${where} blocks this machine after too many failed connections (${code}); run FLUSH HOSTS on the server (mariadb-admin flush-hosts), and raise max_connect_errors if it comes back`;
    // The gateway opens several pools (appends, reads, the delivery ledger) of up to EVENTFLOW_MYSQL_CONNECTION_LIMIT connections each.
    case 'ER_CON_COUNT_ERROR':
      return `${where} refuses new connections: max_connections is reached (${code}); end other clients' idle connections, or raise max_connections on the server`;
    case 'ER_TOO_MANY_USER_CONNECTIONS':
      return `${where} allows user ${JSON.stringify(target.user)} no more connections (${code}: the server's max_user_connections); the gateway needs several (pools of up to EVENTFLOW_MYSQL_CONNECTION_LIMIT): raise the limit, or end the user's other connections`;
    case 'ER_USER_LIMIT_REACHED':
      return `${where}: user ${JSON.stringify(target.user)} is over one of its account's resource limits (${code}: MAX_USER_CONNECTIONS, or MAX_CONNECTIONS_, MAX_QUERIES_ or MAX_UPDATES_PER_HOUR); the gateway needs several connections (pools of up to EVENTFLOW_MYSQL_CONNECTION_LIMIT) and many statements: lift them (ALTER USER ... WITH MAX_USER_CONNECTIONS 0 MAX_QUERIES_PER_HOUR 0 ...), or set EVENTFLOW_MYSQL_USER to another user`;
    // MariaDB's 4151 and 4150, which mysql2 names after MySQL's errors of those numbers (store/driver-code.ts renames
    // them; not imported here, so that main.ts loads no store module before it knows what to run).
    case 'ER_ACCOUNT_HAS_BEEN_LOCKED':
    case 'ER_BULK_PARSER_INCOMPLETE_ESCAPE_SEQUENCE':
      return `${where}: the account of user ${JSON.stringify(target.user)} is locked (ER_ACCOUNT_HAS_BEEN_LOCKED); unlock it (ALTER USER ... ACCOUNT UNLOCK), or set EVENTFLOW_MYSQL_USER to another user`;
    case 'ER_USER_IS_BLOCKED':
    case 'ER_BULK_PARSER_UNEXPECTED_CHAR_AFTER_COLUMN_TERMINATOR':
      return `${where}: user ${JSON.stringify(target.user)} is blocked after too many wrong passwords (ER_USER_IS_BLOCKED); unblock it (FLUSH PRIVILEGES) and check EVENTFLOW_MYSQL_PASS`;
    case 'ER_DBACCESS_DENIED_ERROR':
    case 'ER_TABLEACCESS_DENIED_ERROR':
      return `${where}: user ${JSON.stringify(target.user)} may not use database ${JSON.stringify(target.database)} (${code}); grant it the privileges, or set EVENTFLOW_MYSQL_USER / EVENTFLOW_MYSQL_DB`;
    default:
      if (mysqlSchemaCodes.has(code)) {
        // The server's message, where it names only a table, column or key (others quote values).
        const said = namesOnly.has(code) ? `: ${messageOf(cause(error))}` : '';
        return `${where}: database ${JSON.stringify(target.database)} holds eventflow tables this gateway cannot open or upgrade${said} (${code}); ${keptAsIs} (another EVENTFLOW_MYSQL_DB starts on an empty store)`;
      }
      // The store's own error already names the code and what to do: said twice, the line contradicted itself.
      if (error instanceof EventflowError) return `cannot use ${where} ${as}: ${messageOf(error)}`;
      return `cannot use ${where} ${as}: ${messageOf(error)} (${code}); check the server and the EVENTFLOW_MYSQL_* variables`;
  }
}

/** Names of the variables that set a listen address, for the message. */
export interface ListenVariables {
  readonly host: string;
  readonly port: string;
}

/** A failed listen() as E_EVENTFLOW_LISTEN_FAILED: "port 8080 on 127.0.0.1 is in use; stop the other process or set EVENTFLOW_PORT". */
export function listenFailed(error: unknown, host: string, port: number, variables: ListenVariables = { host: 'EVENTFLOW_HOST', port: 'EVENTFLOW_PORT' }): EventflowError {
  const code = codeOf(error);
  const message =
    code === 'EADDRINUSE'
      ? `port ${port} on ${host} is in use; stop the other process or set ${variables.port}`
      : code === 'EACCES'
        ? `port ${port} on ${host} needs privileges this process does not have (EACCES); set ${variables.port} to 1024 or above`
        : code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN'
          ? `cannot listen on ${host} (${code}): not an address of this machine; set ${variables.host}`
          : `cannot listen on ${host}:${port}: ${messageOf(error)}; check ${variables.host} and ${variables.port}`;
  return new EventflowError('E_EVENTFLOW_LISTEN_FAILED', message, { cause: error });
}

export interface StartupFailure {
  /** One line for a person: what is wrong and what to do. */
  readonly line: string;
  readonly exitCode: number;
}

/** Each start-up failure's code, and the exit code that says its kind; anything else is `failed`. */
const exitCodeOf: ReadonlyMap<string, number> = new Map([
  ['E_EVENTFLOW_CONFIG', exitCodes.config],
  ['E_EVENTFLOW_LISTEN_FAILED', exitCodes.listen],
  ['E_EVENTFLOW_STORE_UNAVAILABLE', exitCodes.store],
  ['E_EVENTFLOW_STORE_LOCKED', exitCodes.storeLocked],
  ['E_EVENTFLOW_STORE_UNSUPPORTED', exitCodes.storeUnsupported],
]);

/** What a bin prints (first, on stderr) and exits with when `what` could not start. */
export function explainStartupFailure(error: unknown, what: 'gateway' | 'hub'): StartupFailure {
  const code = codeOf(error);
  const exitCode = (code === undefined ? undefined : exitCodeOf.get(code)) ?? exitCodes.failed;
  const reason = exitCode === exitCodes.failed ? `${messageOf(error)}${code ? ` (${code})` : ''}` : `${messageOf(error)} (${code})`;
  return { line: `eventflow ${what} cannot start: ${reason}`, exitCode };
}
