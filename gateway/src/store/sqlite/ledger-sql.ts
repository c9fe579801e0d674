/** The SQLite ledger's statements (cached by text) and transaction, and the SQL its parts share (ledger.ts, ledger-operator.ts). */
import type Database from 'better-sqlite3';
import { DEFAULT_GROUP, LateClaim, UNSETTLED, type GroupKey, type GroupRecord } from '../ledger.js';
import { immediate } from './transactions.js';

/** `ordered` is the group's own option; `claim_ordered` and `across_names` what its claims go by (ordered-claim.ts claimOrderColumns), where read. */
export type GroupRow = { domain: string; name: string; grp: string; created_position: number; created_at: string; ordered: number; materialized: number | null; claim_ordered?: number; across_names?: number };

export const FIRED = 'NOT EXISTS (SELECT 1 FROM event_scheduled z WHERE z.event_id = e.id AND z.executed IS NULL)';
export const toRecord = (row: GroupRow): GroupRecord => ({
  domain: row.domain,
  name: row.name,
  group: row.grp,
  createdPosition: row.created_position,
  createdAt: row.created_at,
  // As its claims go: an ordered default group sharing its ledger orders it too.
  ordered: (row.claim_ordered ?? row.ordered) === 1,
});

/** The group's filter on event rows `e` (and v4's outcome, default group), as SQL with named parameters. */
export function eventScope(key: GroupKey): string {
  const name = key.name === '*' ? '' : 'AND e.name = @name';
  const settled = key.group === DEFAULT_GROUP ? `AND ${UNSETTLED}` : '';
  return `FROM event e JOIN event_published p ON p.event_id = e.id WHERE e.domain = @domain ${name} AND ${FIRED} ${settled}`;
}

/** The rows of the group's ledger (`d`): the default group of a name takes only that name's rows of the shared ledger. */
export const rowScope = (key: GroupKey): string =>
  `d.domain = @domain AND d.gname = @gname AND d.grp = @grp ${key.group === DEFAULT_GROUP && key.name !== '*' ? 'AND d.name = @name' : ''}`;

/** What the store asks of the ledger's own transactions (sqlite.ts). */
export interface LedgerHooks {
  /** Before each: throws when the store must not write (its file was removed: store-file.ts). */
  check?(): void;
  /** One failed (the store's: its writes are failing, unless the error is a row's). */
  failed?(error: unknown): void;
}

export class LedgerSql {
  readonly #db: Database.Database;
  readonly #cache = new Map<string, Database.Statement>();
  /** The statements `tuples` runs, in raw mode (a statement's mode is its own: kept apart from #cache's). */
  readonly #raw = new Map<string, Database.Statement>();
  readonly #hooks: LedgerHooks;

  constructor(db: Database.Database, hooks: LedgerHooks = {}) {
    this.#db = db;
    this.#hooks = hooks;
  }

  stmt(sql: string): Database.Statement {
    let statement = this.#cache.get(sql);
    if (!statement) this.#cache.set(sql, (statement = this.#db.prepare(sql)));
    return statement;
  }

  get<T>(sql: string, params: object = {}): T | undefined {
    return this.stmt(sql).get(params) as T | undefined;
  }

  all<T>(sql: string, params: object = {}): T[] {
    return this.stmt(sql).all(params) as T[];
  }

  /**
   * `all` with each row as an array, in the statement's column order. better-sqlite3 builds a row
   * object through V8's API, a property at a time: ~1 µs a row of five columns, paid per job by the
   * claims and settles of a drain (bench/README › work); an array, then a literal, costs a fraction.
   */
  tuples<T extends unknown[]>(sql: string, params: object = {}): T[] {
    let statement = this.#raw.get(sql);
    if (!statement) this.#raw.set(sql, (statement = this.#db.prepare(sql).raw(true)));
    return statement.all(params) as T[];
  }

  run(sql: string, params: object = {}): number {
    return this.stmt(sql).run(params).changes;
  }

  immediate<T>(work: () => T): T {
    // Inside another transaction (an append batch's riders, a savepoint): that one checked, and its commit tells.
    if (this.#db.inTransaction) return immediate(this.#db, work);
    try {
      this.#hooks.check?.();
      return immediate(this.#db, work);
    } catch (error) {
      // A claim rolled back for being late is the store being slow, not its writes failing (/readyz).
      if (!(error instanceof LateClaim)) this.#hooks.failed?.(error);
      throw error;
    }
  }

}
