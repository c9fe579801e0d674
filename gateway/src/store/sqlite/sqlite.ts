/**
 * The SQLite implementation of EventStore: v4's tables and state columns, plus `position` as the
 * AUTOINCREMENT rowid of `event`. AUTOINCREMENT (not a plain rowid) because a plain rowid may be
 * reused after the newest event is deleted, and clients resume by position.
 *
 * Times are ISO-8601 UTC text with milliseconds, so comparing text compares time.
 */
import { ensureDirectory } from '../ensure-dir.js';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { EventflowError, type JsonValue, type Position, type StoredEvent } from '@eventflow/core';
import { GroupCommit } from '../group-commit.js';
import { startCheckpointer, type Checkpointer } from './checkpointer.js';
import { isSameEvent } from '../same-event.js';
import { versionConflict, type AppendOptions, type AppendOutcome, type AppendRequest, type AppendResult, type EventFilter, type EventStore, type NewEvent, type Outcome } from '../store.js';
import type { DeadLetter } from '../store.js';

export interface SqliteStoreOptions {
  /** A file path, or ':memory:'. */
  path: string;
}

const SCHEMA_VERSION = 1;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);

CREATE TABLE IF NOT EXISTS event (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  timestamp TEXT NOT NULL,
  domain TEXT NOT NULL,
  rid TEXT NULL REFERENCES event(id) ON DELETE SET NULL,
  pid TEXT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_rid ON event (rid);
CREATE INDEX IF NOT EXISTS idx_name ON event (name, position);
CREATE INDEX IF NOT EXISTS idx_domain ON event (domain, position);
CREATE INDEX IF NOT EXISTS idx_domain_pid ON event (domain, pid, position);

CREATE TABLE IF NOT EXISTS event_cpid (
  event_id TEXT NOT NULL REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  domain TEXT NOT NULL, cpid TEXT NOT NULL,
  PRIMARY KEY (event_id, domain, cpid)
);
CREATE INDEX IF NOT EXISTS idx_domain_cpid ON event_cpid (domain, cpid);

CREATE TABLE IF NOT EXISTS event_eid (
  event_id TEXT NOT NULL REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  eid TEXT NOT NULL, PRIMARY KEY (event_id, eid)
);
CREATE INDEX IF NOT EXISTS idx_eid ON event_eid (eid);

CREATE TABLE IF NOT EXISTS event_published (
  event_id TEXT NOT NULL PRIMARY KEY REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  published TEXT NOT NULL, publisher TEXT NOT NULL, consumer TEXT NULL, hub TEXT NULL,
  consumed_hub TEXT NULL, consumed_spoke TEXT NULL,
  success TEXT NULL, failed TEXT NULL, orphan TEXT NULL
);
CREATE INDEX IF NOT EXISTS idx_published ON event_published (published);
CREATE INDEX IF NOT EXISTS idx_consumed_hub ON event_published (consumed_hub);
CREATE INDEX IF NOT EXISTS idx_consumed_spoke ON event_published (consumed_spoke);

CREATE TABLE IF NOT EXISTS event_scheduled (
  event_id TEXT NOT NULL PRIMARY KEY REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  timestamp TEXT NOT NULL, scheduled TEXT NOT NULL, executed TEXT NULL, success TEXT NULL, failed TEXT NULL
);
CREATE INDEX IF NOT EXISTS idx_scheduled_due ON event_scheduled (executed, scheduled);

CREATE TABLE IF NOT EXISTS eventflow_dead_letter (
  event_id TEXT NOT NULL PRIMARY KEY REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  attempts INTEGER NOT NULL, reason TEXT NOT NULL, at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_dead_letter_at ON eventflow_dead_letter (at);
`;

/** An event as stored: `data` is JSON text. */
type EventRow = Omit<StoredEvent, 'data'> & { data: string };

const COLUMNS = 'e.position, e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, e.data';

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

function prepareStatements(db: Database.Database) {
  const events = <P extends object>(sql: string) => db.prepare<P, EventRow>(sql);
  const write = <P extends object>(sql: string) => db.prepare<P>(sql);
  type Id = { id: string };
  type IdNow = { id: string; now: string };
  type Stream = { domain: string; pid: string };
  const firstOutcome = (table: string) => ({
    success: write<IdNow>(`UPDATE ${table} SET success = @now WHERE event_id = @id AND ${UNSETTLED}`),
    failed: write<IdNow>(`UPDATE ${table} SET failed = @now WHERE event_id = @id AND ${UNSETTLED}`),
  });
  return {
    head: db.prepare<[], { seq: number }>(`SELECT seq FROM sqlite_sequence WHERE name = 'event'`),
    schemaVersion: db.prepare<[], { value: string }>(`SELECT value FROM meta WHERE key = 'schema_version'`),
    setSchemaVersion: db.prepare<[string]>(`INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)`),
    exists: db.prepare<[string], { one: number }>(`SELECT 1 AS one FROM event WHERE id = ?`),

    insertEvent: write<Omit<EventRow, 'position'>>(
      `INSERT INTO event (id, timestamp, domain, rid, pid, name, data)
       VALUES (@id, @timestamp, @domain, @rid, @pid, @name, @data)`,
    ),
    insertPublished: write<IdNow & { publisher: string; hub: string | null; claimed: string | null }>(
      `INSERT INTO event_published (event_id, published, publisher, hub, consumed_hub) VALUES (@id, @now, @publisher, @hub, @claimed)`,
    ),
    insertScheduled: write<IdNow & { scheduled: string }>(
      `INSERT INTO event_scheduled (event_id, timestamp, scheduled) VALUES (@id, @now, @scheduled)`,
    ),

    read: events<Id>(`SELECT ${COLUMNS} FROM event e WHERE e.id = @id`),
    eventlog: events<Stream & { after: number }>(
      `SELECT ${COLUMNS} FROM event e WHERE ${IN_STREAM} AND e.position > @after AND ${FIRED} ORDER BY e.position`,
    ),
    countEventlog: db.prepare<Stream, { count: number }>(`SELECT COUNT(*) AS count FROM event e WHERE ${IN_STREAM} AND ${FIRED}`),
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
    distinctPids: db.prepare<[string], { pid: string }>(
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
       WHERE event_id = @id AND consumed_spoke IS NULL`,
    ),
    releaseConsumerClaim: write<Id>(
      `UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id = @id AND ${UNSETTLED}`,
    ),
    settle: firstOutcome('event_published'),
    markOrphan: write<IdNow>(`UPDATE event_published SET orphan = @now WHERE event_id = @id AND orphan IS NULL`),
    insertDeadLetter: write<IdNow & { attempts: number; reason: string }>(
      `INSERT OR REPLACE INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (@id, @attempts, @reason, @now)`,
    ),
    deadLetters: db.prepare<{ limit: number }, DeadLetter>(
      `SELECT d.event_id AS eventId, e.domain, e.name, e.pid, d.attempts, d.reason, d.at
       FROM eventflow_dead_letter d JOIN event e ON e.id = d.event_id ORDER BY d.at DESC, d.rowid DESC LIMIT @limit`,
    ),

    nextScheduled: db.prepare<[], { next: string | null }>(
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

type Statements = ReturnType<typeof prepareStatements>;

function toStoredEvent(row: EventRow): StoredEvent {
  return { ...row, data: JSON.parse(row.data) as JsonValue };
}

function isoDate(date: Date, what: string): string {
  if (Number.isNaN(date.getTime())) {
    throw new EventflowError('E_EVENTFLOW_INVALID_DATE', `${what} is not a valid date`);
  }
  return date.toISOString();
}

function now(): string {
  return new Date().toISOString();
}

/** An append checked and serialised outside the transaction, or the error that ends it there. */
type PreparedAppend =
  | { ok: true; event: NewEvent; options: AppendOptions; rid: string | null; data: string; scheduled: string | undefined }
  | { ok: false; error: Error };

function prepareAppend({ event, options = {} }: AppendRequest): PreparedAppend {
  try {
    const scheduled = options.scheduledAt === undefined ? undefined : isoDate(options.scheduledAt, 'scheduledAt');
    return { ok: true, event, options, rid: event.rid ?? null, data: JSON.stringify(event.data), scheduled };
  } catch (error) {
    return { ok: false, error: asError(error) };
  }
}

/** A driver error caused by one row's values, not by the database's state. */
function isRowError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CONSTRAINT') || code === 'SQLITE_TOOBIG' || code === 'SQLITE_MISMATCH');
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * One append inside the batch's transaction. Every coded refusal is thrown before the first
 * write, so that catching it leaves nothing of this request behind.
 */
function insertOne(s: Statements, append: Extract<PreparedAppend, { ok: true }>, timestamp: string): AppendResult {
  const { event, options, rid, data, scheduled } = append;
  const existing = s.read.get({ id: event.id });
  if (existing !== undefined) {
    const stored = toStoredEvent(existing);
    if (isSameEvent(stored, event)) return { event: stored, created: false };
    throw new EventflowError(
      'E_EVENTFLOW_DUPLICATE_ID',
      `event id "${event.id}" is already used by another event; use a new id, or omit it and let the client generate one`,
      { details: { id: event.id } },
    );
  }
  if (rid !== null && s.exists.get(rid) === undefined) {
    throw new EventflowError('E_EVENTFLOW_REFERENCE_NOT_FOUND', `event "${event.id}" refers (rid) to event "${rid}", which does not exist`, {
      details: { id: event.id, rid },
    });
  }
  const { expectedVersion } = options;
  if (expectedVersion !== undefined) {
    const current = s.countEventlog.get({ domain: event.domain, pid: event.pid })?.count ?? 0;
    if (current !== expectedVersion) throw versionConflict(event.domain, event.pid, current, expectedVersion);
  }
  const row = { id: event.id, timestamp, domain: event.domain, rid, pid: event.pid, name: event.name, data };
  const position = Number(s.insertEvent.run(row).lastInsertRowid);
  if (options.publisher !== undefined) {
    const hub = options.routedBy ?? null;
    s.insertPublished.run({ id: event.id, now: timestamp, publisher: options.publisher, hub, claimed: hub === null ? null : timestamp });
  }
  if (scheduled !== undefined) s.insertScheduled.run({ id: event.id, now: timestamp, scheduled });
  // The request's own data: what was just stored, as plain JSON (no need to parse it back).
  return { event: { ...row, data: event.data, position }, created: true };
}

export class SqliteStore implements EventStore {
  readonly kind = 'sqlite';
  readonly #path: string;
  #open: { db: Database.Database; s: Statements } | undefined;
  #checkpointer: Checkpointer | undefined;
  readonly #group = new GroupCommit((requests) => this.appendBatch(requests));

  constructor(options: SqliteStoreOptions) {
    this.#path = options.path;
  }

  async init(): Promise<void> {
    if (this.#open !== undefined) return;
    if (this.#path !== ':memory:') ensureDirectory(dirname(this.#path));
    const db = new Database(this.#path);
    try {
      // busy_timeout first, so that switching to WAL waits for another process instead of failing.
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.pragma('foreign_keys = ON');
      // IMMEDIATE so that two gateways initialising one file at once do not interleave.
      db.transaction(() => db.exec(SCHEMA)).immediate();
      const statements = prepareStatements(db);
      statements.setSchemaVersion.run(String(SCHEMA_VERSION));
      const version = Number(statements.schemaVersion.get()?.value);
      if (version > SCHEMA_VERSION) {
        throw new EventflowError(
          'E_EVENTFLOW_STORE_FAILED',
          `database "${this.#path}" has schema version ${version}, newer than the ${SCHEMA_VERSION} this gateway supports; upgrade the gateway`,
        );
      }
      this.#open = { db, s: statements };
    } catch (error) {
      db.close();
      throw error;
    }
    if (this.#path === ':memory:') return;
    try {
      // A checkpoint failure is not fatal: SQLite checkpoints again inside the next commits.
      this.#checkpointer = await startCheckpointer(this.#path, () => this.#open?.db.pragma('wal_autocheckpoint = 1000'));
      this.#open.db.pragma('wal_autocheckpoint = 0');
    } catch {
      // Without a worker the automatic checkpoint stays on: slower tail, same data.
    }
  }

  async close(): Promise<void> {
    // Appends already accepted are written (or fail) before the database goes.
    await this.#group.idle();
    const open = this.#open;
    this.#open = undefined;
    const checkpointer = this.#checkpointer;
    this.#checkpointer = undefined;
    await checkpointer?.stop();
    open?.db.close();
  }

  get #store(): { db: Database.Database; s: Statements } {
    if (this.#open === undefined) {
      throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the SQLite store is not open; call init() first');
    }
    return this.#open;
  }

  get #s(): Statements {
    return this.#store.s;
  }

  async head(): Promise<Position> {
    // sqlite_sequence rather than MAX(position): deleting the newest event must not move head back.
    return this.#s.head.get()?.seq ?? 0;
  }

  append(event: NewEvent, options: AppendOptions = {}): Promise<AppendResult> {
    return this.#group.append(event, options);
  }

  async appendBatch(requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
    const s = this.#s;
    const prepared = requests.map(prepareAppend);
    // One IMMEDIATE transaction: the write lock is taken up front, so no check can go stale
    // before its insert, and the whole batch costs one commit.
    const run = this.#store.db.transaction((): AppendOutcome[] => {
      const timestamp = now();
      return prepared.map((append) => {
        if (!append.ok) return append;
        try {
          return { ok: true, result: insertOne(s, append, timestamp) };
        } catch (error) {
          // A coded refusal is thrown before the request writes anything: the batch goes on.
          if (error instanceof EventflowError) return { ok: false, error };
          throw error;
        }
      });
    });
    try {
      return run.immediate();
    } catch (error) {
      // The batch was rolled back whole. An error of one row (a constraint, a value too big): each
      // request alone, so that only the one that causes it fails. Anything else (the database
      // busy or broken) would fail each of them again, after as long a wait: it fails them all.
      if (requests.length === 1 || !isRowError(error)) return requests.map(() => ({ ok: false, error: asError(error) }));
      const outcomes: AppendOutcome[] = [];
      for (const request of requests) outcomes.push(...(await this.appendBatch([request])));
      return outcomes;
    }
  }

  async read(id: string): Promise<StoredEvent | undefined> {
    const row = this.#s.read.get({ id });
    return row === undefined ? undefined : toStoredEvent(row);
  }

  async readEventlog(domain: string, pid: string, after: Position = 0): Promise<StoredEvent[]> {
    return this.#s.eventlog.all({ domain, pid, after }).map(toStoredEvent);
  }

  async countEventlog(domain: string, pid: string): Promise<number> {
    return this.#s.countEventlog.get({ domain, pid })?.count ?? 0;
  }

  async readEventlogByTimestamp(domain: string, pid: string, from: Date, to: Date): Promise<StoredEvent[]> {
    const range = { domain, pid, from: isoDate(from, 'from'), to: isoDate(to, 'to') };
    return this.#s.eventlogByTimestamp.all(range).map(toStoredEvent);
  }

  async readEventlogFilteredByNames(domain: string, pid: string, names: readonly string[]): Promise<StoredEvent[]> {
    return this.#s.eventlogByNames.all({ domain, pid, names: JSON.stringify(names) }).map(toStoredEvent);
  }

  async readEventlogByChildProcess(domain: string, cpid: string): Promise<StoredEvent[]> {
    return this.#s.byChildProcess.all({ domain, cpid }).map(toStoredEvent);
  }

  async readEventlogByEid(eid: string): Promise<StoredEvent[]> {
    return this.#s.byEid.all({ eid }).map(toStoredEvent);
  }

  async readEventlogByDomainAndEid(domain: string, eid: string): Promise<StoredEvent[]> {
    return this.#s.byDomainAndEid.all({ domain, eid }).map(toStoredEvent);
  }

  async readDistinctPidByDomain(domain: string): Promise<string[]> {
    return this.#s.distinctPids.all(domain).map((row) => row.pid);
  }

  async readPublishedAfter(filter: EventFilter, after: Position, limit: number): Promise<StoredEvent[]> {
    // A negative LIMIT means "no limit" to SQLite; the caller asked for at most `limit`.
    const bounded = Math.max(0, Math.floor(limit));
    const rows =
      filter.name === '*'
        ? this.#s.publishedAfterAny.all({ domain: filter.domain, after, limit: bounded })
        : this.#s.publishedAfterNamed.all({ domain: filter.domain, name: filter.name, after, limit: bounded });
    return rows.map(toStoredEvent);
  }

  async findOutcome(
    domain: string,
    pid: string,
    names: readonly string[],
    after: Position,
  ): Promise<StoredEvent | undefined> {
    const row = this.#s.findOutcome.get({ domain, pid, names: JSON.stringify(names), after });
    return row === undefined ? undefined : toStoredEvent(row);
  }

  async delete(id: string): Promise<boolean> {
    return this.#s.delete.run({ id }).changes > 0;
  }

  async deleteEventlog(domain: string, pid: string): Promise<boolean> {
    return this.#s.deleteEventlog.run({ domain, pid }).changes > 0;
  }

  async persistEntityAssociation(eventId: string, eid: string): Promise<void> {
    this.#associate(eventId, (s) => s.persistEid.run({ id: eventId, eid }));
  }

  async persistChildProcessAssociation(eventId: string, domain: string, cpid: string): Promise<void> {
    this.#associate(eventId, (s) => s.persistCpid.run({ id: eventId, domain, cpid }));
  }

  #associate(eventId: string, insert: (s: Statements) => void): void {
    const { db, s } = this.#store;
    db.transaction(() => {
      // Checked first so that an unknown event fails with the documented code, not a raw foreign-key error.
      if (s.exists.get(eventId) === undefined) {
        throw new EventflowError('E_EVENTFLOW_EVENT_NOT_FOUND', `no event has id "${eventId}"`, {
          details: { id: eventId },
        });
      }
      insert(s);
    })();
  }

  async claimForRouting(eventId: string, hub: string): Promise<boolean> {
    return this.#s.claimForRouting.run({ id: eventId, now: now(), hub }).changes === 1;
  }

  async claimAllForRouting(eventIds: readonly string[], hub: string): Promise<string[]> {
    const { db, s } = this.#store;
    const at = now();
    return db.transaction(() => eventIds.filter((id) => s.claimForRouting.run({ id, now: at, hub }).changes === 1))();
  }

  async claimForConsumer(eventId: string, consumer: string): Promise<boolean> {
    return this.#s.claimForConsumer.run({ id: eventId, now: now(), consumer }).changes === 1;
  }

  async releaseConsumerClaim(eventId: string): Promise<void> {
    this.#s.releaseConsumerClaim.run({ id: eventId });
  }

  async settle(eventId: string, outcome: Outcome): Promise<void> {
    this.#s.settle[outcome].run({ id: eventId, now: now() });
  }

  async markOrphan(eventId: string): Promise<void> {
    this.#s.markOrphan.run({ id: eventId, now: now() });
  }

  async markOrphans(eventIds: readonly string[]): Promise<void> {
    const { db, s } = this.#store;
    const at = now();
    db.transaction(() => {
      for (const id of eventIds) s.markOrphan.run({ id, now: at });
    })();
  }

  async deadLetter(eventId: string, attempts: number, reason: string): Promise<boolean> {
    const s = this.#s;
    const run = this.#store.db.transaction((): boolean => {
      const at = now();
      if (s.settle.failed.run({ id: eventId, now: at }).changes !== 1) return false;
      s.insertDeadLetter.run({ id: eventId, now: at, attempts, reason });
      return true;
    });
    return run.immediate();
  }

  async deadLetters(limit = 100): Promise<DeadLetter[]> {
    return this.#s.deadLetters.all({ limit });
  }

  async nextScheduled(): Promise<Date | undefined> {
    const next = this.#s.nextScheduled.get()?.next;
    return next === null || next === undefined ? undefined : new Date(next);
  }

  async claimDueScheduled(at: Date): Promise<StoredEvent[]> {
    const s = this.#s;
    const due = isoDate(at, 'now');
    const run = this.#store.db.transaction((): StoredEvent[] => {
      const executed = now();
      const fired: StoredEvent[] = [];
      for (const row of s.dueScheduled.all({ now: due })) {
        if (s.claimScheduled.run({ id: row.id, now: executed }).changes !== 1) continue;
        s.resequence.run({ id: row.id, now: executed });
        s.bumpSequence.run({ id: row.id });
        const moved = s.read.get({ id: row.id });
        if (moved) fired.push(toStoredEvent(moved));
      }
      return fired;
    });
    return run.immediate();
  }

  async settleScheduled(eventId: string, outcome: Outcome): Promise<void> {
    this.#s.settleScheduled[outcome].run({ id: eventId, now: now() });
  }
}
