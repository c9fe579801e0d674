/** The SQLite store's prepared statements, and the values they read and take. */
import type Database from 'better-sqlite3';
import { EventflowError, type JsonValue, type StoredEvent } from '@eventflow/core';
import type { DeadLetter } from '../store.js';
/** An event as stored: `data` is JSON text; the trace context NULL when it has none (absent: a read that does not select it). */
export type EventRow = Omit<StoredEvent, 'data' | 'traceparent' | 'tracestate'> & { data: string; traceparent?: string | null; tracestate?: string | null };

/** The columns of an event row (EventRow), `e` being the event table. */
export const COLUMNS = 'e.position, e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, e.data, e.traceparent, e.tracestate';
/** A row of COLUMNS as an array (LedgerSql.tuples). */
export type EventTuple = [position: number, id: string, timestamp: string, domain: string, rid: string | null, pid: string, name: string, data: string, traceparent: string | null, tracestate: string | null];
export const fromTuple = ([position, id, timestamp, domain, rid, pid, name, data, traceparent, tracestate]: EventTuple): EventRow => ({ position, id, timestamp, domain, rid, pid, name, data, traceparent, tracestate });

/** Name lists travel as one JSON array parameter so that their statements can be cached. */
const IN_NAMES = 'e.name IN (SELECT value FROM json_each(@names))';
const IN_STREAM = 'e.domain = @domain AND e.pid = @pid';
/** The guard that makes the first outcome win (v4 overwrote, and could end with both set). */
const UNSETTLED = 'success IS NULL AND failed IS NULL';
/**
 * A scheduled event joins its eventlog when it fires (it then gets a new position and timestamp):
 * before that, reads and subscriptions do not see it, so a state never reflects the future.
 */
const FIRED = 'NOT EXISTS (SELECT 1 FROM event_scheduled z WHERE z.event_id = e.id AND z.executed IS NULL)';

/** What the store uses of a better-sqlite3 statement; an interface of its own, so that this module's exports can be declared. */
export interface Prepared<P extends unknown[], R = unknown> {
  get(...params: P): R | undefined;
  all(...params: P): R[];
  run(...params: P): Database.RunResult;
}

export function prepareStatements(db: Database.Database) {
  // Each prepared when first run, not when the store opens: preparing one costs ~0.05–0.1 ms, a
  // start runs 4 of these ~45, and a gateway may never run many of the others (schedules, deletes,
  // reads by entity). bench/README.md › start.
  const stmt = <P extends unknown[], R = unknown>(sql: string): Prepared<P, R> => {
    let prepared: Prepared<P, R> | undefined;
    const statement = (): Prepared<P, R> => (prepared ??= db.prepare<P, R>(sql));
    return {
      get: (...params) => statement().get(...params),
      all: (...params) => statement().all(...params),
      run: (...params) => statement().run(...params),
    };
  };
  const events = <P extends object>(sql: string): Prepared<[P], EventRow> => stmt<[P], EventRow>(sql);
  const write = <P extends object>(sql: string): Prepared<[P]> => stmt<[P]>(sql);
  type Id = { id: string };
  type IdNow = { id: string; now: string };
  type Stream = { domain: string; pid: string };
  const firstOutcome = (table: string) => ({
    success: write<IdNow>(`UPDATE ${table} SET success = @now WHERE event_id = @id AND ${UNSETTLED}`),
    failed: write<IdNow>(`UPDATE ${table} SET failed = @now WHERE event_id = @id AND ${UNSETTLED}`),
  });
  return {
    head: stmt<[], { seq: number }>(`SELECT seq FROM sqlite_sequence WHERE name = 'event'`),
    /** SQLite's data_version: changes when another connection commits to the file (this one's own commits leave it; recent.ts). */
    dataVersion: stmt<[], { data_version: number }>(`PRAGMA data_version`),
    schemaVersion: stmt<[], { value: string }>(`SELECT value FROM meta WHERE key = 'schema_version'`),
    // Raised, never lowered: a gateway older than the file then refuses it (sqlite.ts).
    setSchemaVersion: stmt<[string]>(
      `INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)`,
    ),
    exists: stmt<[string], { one: number }>(`SELECT 1 AS one FROM event WHERE id = ?`),

    // An id already stored fails it with SQLITE_CONSTRAINT_UNIQUE: the unique index is the check (appends.ts).
    // Not ON CONFLICT DO NOTHING: that still advances AUTOINCREMENT's sequence, so head would move.
    // The two inserts of every publish take positional parameters: binding names cost ~5% of the insert.
    insertEvent: stmt<[id: string, timestamp: string, domain: string, rid: string | null, pid: string, name: string, data: string, traceparent: string | null, tracestate: string | null]>(
      `INSERT INTO event (id, timestamp, domain, rid, pid, name, data, traceparent, tracestate) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertPublished: stmt<[id: string, now: string, publisher: string, hub: string | null, claimed: string | null]>(
      `INSERT INTO event_published (event_id, published, publisher, hub, consumed_hub) VALUES (?, ?, ?, ?, ?)`,
    ),
    insertScheduled: write<IdNow & { scheduled: string }>(
      `INSERT INTO event_scheduled (event_id, timestamp, scheduled) VALUES (@id, @now, @scheduled)`,
    ),

    read: events<Id>(`SELECT ${COLUMNS} FROM event e WHERE e.id = @id`),
    eventlog: events<Stream & { after: number }>(
      `SELECT ${COLUMNS} FROM event e WHERE ${IN_STREAM} AND e.position > @after AND ${FIRED} ORDER BY e.position`,
    ),
    countEventlog: stmt<[Stream], { count: number }>(`SELECT COUNT(*) AS count FROM event e WHERE ${IN_STREAM} AND ${FIRED}`),
    eventlogByTimestamp: events<Stream & { from: string; to: string }>(
      `SELECT ${COLUMNS} FROM event e
       WHERE ${IN_STREAM} AND e.timestamp >= @from AND e.timestamp <= @to AND ${FIRED} ORDER BY e.position`,
    ),
    eventlogByNames: events<Stream & { names: string }>(
      `SELECT ${COLUMNS} FROM event e WHERE ${IN_STREAM} AND ${IN_NAMES} AND ${FIRED} ORDER BY e.position`,
    ),
    byChildProcess: events<{ domain: string; cpid: string }>(
      `SELECT ${COLUMNS} FROM event_cpid c JOIN event e ON e.id = c.event_id
       WHERE c.domain = @domain AND c.cpid = @cpid AND ${FIRED} ORDER BY e.position`,
    ),
    byEid: events<{ eid: string }>(
      `SELECT ${COLUMNS} FROM event_eid x JOIN event e ON e.id = x.event_id WHERE x.eid = @eid AND ${FIRED} ORDER BY e.position`,
    ),
    byDomainAndEid: events<{ domain: string; eid: string }>(
      `SELECT ${COLUMNS} FROM event_eid x JOIN event e ON e.id = x.event_id
       WHERE x.eid = @eid AND e.domain = @domain AND ${FIRED} ORDER BY e.position`,
    ),
    distinctPids: stmt<[string], { pid: string }>(
      `SELECT DISTINCT pid FROM event e WHERE domain = ? AND ${FIRED} ORDER BY pid COLLATE BINARY`,
    ),
    // Two statements rather than `(@name = '*' OR e.name = @name)`, which would keep SQLite from using idx_name.
    publishedAfterAny: events<{ domain: string; after: number; limit: number }>(
      `SELECT ${COLUMNS} FROM event e JOIN event_published p ON p.event_id = e.id
       WHERE e.domain = @domain AND e.position > @after AND ${FIRED} ORDER BY e.position LIMIT @limit`,
    ),
    publishedAfterNamed: events<{ domain: string; name: string; after: number; limit: number }>(
      `SELECT ${COLUMNS} FROM event e JOIN event_published p ON p.event_id = e.id
       WHERE e.domain = @domain AND e.name = @name AND e.position > @after AND ${FIRED} ORDER BY e.position LIMIT @limit`,
    ),
    publishedSince: events<{ after: number; limit: number }>(
      `SELECT ${COLUMNS} FROM event e JOIN event_published p ON p.event_id = e.id
       WHERE e.position > @after AND ${FIRED} ORDER BY e.position LIMIT @limit`,
    ),
    findOutcome: events<Stream & { names: string; after: number }>(
      `SELECT ${COLUMNS} FROM event e
       WHERE ${IN_STREAM} AND ${IN_NAMES} AND e.position > @after AND ${FIRED}
         AND EXISTS (SELECT 1 FROM event_published p WHERE p.event_id = e.id)
       ORDER BY e.position LIMIT 1`,
    ),

    delete: write<Id>(`DELETE FROM event WHERE id = @id`),
    deleteEventlog: write<Stream>(`DELETE FROM event WHERE domain = @domain AND pid = @pid`),
    persistEid: write<Id & { eid: string }>(`INSERT OR IGNORE INTO event_eid (event_id, eid) VALUES (@id, @eid)`),
    persistCpid: write<Id & { domain: string; cpid: string }>(
      `INSERT OR IGNORE INTO event_cpid (event_id, domain, cpid) VALUES (@id, @domain, @cpid)`,
    ),

    claimForRouting: write<IdNow & { hub: string }>(
      `UPDATE event_published SET consumed_hub = @now, hub = @hub WHERE event_id = @id AND consumed_hub IS NULL`,
    ),
    claimForConsumer: write<IdNow & { consumer: string }>(
      `UPDATE event_published SET consumed_spoke = @now, consumer = @consumer
       WHERE event_id = @id AND consumed_spoke IS NULL AND ${UNSETTLED}`,
    ),
    releaseConsumerClaim: write<Id>(
      `UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id = @id AND ${UNSETTLED}`,
    ),
    settle: firstOutcome('event_published'),
    markOrphan: write<IdNow>(`UPDATE event_published SET orphan = @now WHERE event_id = @id AND orphan IS NULL`),
    // One statement for a page of ids (a JSON array): per id, a statement cost as much as the update.
    markOrphans: write<{ ids: string; now: string }>(
      `UPDATE event_published SET orphan = @now WHERE event_id IN (SELECT value FROM json_each(@ids)) AND orphan IS NULL`,
    ),
    insertDeadLetter: write<IdNow & { attempts: number; reason: string }>(
      `INSERT OR REPLACE INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (@id, @attempts, @reason, @now)`,
    ),
    deadLetters: stmt<[{ limit: number }], DeadLetter>(
      `SELECT d.event_id AS eventId, e.domain, e.name, e.pid, d.attempts, d.reason, d.at
       FROM eventflow_dead_letter d JOIN event e ON e.id = d.event_id ORDER BY d.at DESC, d.rowid DESC LIMIT @limit`,
    ),

    nextScheduled: stmt<[], { next: string | null }>(
      `SELECT MIN(scheduled) AS next FROM event_scheduled WHERE executed IS NULL`,
    ),
    dueScheduled: events<{ now: string }>(
      `SELECT ${COLUMNS} FROM event_scheduled s JOIN event e ON e.id = s.event_id
       WHERE s.executed IS NULL AND s.scheduled <= @now ORDER BY s.scheduled, e.position`,
    ),
    claimScheduled: write<IdNow>(`UPDATE event_scheduled SET executed = @now WHERE event_id = @id AND executed IS NULL`),
    // Firing moves the event to the end of the log; sqlite_sequence is bumped by hand because
    // AUTOINCREMENT only tracks inserted rowids.
    resequence: write<IdNow>(
      `UPDATE event SET position = (SELECT seq + 1 FROM sqlite_sequence WHERE name = 'event'), timestamp = @now WHERE id = @id`,
    ),
    bumpSequence: write<Id>(`UPDATE sqlite_sequence SET seq = (SELECT position FROM event WHERE id = @id) WHERE name = 'event'`),
    settleScheduled: firstOutcome('event_scheduled'),
  };
}

export type Statements = ReturnType<typeof prepareStatements>;

export function toStoredEvent(row: EventRow): StoredEvent {
  const event: StoredEvent = { position: row.position, id: row.id, timestamp: row.timestamp, domain: row.domain, rid: row.rid, pid: row.pid, name: row.name, data: JSON.parse(row.data) as JsonValue };
  // Only events that have one carry a trace context (PROTOCOL.md › Stored event).
  if (row.traceparent != null) {
    event.traceparent = row.traceparent;
    if (row.tracestate != null) event.tracestate = row.tracestate;
  }
  return event;
}

export function isoDate(date: Date, what: string): string {
  if (Number.isNaN(date.getTime())) {
    throw new EventflowError('E_EVENTFLOW_INVALID_DATE', `${what} is not a valid date`);
  }
  return date.toISOString();
}

export function now(): string {
  return new Date().toISOString();
}
