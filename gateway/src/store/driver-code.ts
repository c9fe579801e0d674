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

/** The error's own code: the driver's name, MariaDB's for a server error mysql2 does not name, else `ER_ERRNO_<n>` for a server error. */
export function ownDriverCode(error: unknown): string | undefined {
  const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown };
  if (typeof code === 'string') return code;
  return typeof errno === 'number' ? (MARIADB_CODES.get(errno) ?? `ER_ERRNO_${errno}`) : undefined;
}
