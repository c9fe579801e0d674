/** The SQLite store's Catalog (see ../catalog.ts): each read one prepared statement over v4's tables. */
import type Database from 'better-sqlite3';
import type { Position, StoredEvent } from '@eventflow/core';
import { COLUMNS, toStoredEvent, type EventRow } from './statements.js';
import { globPatterns, prefixRange, settledSql, toSettled, withDeliveries, type SettledDelivery, type SettledQuery, type SettledRow, type Associations, type Catalog, type DeliveryRow, type DomainSummary, type EventFate, type ProcessQuery, type ProcessSummary, type ScheduledQuery, type ScheduledSummary, processSummary, summaryOf, type ProcessRow, type StatusFlags } from '../catalog.js';

const FIRED = 'NOT EXISTS (SELECT 1 FROM event_scheduled z WHERE z.event_id = e.id AND z.executed IS NULL)';

type SummaryRow = Omit<ProcessSummary, 'status'> & StatusFlags & { last?: number };
type FateRow = { eventId: string; consumer: string | null; claimed: string | null; success: string | null; failed: string | null; orphan: string | null; published: number; attempts: number | null; reason: string | null; at: string | null };

function prepare(db: Database.Database) {
  return {
    // Counted on idx_domain alone, less the unfired scheduled events; the last activity is the newest fired event's.
    domains: db.prepare<[], DomainSummary>(
      `SELECT d.domain AS domain,
         d.events - (SELECT COUNT(*) FROM event_scheduled s JOIN event u ON u.id = s.event_id WHERE s.executed IS NULL AND u.domain = d.domain) AS events,
         (SELECT e.timestamp FROM event e WHERE e.domain = d.domain AND ${FIRED} ORDER BY e.position DESC LIMIT 1) AS lastEvent
       FROM (SELECT domain, COUNT(*) AS events FROM event GROUP BY domain) d
       WHERE lastEvent IS NOT NULL ORDER BY d.domain`,
    ),
    page: db.prepare<[{ domain: string; pid: string; after: number; limit: number }], EventRow>(
      `SELECT ${COLUMNS} FROM event e
       WHERE e.domain = @domain AND e.pid = @pid AND e.position > @after AND ${FIRED} ORDER BY e.position LIMIT @limit`,
    ),
    // Walks idx_domain_pid in pid order from the cursor and stops after `limit` pids.
    processes: db.prepare<[{ domain: string; after: string; low: string; high: string; limit: number }], SummaryRow>(
      `${processSummary('', '', 'e.position')}
       WHERE e.domain = @domain AND e.pid > @after AND e.pid >= @low AND e.pid < @high
       GROUP BY e.pid ORDER BY e.pid LIMIT @limit`,
    ),
    // The newest event first: the pids' newest positions from idx_domain_pid alone (index only),
    // sorted; then the page's processes summed up. The cursor is the last one's newest position.
    recent: db.prepare<[{ domain: string; before: number; low: string; high: string; limit: number }], SummaryRow>(
      `WITH page AS (
         SELECT pid, MAX(position) AS last FROM event WHERE domain = @domain AND pid >= @low AND pid < @high
         GROUP BY pid HAVING MAX(position) < @before ORDER BY last DESC LIMIT @limit)
       ${processSummary('JOIN page ON page.pid = e.pid', ', MAX(page.last) AS last', 'e.position')}
       WHERE e.domain = @domain
       GROUP BY e.pid ORDER BY MAX(page.last) DESC`,
    ),
    fates: db.prepare<[{ domain: string; pid: string; ids: string }], FateRow>(
      `SELECT e.id AS eventId, p.consumer, p.consumed_spoke AS claimed, p.success, p.failed, p.orphan, p.event_id IS NOT NULL AS published,
         d.attempts, d.reason, d.at
       FROM event e LEFT JOIN event_published p ON p.event_id = e.id LEFT JOIN eventflow_dead_letter d ON d.event_id = e.id
       WHERE e.domain = @domain AND e.pid = @pid AND e.id IN (SELECT value FROM json_each(@ids))`,
    ),
    // The page's ledger rows in one read of the primary key (event_id, gname, grp); rows of the queue not yet delivered are left out.
    deliveries: db.prepare<[{ ids: string }], DeliveryRow>(
      `SELECT d.event_id AS eventId, d.grp, d.gname, d.attempts, d.outcome, d.last_error AS lastError, d.claimed_at AS claimedAt, d.settled_at AS settledAt
       FROM eventflow_delivery d WHERE d.event_id IN (SELECT value FROM json_each(@ids)) AND (d.attempts > 0 OR d.outcome IS NOT NULL) ORDER BY d.event_id, d.grp, d.gname`,
    ),
    children: db.prepare<[{ domain: string; pid: string }], Associations['children'][number]>(
      `SELECT c.event_id AS eventId, c.domain, c.cpid FROM event e JOIN event_cpid c ON c.event_id = e.id
       WHERE e.domain = @domain AND e.pid = @pid ORDER BY e.position, c.domain, c.cpid`,
    ),
    entities: db.prepare<[{ domain: string; pid: string }], Associations['entities'][number]>(
      `SELECT x.event_id AS eventId, x.eid FROM event e JOIN event_eid x ON x.event_id = e.id
       WHERE e.domain = @domain AND e.pid = @pid ORDER BY e.position, x.eid`,
    ),
    // `patterns`: a JSON array of GLOB patterns (catalog.ts globPatterns), or NULL for every domain.
    scheduled: db.prepare<[{ domain: string | null; patterns: string | null; afterDue: string; afterId: string; limit: number }], ScheduledSummary>(
      `SELECT e.id, e.domain, e.name, e.pid, s.scheduled AS due, e.timestamp FROM event_scheduled s JOIN event e ON e.id = s.event_id
       WHERE s.executed IS NULL AND (@domain IS NULL OR e.domain = @domain)
         AND (@patterns IS NULL OR EXISTS (SELECT 1 FROM json_each(@patterns) g WHERE e.domain GLOB g.value))
         AND (s.scheduled > @afterDue OR (s.scheduled = @afterDue AND e.id > @afterId))
       ORDER BY s.scheduled, e.id LIMIT @limit`,
    ),
    cancel: db.prepare<[{ id: string; domain: string }]>(
      `DELETE FROM event WHERE id = @id AND domain = @domain AND EXISTS (SELECT 1 FROM event_scheduled s WHERE s.event_id = event.id AND s.executed IS NULL)`,
    ),
    lastAny: db.prepare<[{ domain: string; skip: number }], { position: number }>(
      `SELECT e.position FROM event e JOIN event_published p ON p.event_id = e.id WHERE e.domain = @domain AND ${FIRED}
       ORDER BY e.position DESC LIMIT 1 OFFSET @skip`,
    ),
    lastNamed: db.prepare<[{ domain: string; name: string; skip: number }], { position: number }>(
      `SELECT e.position FROM event e JOIN event_published p ON p.event_id = e.id WHERE e.domain = @domain AND e.name = @name AND ${FIRED}
       ORDER BY e.position DESC LIMIT 1 OFFSET @skip`,
    ),
    backlog: db.prepare<[], { count: number }>(
      `SELECT COUNT(*) AS count FROM event_published WHERE consumed_spoke IS NOT NULL AND success IS NULL AND failed IS NULL`,
    ),
  };
}

type Statements = ReturnType<typeof prepare>;

const optional = (value: string | null): string | undefined => value ?? undefined;

export class SqliteCatalog implements Catalog {
  /** Prepared at the first read: the router asks the catalog what it offers as the gateway starts, the console reads it later if ever. */
  #statements: Statements | undefined;
  readonly #db: Database.Database;
  readonly #deleting: () => void;
  /** The settled deliveries' statements (every group, one group), prepared on first use. */
  readonly #settled: Array<Database.Statement<unknown[], SettledRow> | undefined> = [];

  /** `deleting`: called before an event is deleted (the store forgets what it keeps of recent events). */
  constructor(db: Database.Database, deleting: () => void = () => undefined) {
    this.#db = db;
    this.#deleting = deleting;
  }

  get #s(): Statements {
    return (this.#statements ??= prepare(this.#db));
  }

  async domains(): Promise<DomainSummary[]> {
    return this.#s.domains.all();
  }

  async processes(domain: string, { prefix, order, after = '', cursor, limit }: ProcessQuery): Promise<ProcessRow[]> {
    if (order !== 'recent') return this.#s.processes.all({ domain, after, ...prefixRange(prefix), limit }).map((row) => summaryOf(row));
    const before = cursor === undefined ? Number.MAX_SAFE_INTEGER : Number(cursor);
    if (!Number.isSafeInteger(before)) return [];
    return this.#s.recent.all({ domain, before, ...prefixRange(prefix), limit }).map((row) => summaryOf(row, String(row.last)));
  }

  async eventlogPage(domain: string, pid: string, after: Position, limit: number): Promise<StoredEvent[]> {
    return this.#s.page.all({ domain, pid, after, limit }).map(toStoredEvent);
  }

  async fates(domain: string, pid: string, eventIds: readonly string[]): Promise<EventFate[]> {
    const ids = JSON.stringify(eventIds);
    const fates = this.#s.fates.all({ domain, pid, ids }).map((row) => ({
      eventId: row.eventId,
      consumer: optional(row.consumer),
      claimed: optional(row.claimed),
      success: optional(row.success),
      failed: optional(row.failed),
      orphan: optional(row.orphan),
      published: row.published === 1,
      deadLetter: row.attempts === null ? undefined : { attempts: row.attempts, reason: row.reason ?? '', at: row.at ?? '' },
    }));
    return withDeliveries(fates, this.#s.deliveries.all({ ids }));
  }

  async settledDeliveries({ domain, name, group, from, to, limit }: SettledQuery): Promise<SettledDelivery[]> {
    const statement = (this.#settled[group === undefined ? 0 : 1] ??= this.#db.prepare<unknown[], SettledRow>(settledSql(group !== undefined)));
    return statement.all(...[domain, name, from, to, ...(group === undefined ? [] : [group]), limit]).map(toSettled);
  }

  async associations(domain: string, pid: string): Promise<Associations> {
    return { children: this.#s.children.all({ domain, pid }), entities: this.#s.entities.all({ domain, pid }) };
  }

  async scheduled({ domain, domains, after, limit }: ScheduledQuery): Promise<ScheduledSummary[]> {
    const patterns = domains === undefined ? null : JSON.stringify(globPatterns(domains));
    return this.#s.scheduled.all({ domain: domain ?? null, patterns, afterDue: after?.due ?? '', afterId: after?.id ?? '', limit });
  }

  async cancelScheduled(id: string, domain: string): Promise<boolean> {
    this.#deleting();
    return this.#s.cancel.run({ id, domain }).changes > 0;
  }

  async positionBeforeLast(domain: string, name: string, count: number): Promise<Position> {
    const skip = count - 1;
    const row = name === '*' ? this.#s.lastAny.get({ domain, skip }) : this.#s.lastNamed.get({ domain, name, skip });
    return row === undefined ? 0 : row.position - 1;
  }

  async backlog(): Promise<number> {
    return this.#s.backlog.get()?.count ?? 0;
  }
}
