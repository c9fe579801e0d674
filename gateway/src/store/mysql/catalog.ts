/**
 * The MySQL store's Catalog (see ../catalog.ts) over v4's tables and the gateway's own
 * (eventflow_position, eventflow_schedule, eventflow_dead_letter). Times are DATETIME, read as Dates.
 */
import type { Pool } from 'mysql2/promise';
import type { Position, StoredEvent } from '@eventflow/core';
import { likePatterns, prefixRange, settledSql, toSettled, withDeliveries, type SettledDelivery, type SettledQuery, type SettledRow, type Associations, type Catalog, type DeliveryRow, type DomainSummary, type EventFate, type ProcessQuery, type ScheduledQuery, type ScheduledSummary, processSummary, summaryOf, type ProcessRow, type StatusFlags, type PublishedBy, PUBLISHERS_SEEN } from '../catalog.js';
import { exec, run } from './db.js';
import { FIRED } from './rows.js';
import { select, type Params } from './statements.js';

const DUE = 'COALESCE(d.due, s.scheduled)';

/** publishedElsewhere reads at most this many of the newest positions. */
const ELSEWHERE_WINDOW = 1_000;

const iso = (date: Date | null | undefined): string | undefined => (date ? new Date(date).toISOString() : undefined);
const isoNow = (date: Date | null | undefined): string => iso(date) ?? '';

type SummaryRow = StatusFlags & { pid: string; events: number | string; firstEvent: Date; lastEvent: Date; last?: Date };
type FateRow = { eventId: string; consumer: string | null; claimed: Date | null; success: Date | null; failed: Date | null; orphan: Date | null; published: number | string; attempts: number | null; reason: string | null; at: Date | null };

export class MysqlCatalog implements Catalog {
  readonly #pool: () => Pool;
  /** The store's readEventlog, which positions events written by v4 spokes first (positions.ts). */
  readonly #eventlog: (domain: string, pid: string, after: Position) => Promise<StoredEvent[]>;

  constructor(pool: () => Pool, eventlog: (domain: string, pid: string, after: Position) => Promise<StoredEvent[]>) {
    this.#pool = pool;
    this.#eventlog = eventlog;
  }

  async eventlogPage(domain: string, pid: string, after: Position, limit: number): Promise<StoredEvent[]> {
    return (await this.#eventlog(domain, pid, after)).slice(0, limit);
  }

  #select<T>(what: string, sql: string, params: Params = []): Promise<T[]> {
    return run(this.#pool(), what, (pool) => select<T>(pool, sql, params));
  }

  async domains(): Promise<DomainSummary[]> {
    const rows = await this.#select<{ domain: string; events: number | string; lastEvent: Date }>(
      'list the domains',
      `SELECT e.domain AS domain, COUNT(*) AS events, MAX(e.timestamp) AS lastEvent FROM event e WHERE ${FIRED} GROUP BY e.domain ORDER BY e.domain`,
    );
    return rows.map((row) => ({ domain: row.domain, events: Number(row.events), lastEvent: isoNow(row.lastEvent) }));
  }

  async processes(domain: string, { prefix, order, after = '', cursor, limit }: ProcessQuery): Promise<ProcessRow[]> {
    const { low, high } = prefixRange(prefix);
    if (order !== 'recent') {
      // idx_domain_pid (domain, pid, timestamp): read in pid order from the cursor, stopping after `limit` pids.
      const rows = await this.#select<SummaryRow>(
        'list the processes',
        `${processSummary()}
         WHERE e.domain = ? AND e.pid > ? AND e.pid >= ? AND e.pid < ?
         GROUP BY e.pid ORDER BY e.pid LIMIT ?`,
        [domain, after, low, high, limit],
      );
      return rows.map((row) => summaryOf(row));
    }
    // The newest event first: each pid's newest timestamp from idx_domain_pid (a loose index scan,
    // one entry per pid), sorted, ties by pid; then the page's processes summed up. The cursor is
    // the last one's [newest timestamp, pid].
    let before: [string, string] = ['9999-12-31T23:59:59.999Z', ''];
    try {
      if (cursor !== undefined) before = JSON.parse(cursor) as [string, string];
    } catch {
      return [];
    }
    const at = new Date(before[0]);
    if (Number.isNaN(at.getTime()) || typeof before[1] !== 'string') return [];
    const rows = await this.#select<SummaryRow>(
      'list the recent processes',
      `${processSummary(`JOIN (SELECT pid, MAX(timestamp) AS last FROM event WHERE domain = ? AND pid >= ? AND pid < ?
           GROUP BY pid HAVING last < ? OR (last = ? AND pid < ?) ORDER BY last DESC, pid DESC LIMIT ?) page ON page.pid = e.pid`, ', MAX(page.last) AS last')}
       WHERE e.domain = ?
       GROUP BY e.pid ORDER BY MAX(page.last) DESC, e.pid DESC`,
      [domain, low, high, at, at, before[1], limit, domain],
    );
    return rows.map((row) => summaryOf(row, JSON.stringify([isoNow(row.last), row.pid])));
  }

  async fates(domain: string, pid: string, eventIds: readonly string[]): Promise<EventFate[]> {
    if (eventIds.length === 0) return [];
    const ids = [...eventIds];
    const [rows, deliveries] = await Promise.all([
      this.#select<FateRow>(
        'read the event fates',
        `SELECT e.id AS eventId, p.consumer, p.consumed_spoke AS claimed, p.success, p.failed, p.orphan, p.event_id IS NOT NULL AS published,
           d.attempts, d.reason, d.at
         FROM event e LEFT JOIN event_published p ON p.event_id = e.id LEFT JOIN eventflow_dead_letter d ON d.event_id = e.id
         WHERE e.domain = ? AND e.pid = ? AND e.id IN (?)`,
        [domain, pid, ids],
      ),
      // The page's ledger rows in one read of the primary key (event_id, gname, grp); rows of the queue not yet delivered are left out.
      this.#select<DeliveryRow>(
        'read the event deliveries',
        `SELECT d.event_id AS eventId, d.grp, d.gname, d.attempts, d.outcome, d.last_error AS lastError, d.claimed_at AS claimedAt, d.settled_at AS settledAt
         FROM eventflow_delivery d WHERE d.event_id IN (?) AND (d.attempts > 0 OR d.outcome IS NOT NULL) ORDER BY d.event_id, d.grp, d.gname`,
        [ids],
      ),
    ]);
    const fates = rows.map((row) => ({
      eventId: row.eventId,
      consumer: row.consumer ?? undefined,
      claimed: iso(row.claimed),
      success: iso(row.success),
      failed: iso(row.failed),
      orphan: iso(row.orphan),
      published: Number(row.published) === 1,
      deadLetter: row.attempts === null ? undefined : { attempts: Number(row.attempts), reason: row.reason ?? '', at: isoNow(row.at) },
    }));
    return withDeliveries(fates, deliveries);
  }

  async settledDeliveries({ domain, name, group, from, to, limit }: SettledQuery): Promise<SettledDelivery[]> {
    const rows = await this.#select<SettledRow>('read the settled deliveries', settledSql(group !== undefined), [domain, name, from, to, ...(group === undefined ? [] : [group]), limit]);
    return rows.map(toSettled);
  }

  async associations(domain: string, pid: string): Promise<Associations> {
    const [children, entities] = await Promise.all([
      this.#select<Associations['children'][number]>(
        'read the child processes',
        `SELECT c.event_id AS eventId, c.domain, c.cpid FROM event e JOIN event_cpid c ON c.event_id = e.id
         WHERE e.domain = ? AND e.pid = ? ORDER BY e.timestamp, c.domain, c.cpid`,
        [domain, pid],
      ),
      this.#select<Associations['entities'][number]>(
        'read the entity associations',
        `SELECT x.event_id AS eventId, x.eid FROM event e JOIN event_eid x ON x.event_id = e.id WHERE e.domain = ? AND e.pid = ? ORDER BY e.timestamp, x.eid`,
        [domain, pid],
      ),
    ]);
    return { children, entities };
  }

  async scheduled({ domain, domains, after, limit }: ScheduledQuery): Promise<ScheduledSummary[]> {
    const afterDue = after ? new Date(after.due) : new Date(0);
    // The connection's patterns as LIKE patterns in one JSON parameter (one prepared statement for any number of them).
    const patterns = domains === undefined ? null : JSON.stringify(likePatterns(domains));
    const rows = await this.#select<Omit<ScheduledSummary, 'due' | 'timestamp'> & { due: Date; timestamp: Date }>(
      'list the scheduled events',
      `SELECT e.id, e.domain, e.name, e.pid, ${DUE} AS due, e.timestamp
       FROM event_scheduled s JOIN event e ON e.id = s.event_id LEFT JOIN eventflow_schedule d ON d.event_id = s.event_id
       WHERE s.executed IS NULL AND (? IS NULL OR e.domain = ?)
         AND (? IS NULL OR EXISTS (SELECT 1 FROM JSON_TABLE(?, '$[*]' COLUMNS (p VARCHAR(1024) CHARACTER SET ascii COLLATE ascii_bin PATH '$')) g WHERE e.domain LIKE g.p ESCAPE '!'))
         AND (${DUE} > ? OR (${DUE} = ? AND e.id > ?))
       ORDER BY ${DUE}, e.id LIMIT ?`,
      [domain ?? null, domain ?? null, patterns, patterns, afterDue, afterDue, after?.id ?? '', limit],
    );
    return rows.map((row) => ({ id: row.id, domain: row.domain, name: row.name, pid: row.pid, due: isoNow(row.due), timestamp: isoNow(row.timestamp) }));
  }

  async cancelScheduled(id: string, domain: string): Promise<boolean> {
    // The guards and the delete in one statement: a firing that claimed the row first wins, and only the domain the right was checked on.
    const sql = `DELETE e FROM event e JOIN event_scheduled s ON s.event_id = e.id WHERE e.id = ? AND e.domain = ? AND s.executed IS NULL`;
    return (await exec(this.#pool(), 'cancel the scheduled event', sql, [id, domain])) > 0;
  }

  async positionBeforeLast(domain: string, name: string, count: number): Promise<Position> {
    const named = name === '*' ? '' : ' AND e.name = ?';
    const rows = await this.#select<{ position: number | string }>(
      'find the recent events',
      `SELECT x.position FROM event e JOIN event_published p ON p.event_id = e.id JOIN eventflow_position x ON x.event_id = e.id
       WHERE e.domain = ?${named} AND ${FIRED} ORDER BY x.position DESC LIMIT 1 OFFSET ?`,
      name === '*' ? [domain, count - 1] : [domain, name, count - 1],
    );
    const [row] = rows;
    return row === undefined ? 0 : Number(row.position) - 1;
  }

  async backlog(): Promise<number> {
    const rows = await this.#select<{ count: number | string }>(
      'count the unsettled deliveries',
      'SELECT COUNT(*) AS count FROM event_published WHERE consumed_spoke IS NOT NULL AND success IS NULL AND failed IS NULL',
    );
    return Number(rows[0]?.count ?? 0);
  }

  async publishedElsewhere(publisher: string, after: Position): Promise<{ head: Position; publishers: PublishedBy[] }> {
    // Only the newest ELSEWHERE_WINDOW positions: a second publisher is still among them at any rate, and the read stays
    // a short range of the primary key however many events this gateway stored meanwhile. Scheduled events are left out:
    // one fired here keeps the publisher that scheduled it, this gateway before a restart, say.
    const heads = await this.#select<{ head: number | string }>('read the head', `SELECT value AS head FROM eventflow_sequence WHERE name = 'event'`);
    const head = Number(heads[0]?.head ?? after);
    const rows = await this.#select<{ publisher: string; events: number | string }>(
      'look for events another gateway published',
      `SELECT p.publisher AS publisher, COUNT(*) AS events FROM eventflow_position x JOIN event_published p ON p.event_id = x.event_id
        WHERE x.position > ? AND x.position <= ? AND p.publisher <> ? AND NOT EXISTS (SELECT 1 FROM event_scheduled s WHERE s.event_id = x.event_id)
        GROUP BY p.publisher ORDER BY COUNT(*) DESC LIMIT ${PUBLISHERS_SEEN}`,
      [Math.max(after, head - ELSEWHERE_WINDOW), head, publisher],
    );
    return { head: Math.max(head, after), publishers: rows.map((row) => ({ publisher: row.publisher, events: Number(row.events) })) };
  }
}
