/** The code a store driver's error goes by: SQLite's and mysql2's own, and a name for the MariaDB errors mysql2 leaves without one. */

/**
 * MariaDB's own server errors that mysql2 leaves without a code: its names follow MySQL's list, which
 * has no 19xx. Without a name such an error counted as a fault of the statement, so a publish
 * interrupted by a server's `max_statement_time` (behind an operator's lock, say) was refused for good
 * instead of being sent again.
 */
const MARIADB_CODES: ReadonlyMap<number, string> = new Map([
  [1927, 'ER_CONNECTION_KILLED'],
  [1969, 'ER_STATEMENT_TIMEOUT'],
]);

/**
 * MariaDB's own server errors from 4000 on, which mysql2 names after MySQL's errors of the same number: an account
 * locked by an operator read `ER_BULK_PARSER_INCOMPLETE_ESCAPE_SEQUENCE`. Renamed only from those MySQL names, errors
 * of a kind (bulk loads, replication registration) the store's statements never make on MySQL.
 */
const MARIADB_OVER_MYSQL: ReadonlyMap<string, string> = new Map([
  ['4047:ER_WARN_SQL_AFTER_MTS_GAPS_GAP_NOT_CALCULATED', 'ER_UNSUPPORTED_COMPRESSED_TABLE'],
  ['4060:ER_INVALID_USER_FOR_REGISTRATION', 'ER_ROLLBACK_ONLY'],
  ['4150:ER_BULK_PARSER_UNEXPECTED_CHAR_AFTER_COLUMN_TERMINATOR', 'ER_USER_IS_BLOCKED'],
  ['4151:ER_BULK_PARSER_INCOMPLETE_ESCAPE_SEQUENCE', 'ER_ACCOUNT_HAS_BEEN_LOCKED'],
]);

/** The error's own code: the driver's name, MariaDB's for a server error mysql2 does not name (or names after MySQL's), else `ER_ERRNO_<n>` for a server error. */
export function ownDriverCode(error: unknown): string | undefined {
  const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown };
  if (typeof code === 'string') return MARIADB_OVER_MYSQL.get(`${String(errno)}:${code}`) ?? code;
  return typeof errno === 'number' ? (MARIADB_CODES.get(errno) ?? `ER_ERRNO_${errno}`) : undefined;
}
