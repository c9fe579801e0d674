/**
 * The SQLite delivery ledger (store/ledger.ts): consumer groups and their work queue on the
 * gateway's own tables. One process writes the file, so a claim is one IMMEDIATE transaction that
 * leases a page of the group's free rows and, for the rest of the page, writes new rows leased
 * (group-rows.ts); `apply` ends a batch of deliveries in one transaction.
 */
import type Database from 'better-sqlite3';
import type { StoredEvent } from '@eventflow/core';
import type { AppendClaimer, Claimed, ClaimedDead, ClaimRequest, ClaimResult, DeadLetterQuery, DeliveryLedger, DeliveryRef, GroupKey, GroupOptions, GroupRecord, GroupSummary, LedgerAction, LedgerDeadLetter } from '../ledger.js';
import { atHand, checkInTime, CLAIMABLE_V4, DEFAULT_GROUP, deliveryPrefix, keyOf, ledgerColumns } from '../ledger.js';
import { COLUMNS, fromTuple, now, toStoredEvent, type EventTuple } from './statements.js';
import { LedgerSql, rowScope, toRecord, type GroupRow, type LedgerHooks } from './ledger-sql.js';
import { SqliteLedgerOperator } from './ledger-operator.js';
import { AppendClaims } from './append-claims.js';
import { ADDED, INDEXES, TABLES } from './ledger-schema.js';
import { claimOrderColumns, orderedClaimable } from '../ordered-claim.js';
import { GroupRows, PAGE_SIZES, PERSIST_MS, TAKEN, type KnownGroup, type Taken, type TakenTuple } from './group-rows.js';

type RefRow = { event_id: string; domain: string; gname: string; grp: string; name: string | null; attempts: number; deadline: number | null };


/** `consumed` answers kept at most (see #consumed). */
const CONSUMED_KEPT = 4096;
/**
 * How often a claim looks for leases that ran out (a gateway of another life left them): one index
 * range more per claim otherwise, for what happens after a crash.
 */
const EXPIRED_CHECK_MS = 250;

export class SqliteLedger implements DeliveryLedger {
  readonly #db: Database.Database;
  readonly #sql: LedgerSql;
  /** The groups' rows and watermarks (group-rows.ts). */
  readonly #rows: GroupRows;
  /** The listings and the dead letters' operations (ledger-operator.ts). */
  readonly #operator: SqliteLedgerOperator;
  /**
   * The groups as the claims know them. One gateway writes the file (the store's lock), and its
   * group changes go through this ledger, so they stay true; ensureGroup and deleteGroup drop them.
   */
  readonly #known = new Map<string, KnownGroup>();
  /** The groups whose events are leased as they are appended (append-claims.ts). */
  readonly #atAppend: AppendClaims;
  /**
   * `consumed` by domain and name: asked by every publish that requires a consumer (request()),
   * and a read outside a transaction costs a snapshot. True for as long as the groups stay as they
   * are, which only this ledger changes (#forget empties it).
   */
  readonly #consumed = new Map<string, boolean>();

  /** `hooks`: the store's check before each write of the ledger, and what a failed one tells it (sqlite.ts). */
  constructor(db: Database.Database, hooks?: LedgerHooks) {
    this.#db = db;
    this.#sql = new LedgerSql(db, hooks);
    this.#rows = new GroupRows(this.#sql);
    this.#operator = new SqliteLedgerOperator(this.#sql);
    this.#atAppend = new AppendClaims(this.#sql, (key) => this.#known.get(`${key.domain}\u0000${key.name}\u0000${key.group}`), (key) => this.#rows.pidsRead(key));
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

  #groupRow(key: GroupKey): GroupRow | undefined {
    return this.#sql.get<GroupRow>(`SELECT g.*, ${claimOrderColumns('g')} FROM eventflow_group g WHERE g.domain = @domain AND g.name = @name AND g.grp = @group`, key);
  }

  #knownGroup(key: GroupKey): KnownGroup | undefined {
    const id = `${key.domain}\u0000${key.name}\u0000${key.group}`;
    let known = this.#known.get(id);
    if (!known) {
      const row = this.#groupRow(key);
      if (!row) return undefined;
      const stored = row.materialized ?? row.created_position;
      known = { row, materialized: stored, stored, persistedAt: 0, expiredAt: 0 };
      this.#known.set(id, known);
    }
    return known;
  }

  #forget(key: GroupKey): void {
    this.#consumed.clear();
    this.#rows.forgetPids();
    this.#known.delete(`${key.domain}\u0000${key.name}\u0000${key.group}`);
    this.#atAppend.forget(key);
  }

  claimAtAppend(group: GroupRecord, claimer: AppendClaimer | undefined): void {
    // The gateway's record may predate an ordered default group sharing this one's ledger.
    this.#atAppend.set(group, this.#knownGroup(group)?.row.claim_ordered === 1 ? undefined : claimer);
  }

  /** In an append's transaction (sqlite.ts): the waiting groups lease the batch's routed events. */
  leaseAppended(published: readonly StoredEvent[], before: number, after: number): void {
    this.#atAppend.lease(published, before, after);
  }

  /** The append's transaction ended (committed or not): its leases go to their groups, or are given up. */
  appendEnded(committed: boolean): void {
    this.#atAppend.ended(committed);
  }

  async ensureGroup(key: GroupKey, options: Partial<GroupOptions> = {}): Promise<GroupRecord> {
    this.#forget(key);
    return this.#sql.immediate(() => {
      const ordered = options.ordered === undefined ? 0 : Number(options.ordered);
      // Written only when it changes: every member's registration (each reconnect of each worker) rewrote the group's
      // row and, for an ordered group, went over every unsettled row of its backlog for pids it had already.
      const before = this.#groupRow(key)?.ordered;
      this.#sql.run(
        `INSERT OR IGNORE INTO eventflow_group (domain, name, grp, created_position, created_at, ordered)
         VALUES (@domain, @name, @group, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'event'), 0), @now, @ordered)`,
        { ...key, now: now(), ordered },
      );
      const changed = options.ordered !== undefined && before !== undefined && before !== ordered;
      if (changed) this.#sql.run(`UPDATE eventflow_group SET ordered = @ordered WHERE domain = @domain AND name = @name AND grp = @group`, { ...key, ordered });
      // The domain's other default groups claim by it too (claimOrderColumns): read again, and not leased at append meanwhile;
      // also when it is new (an ordered one recorded after them: before, their cached rows went on unordered for good).
      if (key.group === DEFAULT_GROUP && (changed || (before === undefined && ordered === 1))) {
        for (const { row } of this.#known.values()) {
          // Those it shares claims with: the `*` group's with every name's (claimOrderColumns).
          if (row.domain === key.domain && row.grp === DEFAULT_GROUP && (key.name === '*' || row.name === '*')) this.#forget({ domain: key.domain, name: row.name, group: DEFAULT_GROUP });
        }
      }
      // Ordered from now on: the rows written while no ordered group read them get their pids.
      if (ordered === 1 && before !== 1) {
        this.#sql.run(
          `UPDATE eventflow_delivery SET pid = (SELECT e.pid FROM event e WHERE e.id = event_id)
           WHERE domain = @domain AND gname = @gname AND grp = @grp AND outcome IS NULL AND pid IS NULL`,
          { domain: key.domain, ...ledgerColumns(key) },
        );
      }
      return toRecord(this.#groupRow(key) as GroupRow);
    });
  }

  async group(key: GroupKey): Promise<GroupRecord | undefined> {
    const row = this.#groupRow(key);
    return row && toRecord(row);
  }

  async deleteGroup(key: GroupKey): Promise<boolean> {
    this.#forget(key);
    return this.#sql.immediate(() => {
      const deleted = this.#sql.run(`DELETE FROM eventflow_group WHERE domain = @domain AND name = @name AND grp = @group`, key) > 0;
      // The default group's rows are v4's claim and outcome: they stay with the event.
      if (deleted && key.group !== DEFAULT_GROUP) this.#sql.run(`DELETE FROM eventflow_delivery WHERE domain = @domain AND gname = @name AND grp = @group`, key);
      return deleted;
    });
  }

  countGroups(domain: string): Promise<number> {
    return this.#operator.countGroups(domain);
  }

  groups(at: number, domains?: readonly string[], patterns?: readonly string[]): Promise<GroupSummary[]> {
    // The claims' watermarks (committed): the one in a group's row lags by up to PERSIST_MS, and the events
    // after it are counted one by one. Right after a drain that was every event of it, at each listing.
    return this.#operator.groups(at, domains, patterns, (key) => this.#known.get(`${key.domain}\u0000${key.name}\u0000${key.group}`)?.materialized);
  }

  deadLetters(query: DeadLetterQuery): Promise<LedgerDeadLetter[]> {
    return this.#operator.deadLetters(query);
  }

  requeue(key: GroupKey, eventId: string): Promise<boolean> {
    return this.#operator.requeue(key, eventId);
  }

  discard(key: GroupKey, eventId: string): Promise<boolean> {
    return this.#operator.discard(key, eventId);
  }

  async consumed(domain: string, name: string): Promise<boolean> {
    const id = `${domain}\u0000${name}`;
    let consumed = this.#consumed.get(id);
    if (consumed === undefined) {
      consumed = this.#sql.get(`SELECT 1 AS one FROM eventflow_group WHERE domain = @domain AND name IN (@name, '*') LIMIT 1`, { domain, name }) !== undefined;
      // Bounded: names published to by requests are few; a client making up names just empties it.
      if (this.#consumed.size >= CONSUMED_KEPT) this.#consumed.clear();
      this.#consumed.set(id, consumed);
    }
    return consumed;
  }

  async claim({ group: key, owner, consumer, deadline, now: at, limit, maxAttempts, known, upTo, held = [], clock }: ClaimRequest): Promise<ClaimResult> {
    const cached = this.#knownGroup(key);
    // Deleted: nothing to claim until it is created again.
    if (!cached) return { claimed: [], dead: [], nextDue: undefined, missing: true };
    let watermark = cached.materialized;
    let persisted = false;
    const lookForExpired = at - cached.expiredAt >= EXPIRED_CHECK_MS;
    const result = this.#sql.immediate((): ClaimResult => {
      const updated = now();
      const group = cached.row;
      // An ordered group reads the first unsettled row of each pid: its rows are written ahead.
      if (group.claim_ordered === 1) watermark = this.#rows.materialize(cached, key, updated, upTo);
      const v4 = key.group === DEFAULT_GROUP;
      const params = { domain: key.domain, name: key.name, ...ledgerColumns(key), created: group.created_position, now: at, limit: Math.max(0, Math.min(2 * PAGE_SIZES - 1, Math.floor(limit))), prefix: deliveryPrefix(), owner, consumer, deadline, updated, max: maxAttempts, held: JSON.stringify(held) };
      // Leases that ran out with a report still to be written here (ClaimRequest.held) stay as they are.
      const keep = held.length > 0 ? 'AND d.delivery NOT IN (SELECT value FROM json_each(@held))' : '';
      // The page: leases that ran out (their gateways died or stalled), then rows with no lease in
      // position order (an ordered group's first unsettled row of each pid only). The index ranges
      // over deadlines: the expired ones, then the NULLs.
      const filter = `${rowScope(key)} AND d.outcome IS NULL AND d.position > @created
           ${v4 ? `AND ${CLAIMABLE_V4}` : ''}
           ${group.claim_ordered === 1 ? `AND ${orderedClaimable('@now', v4 && group.across_names !== 1, '@created')}` : ''}`;
      const from = `FROM eventflow_delivery d ${v4 ? 'JOIN event_published p ON p.event_id = d.event_id' : ''}`;
      const free = (size: number): string =>
        `SELECT d.rowid ${from} WHERE ${filter} AND d.deadline IS NULL AND (d.available_at IS NULL OR d.available_at <= @now) ORDER BY d.position LIMIT ${size}`;
      const page = (size: number): string =>
        !lookForExpired
          ? free(size)
          : `SELECT rowid FROM (
           SELECT * FROM (SELECT d.rowid, 0 AS k, d.deadline AS o ${from} WHERE ${filter} AND d.deadline <= @now ${keep} ORDER BY d.deadline LIMIT ${size})
           UNION ALL SELECT * FROM (${free(size).replace('SELECT d.rowid', 'SELECT d.rowid, 1 AS k, d.position AS o')})
         ) ORDER BY k, o LIMIT ${size}`;
      const all: Taken[] = [];
      // The page in literal sizes (a LIMIT bound as a parameter makes SQLite prepare the statement
      // again at every run: ~50 µs a claim), the largest first: `limit` in binary, a statement per
      // bit set, each cached; the next taking up where the last left off, until one comes up short.
      for (let size = PAGE_SIZES; size >= 1; size >>= 1) {
        if ((params.limit & size) === 0) continue;
        const taken = this.#sql.tuples<TakenTuple>(
          `UPDATE eventflow_delivery SET delivery = @prefix || lower(hex(randomblob(16))), owner = @owner, deadline = @deadline, available_at = NULL, attempts = attempts + 1, updated = @updated, claimed_at = @now
           WHERE rowid IN (${page(size)}) RETURNING ${TAKEN}`,
          params,
        );
        for (const [event_id, attempts, delivery, position, last_error] of taken) all.push({ event_id, attempts, delivery: delivery as string, position, last_error });
        if (taken.length < size) break;
      }
      if (group.claim_ordered !== 1 && all.length < params.limit) {
        const fresh = this.#rows.leaseNew(cached, key, params, params.limit - all.length, upTo);
        all.push(...fresh.taken);
        watermark = fresh.watermark;
      }
      // Out of attempts (a lease that ran out on the last one, say): a dead letter, not a delivery.
      // Rare, so taken back here rather than looked for by every claim.
      const spent = all.filter((row) => row.attempts - 1 >= maxAttempts).map((row) => ({ ...row, attempts: row.attempts - 1 }));
      const taken = spent.length === 0 ? all : all.filter((row) => row.attempts - 1 < maxAttempts);
      for (const row of spent) {
        const error = row.last_error ?? 'lease expired';
        this.#sql.run(`UPDATE eventflow_delivery SET outcome = 'dead', attempts = @attempts, last_error = @error, deadline = NULL, owner = NULL, updated = @updated, settled_at = @now WHERE event_id = @id AND gname = @gname AND grp = @grp`, {
          ...params,
          id: row.event_id,
          attempts: row.attempts,
          error,
        });
        if (!v4) continue;
        this.#sql.run(`UPDATE event_published SET failed = @updated WHERE event_id = @id AND success IS NULL AND failed IS NULL`, { id: row.event_id, updated });
        this.#sql.run(`INSERT OR REPLACE INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (@id, @attempts, @error, @updated)`, { id: row.event_id, attempts: row.attempts, error, updated });
      }
      taken.sort((a, b) => a.position - b.position);
      if (taken.length > 0 && v4) {
        this.#sql.run(`UPDATE event_published SET consumed_spoke = @updated, consumer = @consumer WHERE event_id IN (SELECT value FROM json_each(@ids))`, {
          ids: JSON.stringify(taken.map((row) => row.event_id)),
          updated,
          consumer,
        });
      }
      const texts = new Map<string, string>();
      const events = this.#events([...spent, ...taken], known, texts);
      const claimed: Claimed[] = [];
      for (const row of taken) {
        const event = events.get(row.event_id);
        if (event) claimed.push({ event, delivery: row.delivery, attempt: row.attempts, dataText: texts.get(row.event_id) });
      }
      const dead: ClaimedDead[] = [];
      for (const row of spent) {
        const event = events.get(row.event_id);
        if (event) dead.push({ event, attempts: row.attempts, lastError: row.last_error ?? 'lease expired' });
      }
      const nextDue =
        spent.length + taken.length < limit
          ? (this.#sql.get<{ next: number | null }>(
              `SELECT MIN(CASE WHEN d.deadline > @now THEN d.deadline ELSE d.available_at END) AS next FROM eventflow_delivery d
               WHERE ${rowScope(key)} AND d.outcome IS NULL AND (d.deadline > @now OR d.available_at > @now)`,
              params,
            )?.next ?? undefined)
          : undefined;
      // The watermark into the group's row at most once per PERSIST_MS, also by a claim that did not move it (a
      // drained group's poll): a drain's rows are written within its first PERSIST_MS, and the row kept the first
      // page's watermark until an event moved it again; a restart then wrote every row of the drain again.
      if (watermark > cached.stored && at - cached.persistedAt >= PERSIST_MS) {
        this.#rows.persist(key, watermark);
        persisted = true;
      }
      // Last in the transaction: one that held the write lock past its deadline rolls back (LateClaim).
      checkInTime(clock, deadline);
      return { claimed, dead, nextDue, missing: false };
    });
    // Committed: what the claim wrote and looked at is known from now on.
    if (persisted) {
      cached.persistedAt = at;
      cached.stored = watermark;
    }
    cached.materialized = watermark;
    if (lookForExpired) cached.expiredAt = at;
    return result;
  }

  /**
   * The events of the claimed rows: those at hand, the rest read in one statement, by position (the
   * table's rowid: one b-tree search each, where the id is two, through its index).
   */
  #events(rows: ReadonlyArray<{ event_id: string; position: number }>, known: ((id: string) => StoredEvent | undefined) | undefined, texts?: Map<string, string>): Map<string, StoredEvent> {
    const { events, missing } = atHand(rows.map((row) => row.event_id), known);
    if (missing.length > 0) {
      const wanted = new Set(missing);
      const positions = rows.filter((row) => wanted.has(row.event_id)).map((row) => row.position);
      for (const row of this.#sql.tuples<EventTuple>(`SELECT ${COLUMNS} FROM event e WHERE e.position IN (SELECT value FROM json_each(@positions))`, { positions: JSON.stringify(positions) })) {
        events.set(row[1], toStoredEvent(fromTuple(row)));
        // Every row of this file was written by a gateway's JSON.stringify (appends.ts): the delivery frame splices it.
        texts?.set(row[1], row[7]);
      }
    }
    return events;
  }

  async apply(actions: readonly LedgerAction[]): Promise<Array<DeliveryRef | undefined>> {
    return this.applyNow(actions);
  }

  /** `apply` in a transaction of its own, or in a savepoint of the one running (an append batch's: append-riders.ts). */
  applyNow(actions: readonly LedgerAction[]): Array<DeliveryRef | undefined> {
    return this.#sql.immediate(() => {
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
        type Ended = [delivery: string, event_id: string, domain: string, gname: string, grp: string, name: string | null, attempts: number];
        const returning = 'RETURNING delivery, event_id, domain, gname, grp, name, attempts';
        // Successes without an error text (a drain's every settle) by their ids alone: no JSON object per row to read back.
        const plain: LedgerAction[] = [];
        const other: LedgerAction[] = [];
        for (const action of outcomes) (action.kind === 'outcome' && action.outcome === 'success' && action.error === undefined ? plain : other).push(action);
        const rows: Ended[] = [];
        if (plain.length > 0) {
          rows.push(
            ...this.#sql.tuples<Ended>(
              `UPDATE eventflow_delivery AS d SET outcome = 'success', last_error = NULL, deadline = NULL, updated = @updated, settled_at = @at
               WHERE d.delivery IN (SELECT value FROM json_each(@ids)) AND d.delivery IS NOT NULL AND d.outcome IS NULL ${returning}`,
              { ids: JSON.stringify(plain.map((action) => action.delivery)), updated, at },
            ),
          );
        }
        if (other.length > 0) {
          rows.push(
            ...this.#sql.tuples<Ended>(
              `UPDATE eventflow_delivery AS d SET outcome = j.o, last_error = j.e, deadline = NULL, updated = @updated, settled_at = @at
               FROM (SELECT json_extract(value, '$.d') AS dl, json_extract(value, '$.o') AS o, json_extract(value, '$.e') AS e FROM json_each(@rows)) AS j
               WHERE d.delivery = j.dl AND d.outcome IS NULL ${returning}`,
              { rows: JSON.stringify(other.map((action) => ({ d: action.delivery, o: action.kind === 'dead' ? 'dead' : action.kind === 'outcome' ? action.outcome : null, e: action.error ?? null }))), updated, at },
            ),
          );
        }
        for (const [delivery, event_id, domain, gname, grp, name, attempts] of rows) ended.set(delivery, { event_id, domain, gname, grp, name, attempts, deadline: null });
        const v4 = outcomes.filter((action) => ended.get(action.delivery)?.grp === DEFAULT_GROUP);
        for (const column of ['success', 'failed'] as const) {
          const ids = v4.filter((action) => (column === 'success' ? action.kind === 'outcome' && action.outcome === 'success' : !(action.kind === 'outcome' && action.outcome === 'success')));
          if (ids.length === 0) continue;
          this.#sql.run(`UPDATE event_published SET ${column} = @updated WHERE event_id IN (SELECT value FROM json_each(@ids)) AND success IS NULL AND failed IS NULL`, {
            updated,
            ids: JSON.stringify(ids.map((action) => ended.get(action.delivery)?.event_id)),
          });
        }
        for (const action of v4) {
          if (action.kind !== 'dead') continue;
          const row = ended.get(action.delivery) as RefRow;
          this.#sql.run(`INSERT OR REPLACE INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (@id, @attempts, @error, @updated)`, { id: row.event_id, attempts: row.attempts, error: action.error, updated });
        }
      }
      // Releases (rarer) one by one: the delivery id is voided, so the row is read first.
      for (const action of first.values()) {
        if (action.kind !== 'release') continue;
        const row = this.#current(action.delivery);
        if (!row) continue;
        const uncount = action.uncount ? 1 : 0;
        this.#sql.run(
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
    return this.#sql.get<RefRow>(`SELECT event_id, domain, gname, grp, name, attempts, deadline FROM eventflow_delivery WHERE delivery = @delivery AND outcome IS NULL`, { delivery });
  }

  async delivery(delivery: string): Promise<(DeliveryRef & { domain: string; deadline: number | undefined }) | undefined> {
    const row = this.#current(delivery);
    return row && { key: keyOf(row.domain, row.gname, row.grp, row.name ?? ''), eventId: row.event_id, attempts: row.attempts, domain: row.domain, deadline: row.deadline ?? undefined };
  }

  async extend(delivery: string, deadline: number): Promise<boolean> {
    // A transaction, as every write of the ledger: checked first, and one that fails tells the store (the constructor's hooks).
    return this.#sql.immediate(() => this.#sql.run(`UPDATE eventflow_delivery SET deadline = @deadline WHERE delivery = @delivery AND outcome IS NULL`, { delivery, deadline })) > 0;
  }

  /** The default group's v4 claim back to NULL (the lease being released is the claim). */
  #unclaim(eventId: string): void {
    this.#sql.run(`UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id = @id AND success IS NULL AND failed IS NULL`, { id: eventId });
  }

  async releaseOwner(owner: string): Promise<number> {
    return this.#sql.immediate(() => {
      const rows = this.#sql.all<{ event_id: string; grp: string }>(`SELECT event_id, grp FROM eventflow_delivery WHERE owner = @owner AND outcome IS NULL AND deadline IS NOT NULL`, { owner });
      this.#sql.run(
        `UPDATE eventflow_delivery SET delivery = NULL, owner = NULL, deadline = NULL, attempts = MAX(0, attempts - 1) WHERE owner = @owner AND outcome IS NULL AND deadline IS NOT NULL`,
        { owner },
      );
      for (const row of rows) if (row.grp === DEFAULT_GROUP) this.#unclaim(row.event_id);
      return rows.length;
    });
  }


}
