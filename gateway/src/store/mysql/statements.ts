/**
 * How the MySQL store talks SQL: every statement that carries a value is a server-side prepared
 * statement (`execute`), so values never pass through client-side escaping, whose safety depends
 * on the session's sql_mode (under NO_BACKSLASH_ESCAPES mysql2's `\'` ends a string). No pool
 * allows several statements per query, and every connection's sql_mode is set when it opens.
 *
 * Prepared statements have a fixed number of placeholders. A list (`IN (?)`) is expanded to a
 * power of two of placeholders, padded by repeating its last value (IN is a set), and a multi-row
 * INSERT is cut into power-of-two row counts: a handful of distinct statements per query shape,
 * which the per-connection statement cache (mysql2's LRU, MAX_PREPARED_PER_CONNECTION) keeps.
 */
import type { Pool, PoolConnection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';

/** A value for one `?`; a list (non-empty or empty) expands to `?, ?, …` for IN (?). */
export type Param = string | number | Date | null | readonly (string | number)[];
export type Params = readonly Param[];

/**
 * The session sql_mode of every connection: strict (a value too long for its column fails instead
 * of being truncated), and none of the modes that change how statements read (ANSI_QUOTES,
 * NO_BACKSLASH_ESCAPES, PIPES_AS_CONCAT, …), whatever the server's global default is.
 */
export const SESSION_SQL_MODE = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

/** mysql2 caches prepared statements per connection (LRU, closing evicted ones on the server); max_prepared_stmt_count is server-wide. */
export const MAX_PREPARED_PER_CONNECTION = 256;

type On = Pool | PoolConnection;

const bucket = (n: number): number => (n <= 1 ? 1 : 2 ** Math.ceil(Math.log2(n)));

/** `sql` with each list parameter expanded (see the header), and the flat values. */
export function expand(sql: string, params: Params): { sql: string; values: Array<string | number | Date | null> } {
  const values: Array<string | number | Date | null> = [];
  let index = 0;
  const text = sql.replace(/\?/g, () => {
    const param = params[index++];
    if (param === undefined) throw new TypeError(`statement has more placeholders than the ${params.length} values given`);
    if (!Array.isArray(param)) {
      values.push(param as string | number | Date | null);
      return '?';
    }
    const list = param as readonly (string | number)[];
    // IN (NULL) matches nothing, as an empty list means.
    if (list.length === 0) return 'NULL';
    const size = bucket(list.length);
    for (let i = 0; i < size; i++) values.push(list[Math.min(i, list.length - 1)] as string | number);
    return new Array<string>(size).fill('?').join(', ');
  });
  if (index !== params.length) throw new TypeError(`statement has ${index} placeholders for ${params.length} values`);
  return { sql: text, values };
}

export async function select<T>(on: On, sql: string, params: Params = []): Promise<T[]> {
  const expanded = expand(sql, params);
  const [rows] = await on.execute<RowDataPacket[]>(expanded.sql, expanded.values);
  return rows as T[];
}

/** Runs a statement; returns how many rows it matched (mysql2 sets FOUND_ROWS). */
export async function affected(on: On, sql: string, params: Params = []): Promise<number> {
  const expanded = expand(sql, params);
  const [result] = await on.execute<ResultSetHeader>(expanded.sql, expanded.values);
  return result.affectedRows;
}

/**
 * Inserts `rows` with `head` (`INSERT INTO t (a, b) VALUES`) and one `tuple` per row (`(?, ?)`, may hold SQL such as
 * UTC_TIMESTAMP()), in statements of power-of-two row counts, largest first: at most log2(rows) + 1 statements.
 */
export async function insertRows(on: On, head: string, tuple: string, rows: ReadonlyArray<ReadonlyArray<string | number | Date | null>>): Promise<void> {
  for (let start = 0; start < rows.length; ) {
    const size = 2 ** Math.floor(Math.log2(rows.length - start));
    const chunk = rows.slice(start, start + size);
    await on.execute(`${head} ${new Array<string>(size).fill(tuple).join(', ')}`, chunk.flat());
    start += size;
  }
}

/**
 * Sets SESSION_SQL_MODE (and `extra` session settings, constants only) on every new connection of
 * `pool`, queued ahead of its first use; a connection whose session cannot be set up is dropped.
 * For the pools that still format values on the client (the v4 wing's hub and certificate tables),
 * this is what keeps mysql2's escaping correct whatever the server's default sql_mode.
 */
export function setSessionOnConnect(pool: Pool, extra: readonly string[] = []): void {
  const assignments = [`sql_mode = '${SESSION_SQL_MODE}'`, ...extra].join(', ');
  pool.pool.on('connection', (conn) => conn.query(`SET SESSION ${assignments}`, (error) => error && conn.destroy()));
}
