/** The SQLite delivery ledger (store/ledger.ts): consumer groups and leases on the gateway's own tables. */
import type Database from 'better-sqlite3';
import type { ClaimRequest, DeadLetterQuery, DeliveryLedger, EndedDelivery, GroupKey, GroupRecord, GroupSummary, LedgerDeadLetter, Unsettled } from '../ledger.js';
import { DEFAULT_GROUP, foreign, keyOf, ledgerColumns, UNSETTLED, type LedgerRow } from '../ledger.js';
import { now, toStoredEvent, type EventRow } from './statements.js';

export const LEDGER_SCHEMA = `
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
);
CREATE INDEX IF NOT EXISTS idx_delivery_id ON eventflow_delivery (delivery);
CREATE INDEX IF NOT EXISTS idx_delivery_owner ON eventflow_delivery (owner, outcome);
CREATE INDEX IF NOT EXISTS idx_delivery_group ON eventflow_delivery (domain, gname, grp, outcome);
`;

const FIRED = 'NOT EXISTS (SELECT 1 FROM event_scheduled z WHERE z.event_id = e.id AND z.executed IS NULL)';

type DeliveryRow = LedgerRow<number>;

type UnsettledRow = EventRow & { attempts: number | null; owner: string | null; deadline: number | null; available_at: number | null; foreign: number; last_error: string | null };

/** The backlog scope of a group: its filter, and (default group) v4's outcome columns. */
function scope(key: GroupKey): string {
  const name = key.name === '*' ? '' : 'AND e.name = @name';
  const settled = key.group === DEFAULT_GROUP ? `AND ${UNSETTLED}` : '';
  return `FROM event e JOIN event_published p ON p.event_id = e.id
    LEFT JOIN eventflow_delivery d ON d.event_id = e.id AND d.gname = @gname AND d.grp = @grp
    WHERE e.domain = @domain ${name} AND e.position > @after AND ${FIRED} AND d.outcome IS NULL ${settled}`;
}

export class SqliteLedger implements DeliveryLedger {
  readonly #db: Database.Database;
  readonly #cache = new Map<string, Database.Statement>();

  constructor(db: Database.Database) {
    this.#db = db;
    db.transaction(() => db.exec(LEDGER_SCHEMA)).immediate();
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

  async ensureGroup(key: GroupKey): Promise<GroupRecord> {
    return this.#immediate(() => {
      this.#run(
        `INSERT OR IGNORE INTO eventflow_group (domain, name, grp, created_position, created_at)
         VALUES (@domain, @name, @group, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'event'), 0), @now)`,
        { ...key, now: now() },
      );
      return this.#get<GroupRecord>(
        `SELECT domain, name, grp AS "group", created_position AS createdPosition, created_at AS createdAt
         FROM eventflow_group WHERE domain = @domain AND name = @name AND grp = @group`,
        key,
      ) as GroupRecord;
    });
  }

  async deleteGroup(key: GroupKey): Promise<boolean> {
    return this.#immediate(() => {
      const deleted = this.#run(`DELETE FROM eventflow_group WHERE domain = @domain AND name = @name AND grp = @group`, key) > 0;
      // The default group's rows are v4's claim and outcome: they stay with the event.
      if (deleted && key.group !== DEFAULT_GROUP) this.#run(`DELETE FROM eventflow_delivery WHERE domain = @domain AND gname = @name AND grp = @group`, key);
      return deleted;
    });
  }

  async groups(at: number): Promise<GroupSummary[]> {
    const groups = this.#all<GroupRecord>(
      `SELECT domain, name, grp AS "group", created_position AS createdPosition, created_at AS createdAt FROM eventflow_group ORDER BY domain, name, grp`,
    );
    return groups.map((group) => {
      const params = { domain: group.domain, name: group.name, after: group.createdPosition, now: at, ...ledgerColumns(group) };
      const open = this.#get<{ open: number; inFlight: number | null; foreign: number | null; oldest: string | null }>(
        `SELECT COUNT(*) AS open, SUM(CASE WHEN d.deadline > @now THEN 1 ELSE 0 END) AS inFlight,
           SUM(${foreign(group)}) AS "foreign", MIN(e.timestamp) AS oldest ${scope(group)}`,
        params,
      );
      const name = group.name === '*' ? '' : 'AND e.name = @name';
      const rows = this.#get<{ redelivered: number | null; dead: number | null }>(
        `SELECT SUM(CASE WHEN d.attempts > 1 THEN 1 ELSE 0 END) AS redelivered, SUM(CASE WHEN d.outcome = 'dead' THEN 1 ELSE 0 END) AS dead
         FROM eventflow_delivery d JOIN event e ON e.id = d.event_id
         WHERE d.domain = @domain AND d.gname = @gname AND d.grp = @grp AND e.position > @after ${name}`,
        params,
      );
      const inFlight = open?.inFlight ?? 0;
      return {
        ...group,
        pending: Math.max(0, (open?.open ?? 0) - inFlight - (open?.foreign ?? 0)),
        inFlight,
        redelivered: rows?.redelivered ?? 0,
        deadLetters: rows?.dead ?? 0,
        oldestPendingAt: open?.oldest ?? undefined,
      };
    });
  }

  async consumed(domain: string, name: string): Promise<boolean> {
    return this.#get(`SELECT 1 AS one FROM eventflow_group WHERE domain = @domain AND name IN (@name, '*') LIMIT 1`, { domain, name }) !== undefined;
  }

  async unsettled(group: GroupRecord, after: number, limit: number): Promise<Unsettled[]> {
    const rows = this.#all<UnsettledRow>(
      `SELECT e.position, e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, e.data,
         d.attempts, d.owner, d.deadline, d.available_at, d.last_error,
         ${foreign(group)} AS "foreign"
       ${scope(group)} ORDER BY e.position LIMIT @limit`,
      { domain: group.domain, name: group.name, after: Math.max(after, group.createdPosition), limit: Math.max(0, limit), ...ledgerColumns(group) },
    );
    return rows.map(({ attempts, owner, deadline, available_at, foreign, last_error, ...event }) => ({
      event: toStoredEvent(event),
      attempts: attempts ?? 0,
      owner: owner ?? undefined,
      deadline: deadline ?? undefined,
      availableAt: available_at ?? undefined,
      foreign: foreign === 1,
      lastError: last_error ?? undefined,
    }));
  }

  async claim({ key, event, owner, consumer, delivery, deadline, now: at }: ClaimRequest): Promise<number | undefined> {
    const columns = ledgerColumns(key);
    const params = { id: event.id, domain: key.domain, ...columns, owner, consumer, delivery, deadline, at, updated: now() };
    return this.#immediate(() => {
      const row = this.#get<DeliveryRow>(`SELECT * FROM eventflow_delivery WHERE event_id = @id AND gname = @gname AND grp = @grp`, params);
      if (row && (row.outcome !== null || (row.deadline ?? 0) > at || (row.available_at ?? 0) > at)) return undefined;
      if (key.group === DEFAULT_GROUP) {
        // v4's guarded claim. A lease that expired unreleased (its gateway died) is a gateway's
        // claim, never a v4 spoke's (they claim only NULL): it is taken over.
        const expired = row?.deadline != null ? 1 : 0;
        const won = this.#run(
          `UPDATE event_published SET consumed_spoke = @updated, consumer = @consumer
           WHERE event_id = @id AND success IS NULL AND failed IS NULL AND (consumed_spoke IS NULL OR @expired = 1)`,
          { ...params, expired },
        );
        if (won !== 1) return undefined;
      }
      if (row) {
        this.#run(
          `UPDATE eventflow_delivery SET delivery = @delivery, owner = @owner, deadline = @deadline, available_at = NULL, attempts = attempts + 1, updated = @updated
           WHERE event_id = @id AND gname = @gname AND grp = @grp`,
          params,
        );
        return row.attempts + 1;
      }
      this.#run(
        `INSERT INTO eventflow_delivery (event_id, domain, gname, grp, delivery, owner, deadline, attempts, updated)
         VALUES (@id, @domain, @gname, @grp, @delivery, @owner, @deadline, 1, @updated)`,
        params,
      );
      return 1;
    });
  }

  async extend(delivery: string, deadline: number): Promise<boolean> {
    return this.#run(`UPDATE eventflow_delivery SET deadline = @deadline WHERE delivery = @delivery AND outcome IS NULL`, { delivery, deadline }) > 0;
  }

  #current(delivery: string): DeliveryRow | undefined {
    return this.#get<DeliveryRow>(
      `SELECT d.*, e.name FROM eventflow_delivery d JOIN event e ON e.id = d.event_id WHERE d.delivery = @delivery AND d.outcome IS NULL`,
      { delivery },
    );
  }

  async settle(delivery: string, outcome: 'success' | 'failed', error: string | undefined): Promise<EndedDelivery | undefined> {
    return this.#immediate(() => {
      const row = this.#current(delivery);
      if (!row) return undefined;
      const updated = now();
      this.#run(`UPDATE eventflow_delivery SET outcome = @outcome, last_error = @error, deadline = NULL, updated = @updated WHERE delivery = @delivery AND outcome IS NULL`, {
        delivery,
        outcome,
        error: error ?? null,
        updated,
      });
      if (row.grp === DEFAULT_GROUP) this.#run(`UPDATE event_published SET ${outcome} = @updated WHERE event_id = @id AND success IS NULL AND failed IS NULL`, { id: row.event_id, updated });
      return ended(row);
    });
  }

  async release(delivery: string, options: { availableAt?: number | undefined; error?: string | undefined; uncount?: boolean }): Promise<EndedDelivery | undefined> {
    return this.#immediate(() => {
      const row = this.#current(delivery);
      if (!row) return undefined;
      this.#run(
        `UPDATE eventflow_delivery SET deadline = NULL, available_at = @availableAt, last_error = COALESCE(@error, last_error),
           attempts = MAX(0, attempts - @uncount), updated = @updated WHERE delivery = @delivery AND outcome IS NULL`,
        { delivery, availableAt: options.availableAt ?? null, error: options.error ?? null, uncount: options.uncount ? 1 : 0, updated: now() },
      );
      if (row.grp === DEFAULT_GROUP) this.#unclaim(row.event_id);
      return ended({ ...row, attempts: options.uncount ? Math.max(0, row.attempts - 1) : row.attempts });
    });
  }

  /** The default group's v4 claim back to NULL (the lease being released is the claim). */
  #unclaim(eventId: string): void {
    this.#run(`UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id = @id AND success IS NULL AND failed IS NULL`, { id: eventId });
  }

  async releaseOwner(owner: string): Promise<number> {
    return this.#immediate(() => {
      const rows = this.#all<{ delivery: string }>(`SELECT delivery FROM eventflow_delivery WHERE owner = @owner AND outcome IS NULL AND deadline IS NOT NULL`, { owner });
      for (const { delivery } of rows) {
        const row = this.#current(delivery);
        if (!row) continue;
        this.#run(`UPDATE eventflow_delivery SET deadline = NULL, attempts = MAX(0, attempts - 1) WHERE delivery = @delivery`, { delivery });
        if (row.grp === DEFAULT_GROUP) this.#unclaim(row.event_id);
      }
      return rows.length;
    });
  }

  async deadLetter(key: GroupKey, eventId: string, attempts: number, lastError: string): Promise<boolean> {
    const params = { id: eventId, domain: key.domain, ...ledgerColumns(key), attempts, error: lastError, updated: now() };
    return this.#immediate(() => {
      if (key.group === DEFAULT_GROUP) {
        if (this.#run(`UPDATE event_published SET failed = @updated WHERE event_id = @id AND success IS NULL AND failed IS NULL`, params) !== 1) return false;
        this.#run(`INSERT OR REPLACE INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (@id, @attempts, @error, @updated)`, params);
      }
      const changed = this.#run(
        `INSERT INTO eventflow_delivery (event_id, domain, gname, grp, attempts, outcome, last_error, updated) VALUES (@id, @domain, @gname, @grp, @attempts, 'dead', @error, @updated)
         ON CONFLICT (event_id, gname, grp) DO UPDATE SET outcome = 'dead', attempts = @attempts, last_error = @error, deadline = NULL, updated = @updated WHERE outcome IS NULL`,
        params,
      );
      return changed > 0 || key.group === DEFAULT_GROUP;
    });
  }

  async nextDue(at: number): Promise<number | undefined> {
    const row = this.#get<{ next: number | null }>(
      `SELECT MIN(t) AS next FROM (
         SELECT MIN(deadline) AS t FROM eventflow_delivery WHERE outcome IS NULL AND deadline > @at
         UNION ALL SELECT MIN(available_at) FROM eventflow_delivery WHERE outcome IS NULL AND deadline IS NULL AND available_at > @at)`,
      { at },
    );
    return row?.next ?? undefined;
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
    const params = { id: eventId, ...ledgerColumns(key), updated: now() };
    return this.#immediate(() => {
      const changed = this.#run(
        `UPDATE eventflow_delivery SET outcome = NULL, attempts = 0, deadline = NULL, available_at = NULL, delivery = NULL, owner = NULL, updated = @updated
         WHERE event_id = @id AND gname = @gname AND grp = @grp AND outcome = 'dead'`,
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
    const params = { id: eventId, ...ledgerColumns(key), updated: now() };
    return this.#immediate(() => {
      const changed = this.#run(`UPDATE eventflow_delivery SET outcome = 'discarded', updated = @updated WHERE event_id = @id AND gname = @gname AND grp = @grp AND outcome = 'dead'`, params);
      if (changed > 0 && key.group === DEFAULT_GROUP) this.#run(`DELETE FROM eventflow_dead_letter WHERE event_id = @id`, params);
      return changed > 0;
    });
  }
}

function ended(row: DeliveryRow): EndedDelivery {
  return { key: keyOf(row.domain, row.gname, row.grp, row.name), eventId: row.event_id, attempts: row.attempts };
}
