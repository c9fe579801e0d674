/**
 * The SQLite delivery ledger (store/ledger.ts): consumer groups and their work queue on the
 * gateway's own tables. One process writes the file, so a claim is one IMMEDIATE transaction that
 * writes the group's new rows, reads a page of free rows and leases them; `apply` ends a batch of
 * deliveries in one transaction.
 */
import type Database from 'better-sqlite3';
import type { StoredEvent } from '@eventflow/core';
import type { Claimed, ClaimedDead, ClaimRequest, ClaimResult, DeadLetterQuery, DeliveryLedger, DeliveryRef, GroupKey, GroupOptions, GroupRecord, GroupSummary, LedgerAction, LedgerDeadLetter } from '../ledger.js';
import { atHand, CLAIMABLE_V4, DEFAULT_GROUP, deliveryId, keyOf, ledgerColumns, UNSETTLED } from '../ledger.js';
import { COLUMNS, now, toStoredEvent, type EventRow } from './statements.js';

const TABLES = `
CREATE TABLE IF NOT EXISTS eventflow_group (
  domain TEXT NOT NULL, name TEXT NOT NULL, grp TEXT NOT NULL,
  created_position INTEGER NOT NULL, created_at TEXT NOT NULL,
  PRIMARY KEY (domain, name, grp)
);
CREATE TABLE IF NOT EXISTS eventflow_delivery (
  event_id TEXT NOT NULL REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  domain TEXT NOT NULL, gname TEXT NOT NULL, grp TEXT NOT NULL,
  delivery TEXT NULL, owner TEXT NULL, deadline INTEGER NULL, available_at INTEGER NULL,
  attempts INTEGER NOT NULL DEFAULT 0, outcome TEXT NULL, last_error TEXT NULL, updated TEXT NOT NULL,
  PRIMARY KEY (event_id, gname, grp)
);`;

/** Columns added by the work engine (schema version 2) and by tracing to tables that older gateways created. */
const ADDED: ReadonlyArray<readonly [table: string, column: string, ddl: string]> = [
  ['eventflow_group', 'ordered', 'ordered INTEGER NOT NULL DEFAULT 0'],
  ['eventflow_group', 'materialized', 'materialized INTEGER NULL'],
  ['eventflow_delivery', 'position', 'position INTEGER NULL'],
  ['eventflow_delivery', 'pid', 'pid TEXT NULL'],
  ['eventflow_delivery', 'name', 'name TEXT NULL'],
  // When its current (or last) delivery began and when a delivery of it last ended, in ms (tracing: queue and handler time).
  ['eventflow_delivery', 'claimed_at', 'claimed_at INTEGER NULL'],
  ['eventflow_delivery', 'settled_at', 'settled_at INTEGER NULL'],
];

/**
 * Partial indexes: the queue and the per-pid order hold only unsettled rows, so neither a claim nor
 * a count of what is pending grows with the group's history.
 */
const INDEXES = `
DROP INDEX IF EXISTS idx_delivery_group;
DROP INDEX IF EXISTS idx_delivery_id;
DROP INDEX IF EXISTS idx_delivery_owner;
CREATE INDEX IF NOT EXISTS idx_delivery_open ON eventflow_delivery (delivery) WHERE outcome IS NULL AND delivery IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_delivery_groupkey ON eventflow_delivery (domain, gname, grp);
DROP INDEX IF EXISTS idx_delivery_queue;
CREATE INDEX IF NOT EXISTS idx_delivery_free ON eventflow_delivery (domain, gname, grp, deadline, position) WHERE outcome IS NULL;
CREATE INDEX IF NOT EXISTS idx_delivery_pid ON eventflow_delivery (domain, gname, grp, pid, position) WHERE outcome IS NULL;
CREATE INDEX IF NOT EXISTS idx_delivery_dead ON eventflow_delivery (updated) WHERE outcome = 'dead';
CREATE INDEX IF NOT EXISTS idx_delivery_redelivered ON eventflow_delivery (domain, gname, grp) WHERE attempts > 1;
-- The latency view (catalog readLatency): settled rows of an event name by settle time; a row enters it once, with its outcome.
CREATE INDEX IF NOT EXISTS idx_delivery_settled ON eventflow_delivery (domain, name, settled_at) WHERE outcome IS NOT NULL;
`;

const FIRED = 'NOT EXISTS (SELECT 1 FROM event_scheduled z WHERE z.event_id = e.id AND z.executed IS NULL)';
/** Events per claim whose rows are written at most (the watermark moves in steps: bounded transactions). */
const MATERIALIZE_PAGE = 10_000;

type GroupRow = { domain: string; name: string; grp: string; created_position: number; created_at: string; ordered: number; materialized: number | null };
type CandidateRow = EventRow & { attempts: number; last_error: string | null };
type RefRow = { event_id: string; domain: string; gname: string; grp: string; name: string | null; attempts: number };

const toRecord = (row: GroupRow): GroupRecord => ({
  domain: row.domain,
  name: row.name,
  group: row.grp,
  createdPosition: row.created_position,
  createdAt: row.created_at,
  ordered: row.ordered === 1,
});

/** The group's filter on event rows `e` (and v4's outcome, default group), as SQL with named parameters. */
function eventScope(key: GroupKey): string {
  const name = key.name === '*' ? '' : 'AND e.name = @name';
  const settled = key.group === DEFAULT_GROUP ? `AND ${UNSETTLED}` : '';
  return `FROM event e JOIN event_published p ON p.event_id = e.id WHERE e.domain = @domain ${name} AND ${FIRED} ${settled}`;
}

/** The rows of the group's ledger (`d`): the default group of a name takes only that name's rows of the shared ledger. */
const rowScope = (key: GroupKey): string =>
  `d.domain = @domain AND d.gname = @gname AND d.grp = @grp ${key.group === DEFAULT_GROUP && key.name !== '*' ? 'AND d.name = @name' : ''}`;

/** What the claims know of a group: its row, how far its rows are written, when leases were last looked at. */
interface KnownGroup {
  row: GroupRow;
  /** Every event of the group's filter up to this position has its row (the watermark). */
  materialized: number;
  /** When the watermark was last written to the group's row. */
  persistedAt: number;
  /** When a claim last looked for leases that ran out. */
  expiredAt: number;
}

/** How often the watermark is written to the group's row (a restart writes the rows after it again, ignored). */
const PERSIST_MS = 1_000;
/**
 * How often a claim looks for leases that ran out (a gateway of another life left them): one index
 * range more per claim otherwise, for what happens after a crash.
 */
const EXPIRED_CHECK_MS = 250;

export class SqliteLedger implements DeliveryLedger {
  readonly #db: Database.Database;
  readonly #cache = new Map<string, Database.Statement>();
  /**
   * The groups as the claims know them. One gateway writes the file (the store's lock), and its
   * group changes go through this ledger, so they stay true; ensureGroup and deleteGroup drop them.
   */
  readonly #known = new Map<string, KnownGroup>();

  constructor(db: Database.Database) {
    this.#db = db;
    db.function('eventflow_delivery_id', { deterministic: true }, (secret: unknown, eventId: unknown) => deliveryId(String(secret), String(eventId)));
    db.transaction(() => {
      db.exec(TABLES);
      for (const [table, column, ddl] of ADDED) {
        const columns = db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>;
        if (columns.some((existing) => existing.name === column)) continue;
        db.exec(`ALTER TABLE ${table} ADD COLUMN ${ddl}`);
        // Rows written before the queue columns existed: from their event.
        if (table === 'eventflow_delivery' && column === 'name') {
          db.exec(`UPDATE eventflow_delivery SET position = (SELECT e.position FROM event e WHERE e.id = event_id),
            pid = (SELECT e.pid FROM event e WHERE e.id = event_id), name = (SELECT e.name FROM event e WHERE e.id = event_id)`);
        }
      }
      db.exec(INDEXES);
    }).immediate();
  }

  #stmt(sql: string): Database.Statement {
    let statement = this.#cache.get(sql);
    if (!statement) this.#cache.set(sql, (statement = this.#db.prepare(sql)));
    return statement;
  }

  #get<T>(sql: string, params: object = {}): T | undefined {
    return this.#stmt(sql).get(params) as T | undefined;
  }

  #all<T>(sql: string, params: object = {}): T[] {
    return this.#stmt(sql).all(params) as T[];
  }

  #run(sql: string, params: object = {}): number {
    return this.#stmt(sql).run(params).changes;
  }

  /** One transaction function for all: better-sqlite3 builds a wrapper per db.transaction() call. */
  readonly #transaction = (work: () => unknown): unknown => work();
  #wrapped: Database.Transaction<(work: () => unknown) => unknown> | undefined;

  #immediate<T>(work: () => T): T {
    this.#wrapped ??= this.#db.transaction(this.#transaction);
    return this.#wrapped.immediate(work) as T;
  }

  #groupRow(key: GroupKey): GroupRow | undefined {
    return this.#get<GroupRow>(`SELECT * FROM eventflow_group WHERE domain = @domain AND name = @name AND grp = @group`, key);
  }

  #knownGroup(key: GroupKey): KnownGroup | undefined {
    const id = `${key.domain}\u0000${key.name}\u0000${key.group}`;
    let known = this.#known.get(id);
    if (!known) {
      const row = this.#groupRow(key);
      if (!row) return undefined;
      known = { row, materialized: row.materialized ?? row.created_position, persistedAt: 0, expiredAt: 0 };
      this.#known.set(id, known);
    }
    return known;
  }

  #forget(key: GroupKey): void {
    this.#known.delete(`${key.domain}\u0000${key.name}\u0000${key.group}`);
  }

  async ensureGroup(key: GroupKey, options: Partial<GroupOptions> = {}): Promise<GroupRecord> {
    this.#forget(key);
    return this.#immediate(() => {
      const ordered = options.ordered === undefined ? 0 : Number(options.ordered);
      this.#run(
        `INSERT OR IGNORE INTO eventflow_group (domain, name, grp, created_position, created_at, ordered)
         VALUES (@domain, @name, @group, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'event'), 0), @now, @ordered)`,
        { ...key, now: now(), ordered },
      );
      if (options.ordered !== undefined) this.#run(`UPDATE eventflow_group SET ordered = @ordered WHERE domain = @domain AND name = @name AND grp = @group`, { ...key, ordered });
      return toRecord(this.#groupRow(key) as GroupRow);
    });
  }

  async group(key: GroupKey): Promise<GroupRecord | undefined> {
    const row = this.#groupRow(key);
    return row && toRecord(row);
  }

  async deleteGroup(key: GroupKey): Promise<boolean> {
    this.#forget(key);
    return this.#immediate(() => {
      const deleted = this.#run(`DELETE FROM eventflow_group WHERE domain = @domain AND name = @name AND grp = @group`, key) > 0;
      // The default group's rows are v4's claim and outcome: they stay with the event.
      if (deleted && key.group !== DEFAULT_GROUP) this.#run(`DELETE FROM eventflow_delivery WHERE domain = @domain AND gname = @name AND grp = @group`, key);
      return deleted;
    });
  }

  async countGroups(domain: string): Promise<number> {
    return this.#get<{ n: number }>(`SELECT COUNT(*) AS n FROM eventflow_group WHERE domain = @domain`, { domain })?.n ?? 0;
  }

  async groups(at: number, domains?: readonly string[]): Promise<GroupSummary[]> {
    const only = domains === undefined ? '' : 'AND domain IN (SELECT value FROM json_each(@domains))';
    const params = { now: at, domains: JSON.stringify(domains ?? []) };
    const rows = this.#all<GroupRow>(`SELECT * FROM eventflow_group WHERE 1 = 1 ${only} ORDER BY domain, name, grp`, params);
    type Count = { domain: string; gname: string; grp: string; name: string | null; n: number; inFlight: number; oldest: number | null };
    // Per ledger and event name: the default groups of a domain share one ledger and take their own names of it.
    const tally = (sql: string) => this.#all<Count>(sql, params);
    const open = tally(
      `SELECT domain, gname, grp, name, COUNT(*) AS n, SUM(CASE WHEN deadline > @now THEN 1 ELSE 0 END) AS inFlight, MIN(position) AS oldest
       FROM eventflow_delivery WHERE outcome IS NULL ${only} GROUP BY domain, gname, grp, name`,
    );
    const dead = tally(`SELECT domain, gname, grp, name, COUNT(*) AS n, 0 AS inFlight, NULL AS oldest FROM eventflow_delivery WHERE outcome = 'dead' ${only} GROUP BY domain, gname, grp, name`);
    const redelivered = tally(`SELECT domain, gname, grp, name, COUNT(*) AS n, 0 AS inFlight, NULL AS oldest FROM eventflow_delivery WHERE attempts > 1 ${only} GROUP BY domain, gname, grp, name`);
    const sum = (counts: Count[], record: GroupRecord) => {
      const { gname, grp } = ledgerColumns(record);
      const mine = counts.filter((c) => c.domain === record.domain && c.gname === gname && c.grp === grp && (record.group !== DEFAULT_GROUP || record.name === '*' || c.name === record.name));
      return {
        n: mine.reduce((total, c) => total + c.n, 0),
        inFlight: mine.reduce((total, c) => total + c.inFlight, 0),
        oldest: mine.reduce<number | undefined>((low, c) => (c.oldest === null ? low : Math.min(low ?? Infinity, c.oldest)), undefined),
      };
    };
    return rows.map((row) => {
      const record = toRecord(row);
      const unsettled = sum(open, record);
      // Events after the watermark have no row yet: pending all the same.
      // (The watermark in the row lags the claims' by up to PERSIST_MS: rows already written are not counted twice.)
      const later = this.#get<{ n: number; first: number | null }>(
        `SELECT COUNT(*) AS n, MIN(e.position) AS first ${eventScope(record)} AND e.position > @after
           AND NOT EXISTS (SELECT 1 FROM eventflow_delivery r WHERE r.event_id = e.id AND r.gname = @gname AND r.grp = @grp)`,
        { domain: record.domain, name: record.name, after: row.materialized ?? row.created_position, ...ledgerColumns(record) },
      );
      const oldest = unsettled.oldest ?? later?.first ?? undefined;
      const timestamp = oldest === undefined ? undefined : this.#get<{ timestamp: string }>(`SELECT timestamp FROM event WHERE position = @oldest`, { oldest })?.timestamp;
      return {
        ...record,
        pending: unsettled.n - unsettled.inFlight + (later?.n ?? 0),
        inFlight: unsettled.inFlight,
        redelivered: sum(redelivered, record).n,
        deadLetters: sum(dead, record).n,
        oldestPendingAt: timestamp,
      };
    });
  }

  async consumed(domain: string, name: string): Promise<boolean> {
    return this.#get(`SELECT 1 AS one FROM eventflow_group WHERE domain = @domain AND name IN (@name, '*') LIMIT 1`, { domain, name }) !== undefined;
  }

  /**
   * Writes the group's rows for the events published after its watermark, up to `upTo` (a position
   * routed here, committed) or the head, at most MATERIALIZE_PAGE events of the domain at a time.
   * Returns the new watermark (the caller keeps it once the transaction commits).
   */
  #materialize(known: KnownGroup, key: GroupKey, updated: string, upTo: number | undefined, at: number): number {
    const from = known.materialized;
    const head = upTo !== undefined && upTo > from ? upTo : (this.#get<{ seq: number }>(`SELECT seq FROM sqlite_sequence WHERE name = 'event'`)?.seq ?? 0);
    if (head <= from) return from;
    const params = { domain: key.domain, name: key.name, from, ...ledgerColumns(key), updated, skip: MATERIALIZE_PAGE - 1 };
    // A long way behind (a backlog, a group without members for a while): a bounded step.
    const far = head - from > MATERIALIZE_PAGE ? this.#get<{ position: number }>(`SELECT e.position FROM event e WHERE e.domain = @domain AND e.position > @from ORDER BY e.position LIMIT 1 OFFSET @skip`, params) : undefined;
    const to = far?.position ?? head;
    this.#run(
      `INSERT OR IGNORE INTO eventflow_delivery (event_id, domain, gname, grp, position, pid, name, attempts, updated)
       SELECT e.id, e.domain, @gname, @grp, e.position, e.pid, e.name, 0, @updated ${eventScope(key)} AND e.position > @from AND e.position <= @to`,
      { ...params, to },
    );
    if (at - known.persistedAt >= PERSIST_MS) {
      this.#run(`UPDATE eventflow_group SET materialized = @to WHERE domain = @domain AND name = @name AND grp = @group AND COALESCE(materialized, 0) < @to`, { ...key, to });
    }
    return to;
  }

  async claim({ group: key, owner, consumer, secret, deadline, now: at, limit, maxAttempts, known, upTo }: ClaimRequest): Promise<ClaimResult> {
    const cached = this.#knownGroup(key);
    // Deleted: nothing to claim until it is created again.
    if (!cached) return { claimed: [], dead: [], nextDue: undefined, missing: true };
    let watermark = cached.materialized;
    const lookForExpired = at - cached.expiredAt >= EXPIRED_CHECK_MS;
    const result = this.#immediate((): ClaimResult => {
      const updated = now();
      const group = cached.row;
      watermark = this.#materialize(cached, key, updated, upTo, at);
      const v4 = key.group === DEFAULT_GROUP;
      const params = { domain: key.domain, name: key.name, ...ledgerColumns(key), created: group.created_position, now: at, limit: Math.max(0, limit), owner, consumer, deadline, updated, secret, max: maxAttempts };
      // The page: leases that ran out (their gateways died or stalled), then rows with no lease in
      // position order (an ordered group's first unsettled row of each pid only). The index ranges
      // over deadlines: the expired ones, then the NULLs.
      const filter = `${rowScope(key)} AND d.outcome IS NULL AND d.position > @created
           ${v4 ? `AND ${CLAIMABLE_V4}` : ''}
           ${group.ordered === 1 ? `AND NOT EXISTS (SELECT 1 FROM eventflow_delivery o WHERE o.domain = d.domain AND o.gname = d.gname AND o.grp = d.grp AND o.pid = d.pid AND o.position < d.position AND o.outcome IS NULL ${v4 && key.name !== '*' ? 'AND o.name = d.name' : ''})` : ''}`;
      const from = `FROM eventflow_delivery d ${v4 ? 'JOIN event_published p ON p.event_id = d.event_id' : ''}`;
      const free = `SELECT d.rowid ${from} WHERE ${filter} AND d.deadline IS NULL AND (d.available_at IS NULL OR d.available_at <= @now) ORDER BY d.position LIMIT @limit`;
      const page = !lookForExpired
        ? free
        : `SELECT rowid FROM (
           SELECT * FROM (SELECT d.rowid, 0 AS k, d.deadline AS o ${from} WHERE ${filter} AND d.deadline <= @now ORDER BY d.deadline LIMIT @limit)
           UNION ALL SELECT * FROM (SELECT d.rowid, 1 AS k, d.position AS o ${from} WHERE ${filter} AND d.deadline IS NULL AND (d.available_at IS NULL OR d.available_at <= @now) ORDER BY d.position LIMIT @limit)
         ) ORDER BY k, o LIMIT @limit`;
      const all = this.#all<{ event_id: string; attempts: number; delivery: string; position: number; last_error: string | null }>(
        `UPDATE eventflow_delivery SET delivery = eventflow_delivery_id(@secret, event_id), owner = @owner, deadline = @deadline, available_at = NULL, attempts = attempts + 1, updated = @updated, claimed_at = @now
         WHERE rowid IN (${page}) RETURNING event_id, attempts, delivery, position, last_error`,
        params,
      );
      // Out of attempts (a lease that ran out on the last one, say): a dead letter, not a delivery.
      // Rare, so taken back here rather than looked for by every claim.
      const spent = all.filter((row) => row.attempts - 1 >= maxAttempts).map((row) => ({ ...row, attempts: row.attempts - 1 }));
      const taken = spent.length === 0 ? all : all.filter((row) => row.attempts - 1 < maxAttempts);
      for (const row of spent) {
        const error = row.last_error ?? 'lease expired';
        this.#run(`UPDATE eventflow_delivery SET outcome = 'dead', attempts = @attempts, last_error = @error, deadline = NULL, owner = NULL, updated = @updated, settled_at = @now WHERE event_id = @id AND gname = @gname AND grp = @grp`, {
          ...params,
          id: row.event_id,
          attempts: row.attempts,
          error,
        });
        if (!v4) continue;
        this.#run(`UPDATE event_published SET failed = @updated WHERE event_id = @id AND success IS NULL AND failed IS NULL`, { id: row.event_id, updated });
        this.#run(`INSERT OR REPLACE INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (@id, @attempts, @error, @updated)`, { id: row.event_id, attempts: row.attempts, error, updated });
      }
      taken.sort((a, b) => a.position - b.position);
      if (taken.length > 0 && v4) {
        this.#run(`UPDATE event_published SET consumed_spoke = @updated, consumer = @consumer WHERE event_id IN (SELECT value FROM json_each(@ids))`, {
          ids: JSON.stringify(taken.map((row) => row.event_id)),
          updated,
          consumer,
        });
      }
      const events = this.#events([...spent, ...taken].map((row) => row.event_id), known);
      const claimed: Claimed[] = [];
      for (const row of taken) {
        const event = events.get(row.event_id);
        if (event) claimed.push({ event, delivery: row.delivery, attempt: row.attempts });
      }
      const dead: ClaimedDead[] = [];
      for (const row of spent) {
        const event = events.get(row.event_id);
        if (event) dead.push({ event, attempts: row.attempts, lastError: row.last_error ?? 'lease expired' });
      }
      const nextDue =
        spent.length + taken.length < limit
          ? (this.#get<{ next: number | null }>(
              `SELECT MIN(CASE WHEN d.deadline > @now THEN d.deadline ELSE d.available_at END) AS next FROM eventflow_delivery d
               WHERE ${rowScope(key)} AND d.outcome IS NULL AND (d.deadline > @now OR d.available_at > @now)`,
              params,
            )?.next ?? undefined)
          : undefined;
      return { claimed, dead, nextDue, missing: false };
    });
    // Committed: what the claim wrote and looked at is known from now on.
    if (watermark > cached.materialized && at - cached.persistedAt >= PERSIST_MS) cached.persistedAt = at;
    cached.materialized = watermark;
    if (lookForExpired) cached.expiredAt = at;
    return result;
  }

  /** The events of `ids`: those at hand, the rest read in one statement. */
  #events(ids: readonly string[], known: ((id: string) => StoredEvent | undefined) | undefined): Map<string, StoredEvent> {
    const { events, missing } = atHand(ids, known);
    if (missing.length > 0) {
      for (const row of this.#all<EventRow>(`SELECT ${COLUMNS} FROM event e WHERE e.id IN (SELECT value FROM json_each(@ids))`, { ids: JSON.stringify(missing) })) {
        events.set(row.id, toStoredEvent(row));
      }
    }
    return events;
  }

  async apply(actions: readonly LedgerAction[]): Promise<Array<DeliveryRef | undefined>> {
    return this.#immediate(() => {
      const updated = now();
      const at = Date.now();
      // One action per delivery: the first (a batch may hold a settle and a release of one delivery).
      const first = new Map<string, LedgerAction>();
      for (const action of actions) if (!first.has(action.delivery)) first.set(action.delivery, action);
      const ended = new Map<string, RefRow>();
      // Outcomes and dead letters in one statement. A settled row keeps its delivery id (its outcome
      // makes the id void), so that the statement can say which deliveries it ended.
      const outcomes = [...first.values()].filter((action) => action.kind !== 'release');
      if (outcomes.length > 0) {
        const rows = JSON.stringify(outcomes.map((action) => ({ d: action.delivery, o: action.kind === 'dead' ? 'dead' : action.kind === 'outcome' ? action.outcome : null, e: action.error ?? null })));
        for (const row of this.#all<RefRow & { delivery: string }>(
          `UPDATE eventflow_delivery AS d SET outcome = j.o, last_error = j.e, deadline = NULL, updated = @updated, settled_at = @at
           FROM (SELECT json_extract(value, '$.d') AS dl, json_extract(value, '$.o') AS o, json_extract(value, '$.e') AS e FROM json_each(@rows)) AS j
           WHERE d.delivery = j.dl AND d.outcome IS NULL
           RETURNING delivery, event_id, domain, gname, grp, name, attempts`,
          { rows, updated, at },
        )) {
          ended.set(row.delivery, row);
        }
        const v4 = outcomes.filter((action) => ended.get(action.delivery)?.grp === DEFAULT_GROUP);
        for (const column of ['success', 'failed'] as const) {
          const ids = v4.filter((action) => (column === 'success' ? action.kind === 'outcome' && action.outcome === 'success' : !(action.kind === 'outcome' && action.outcome === 'success')));
          if (ids.length === 0) continue;
          this.#run(`UPDATE event_published SET ${column} = @updated WHERE event_id IN (SELECT value FROM json_each(@ids)) AND success IS NULL AND failed IS NULL`, {
            updated,
            ids: JSON.stringify(ids.map((action) => ended.get(action.delivery)?.event_id)),
          });
        }
        for (const action of v4) {
          if (action.kind !== 'dead') continue;
          const row = ended.get(action.delivery) as RefRow;
          this.#run(`INSERT OR REPLACE INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (@id, @attempts, @error, @updated)`, { id: row.event_id, attempts: row.attempts, error: action.error, updated });
        }
      }
      // Releases (rarer) one by one: the delivery id is voided, so the row is read first.
      for (const action of first.values()) {
        if (action.kind !== 'release') continue;
        const row = this.#current(action.delivery);
        if (!row) continue;
        const uncount = action.uncount ? 1 : 0;
        this.#run(
          `UPDATE eventflow_delivery SET delivery = NULL, owner = NULL, deadline = NULL, available_at = @availableAt, last_error = COALESCE(@error, last_error),
             attempts = MAX(0, attempts - @uncount), updated = @updated, settled_at = @at WHERE event_id = @id AND gname = @gname AND grp = @grp`,
          { id: row.event_id, gname: row.gname, grp: row.grp, availableAt: action.availableAt ?? null, error: action.error ?? null, uncount, updated, at },
        );
        if (row.grp === DEFAULT_GROUP) this.#unclaim(row.event_id);
        ended.set(action.delivery, { ...row, attempts: Math.max(0, row.attempts - uncount) });
      }
      return actions.map((action) => {
        const row = first.get(action.delivery) === action ? ended.get(action.delivery) : undefined;
        return row && { key: keyOf(row.domain, row.gname, row.grp, row.name ?? ''), eventId: row.event_id, attempts: row.attempts };
      });
    });
  }

  #current(delivery: string): RefRow | undefined {
    return this.#get<RefRow>(`SELECT event_id, domain, gname, grp, name, attempts FROM eventflow_delivery WHERE delivery = @delivery AND outcome IS NULL`, { delivery });
  }

  async delivery(delivery: string): Promise<(DeliveryRef & { domain: string }) | undefined> {
    const row = this.#current(delivery);
    return row && { key: keyOf(row.domain, row.gname, row.grp, row.name ?? ''), eventId: row.event_id, attempts: row.attempts, domain: row.domain };
  }

  async extend(delivery: string, deadline: number): Promise<boolean> {
    return this.#run(`UPDATE eventflow_delivery SET deadline = @deadline WHERE delivery = @delivery AND outcome IS NULL`, { delivery, deadline }) > 0;
  }

  /** The default group's v4 claim back to NULL (the lease being released is the claim). */
  #unclaim(eventId: string): void {
    this.#run(`UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id = @id AND success IS NULL AND failed IS NULL`, { id: eventId });
  }

  async releaseOwner(owner: string): Promise<number> {
    return this.#immediate(() => {
      const rows = this.#all<{ event_id: string; grp: string }>(`SELECT event_id, grp FROM eventflow_delivery WHERE owner = @owner AND outcome IS NULL AND deadline IS NOT NULL`, { owner });
      this.#run(
        `UPDATE eventflow_delivery SET delivery = NULL, owner = NULL, deadline = NULL, attempts = MAX(0, attempts - 1) WHERE owner = @owner AND outcome IS NULL AND deadline IS NOT NULL`,
        { owner },
      );
      for (const row of rows) if (row.grp === DEFAULT_GROUP) this.#unclaim(row.event_id);
      return rows.length;
    });
  }

  async deadLetters({ domain, limit, offset }: DeadLetterQuery): Promise<LedgerDeadLetter[]> {
    const where = domain === undefined ? '' : 'AND d.domain = @domain';
    const rows = this.#all<{ eventId: string; domain: string; name: string; pid: string; gname: string; grp: string; attempts: number; lastError: string | null; at: string }>(
      `SELECT d.event_id AS eventId, e.domain, e.name, e.pid, d.gname, d.grp, d.attempts, d.last_error AS lastError, d.updated AS at
       FROM eventflow_delivery d JOIN event e ON e.id = d.event_id WHERE d.outcome = 'dead' ${where}
       ORDER BY d.updated DESC, d.rowid DESC LIMIT @limit OFFSET @offset`,
      { domain: domain ?? null, limit, offset },
    );
    return rows.map(({ gname, grp, lastError, ...row }) => ({ ...row, consumes: keyOf(row.domain, gname, grp, row.name).name, group: grp, lastError: lastError ?? '' }));
  }

  async requeue(key: GroupKey, eventId: string): Promise<boolean> {
    const params = { id: eventId, domain: key.domain, ...ledgerColumns(key), updated: now() };
    return this.#immediate(() => {
      const changed = this.#run(
        `UPDATE eventflow_delivery SET outcome = NULL, attempts = 0, deadline = NULL, available_at = NULL, delivery = NULL, owner = NULL, updated = @updated
         WHERE event_id = @id AND gname = @gname AND grp = @grp AND domain = @domain AND outcome = 'dead'`,
        params,
      );
      if (changed === 0) return false;
      if (key.group === DEFAULT_GROUP) {
        this.#run(`UPDATE event_published SET failed = NULL, consumed_spoke = NULL, consumer = NULL WHERE event_id = @id`, params);
        this.#run(`DELETE FROM eventflow_dead_letter WHERE event_id = @id`, params);
      }
      return true;
    });
  }

  async discard(key: GroupKey, eventId: string): Promise<boolean> {
    const params = { id: eventId, domain: key.domain, ...ledgerColumns(key), updated: now() };
    return this.#immediate(() => {
      const changed = this.#run(
        `UPDATE eventflow_delivery SET outcome = 'discarded', updated = @updated WHERE event_id = @id AND gname = @gname AND grp = @grp AND domain = @domain AND outcome = 'dead'`,
        params,
      );
      if (changed > 0 && key.group === DEFAULT_GROUP) this.#run(`DELETE FROM eventflow_dead_letter WHERE event_id = @id`, params);
      return changed > 0;
    });
  }
}
