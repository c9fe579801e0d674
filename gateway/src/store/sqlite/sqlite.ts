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
import { EventflowError, type Position, type StoredEvent } from '@eventflow/core';
import { GroupCommit } from '../group-commit.js';
import { pageCacheMb, setPageCache } from './page-cache.js';
import { BackgroundCheckpointer } from './background-checkpointer.js';
import type { AppendOptions, AppendOutcome, AppendRequest, AppendResult, DeadLetter, EventFilter, EventStore, NewEvent, Outcome } from '../store.js';
import { ADDED_COLUMNS, refuseNewerSchema, SCHEMA, SCHEMA_VERSION } from './schema.js';
import { isoDate, now, prepareStatements, toStoredEvent, type Statements } from './statements.js';
import { asError, insertOne, isRowError, prepareAppend, readBack, type PreparedAppend } from './appends.js';
import { SqliteSnapshots } from './snapshots.js';
import type { SnapshotRead } from '../snapshots.js';
import type { DeliveryLedger } from '../ledger.js';
import { SqliteLedger } from './ledger.js';
import { SqliteCatalog } from './catalog.js';
import { RecentPublished } from '../recent.js';
import { WriteHealth } from '../write-health.js';
import { WAL_BOUNDS } from './checkpointer.js';
import { deferred, immediate, SQLITE_BUSY_TIMEOUT_MS } from './transactions.js';
import { AppendRiders, type RodeRider } from './append-riders.js';
import { OrphanMarks } from './orphan-marks.js';
import { StoreFile } from './store-file.js';
import { checkSqliteWrites } from './write-check.js';
import { claimDue } from './scheduled.js';
import type { DeliveryRef, LedgerAction } from '../ledger.js';

export interface SqliteStoreOptions {
  /** A file path, or ':memory:'. */
  path: string;
  /** SQLite's page cache, in MiB (EVENTFLOW_SQLITE_CACHE_MB). */
  cacheMb?: number;
}

export class SqliteStore implements EventStore {
  readonly kind = 'sqlite';
  readonly #path: string;
  readonly #cacheMb: number;
  #open: { db: Database.Database; s: Statements; snapshots: SqliteSnapshots } | undefined;
  #checkpointer: BackgroundCheckpointer | undefined;
  #ledger: SqliteLedger | undefined;
  /** retakeConsumerClaim's statement, prepared on first use (per open database). */
  #retake: Database.Statement<[{ id: string; now: string; consumer: string; owner: string; at: number }]> | undefined;
  #catalog: SqliteCatalog | undefined;
  readonly #group = new GroupCommit((requests) => this.appendBatch(requests));
  readonly #riders = new AppendRiders((work) => immediate(this.#store.db, work));
  /** What the last batches published, for the reads that follow them. */
  readonly #recent = new RecentPublished();
  readonly #orphanMarks = new OrphanMarks((ids) => this.#s.markOrphans.run({ ids: JSON.stringify(ids), now: now() }));
  /** Whether appends work (/readyz): see ../write-health.ts. */
  readonly #writes = new WriteHealth();
  /** The database file at the path is the one open (store-file.ts); none in memory. */
  #file: StoreFile | undefined;

  constructor(options: SqliteStoreOptions) {
    this.#path = options.path;
    this.#cacheMb = pageCacheMb(options.cacheMb);
  }

  async init(): Promise<void> {
    if (this.#open !== undefined) return;
    if (this.#path !== ':memory:') ensureDirectory(dirname(this.#path));
    const db = new Database(this.#path);
    try {
      // busy_timeout first, so that switching to WAL waits for another process instead of failing; short once open (SQLITE_BUSY_TIMEOUT_MS).
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      // A WAL that grew past the backstop's size (a large batch, a checkpoint held back) is cut back to it
      // when it starts over. Not to the worker's limit: a WAL cut at every restart is grown again by the
      // next commits, and a write that extends the file cost twice one into its allocated pages (a
      // steady 500 jobs/s: the gateway's commits ~25% slower). Raised with the limit (walLimited).
      db.pragma(`journal_size_limit = ${2 * WAL_BOUNDS.min * Number(db.pragma('page_size', { simple: true }))}`);
      db.pragma('foreign_keys = ON');
      setPageCache(db, this.#cacheMb);
      refuseNewerSchema(db, this.#path);
      // IMMEDIATE so that two gateways initialising one file at once do not interleave.
      db.transaction(() => {
        db.exec(SCHEMA);
        for (const [table, column, ddl] of ADDED_COLUMNS) {
          const columns = db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>;
          if (!columns.some((existing) => existing.name === column)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${ddl}`);
        }
      }).immediate();
      const statements = prepareStatements(db);
      statements.setSchemaVersion.run(String(SCHEMA_VERSION));
      const eventlog = (domain: string, pid: string, after: Position) => statements.eventlog.all({ domain, pid, after }).map(toStoredEvent);
      db.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
      this.#open = { db, s: statements, snapshots: new SqliteSnapshots(db, eventlog) };
      // Its WAL exists from here on. While a file is found moved, the writes that check nothing first (deletes, snapshots, orphan marks) fail too; the worker checkpoints no more.
      this.#file = this.#path === ':memory:' ? undefined : new StoreFile(this.#path, (moved) => void (db.pragma(`query_only = ${moved ? 'ON' : 'OFF'}`), moved && this.#checkpointer?.stop()));
      // A claim or settle that failed with the database (no space, I/O) tells /readyz and gives the WAL's space back, as an append does.
      this.#ledger = new SqliteLedger(db, { check: () => this.#file?.check(), failed: (error) => void (isRowError(error) || this.#failedWrite()) });
    } catch (error) {
      db.close();
      throw error;
    }
    if (this.#path === ':memory:') return;
    // Not waited for (background-checkpointer.ts); until it runs, the automatic checkpoint stays on.
    this.#checkpointer = new BackgroundCheckpointer(this.#path, {
      // Only a backstop: the worker starts the WAL over at `frames` (checkpointer.ts).
      limit: (frames) => {
        const open = this.#open?.db;
        open?.pragma(`wal_autocheckpoint = ${2 * frames}`);
        open?.pragma(`journal_size_limit = ${2 * frames * Number(open.pragma('page_size', { simple: true }))}`);
      },
      // The worker gone: SQLite checkpoints again inside the next commits.
      gone: () => this.#open?.db.pragma('wal_autocheckpoint = 1000'),
      // Between transactions (this runs as a message from the worker); PASSIVE never waits on a lock.
      restart: () => this.#open?.db.pragma('wal_checkpoint(PASSIVE)'),
    });
  }

  async close(): Promise<void> {
    // Appends already accepted are written (or fail) before the database goes.
    await this.#group.idle();
    await this.#orphanMarks.idle();
    const open = this.#open;
    this.#open = undefined;
    this.#retake = undefined;
    this.#catalog = undefined;
    this.#recent.forget();
    const checkpointer = this.#checkpointer;
    this.#checkpointer = undefined;
    await checkpointer?.stop();
    open?.db.close();
  }

  get #store(): { db: Database.Database; s: Statements; snapshots: SqliteSnapshots } {
    if (this.#open === undefined) {
      throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the SQLite store is not open; call init() first');
    }
    return this.#open;
  }

  ledger(): DeliveryLedger {
    if (this.#ledger === undefined || this.#open === undefined) throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the SQLite store is not open; call init() first');
    return this.#ledger;
  }

  get catalog(): SqliteCatalog {
    const { db } = this.#store;
    return (this.#catalog ??= new SqliteCatalog(db, () => this.#recent.forget()));
  }

  get #s(): Statements {
    return this.#store.s;
  }

  async head(): Promise<Position> {
    // sqlite_sequence rather than MAX(position): deleting the newest event must not move head back.
    return this.#recent.headAt(this.#dataVersion()) ?? this.#s.head.get()?.seq ?? 0;
  }

  #dataVersion(): number {
    return this.#s.dataVersion.get()?.data_version ?? -1;
  }

  checkWrites(): Promise<void> {
    // Its file removed while open: no write is made any more (store-file.ts), whether or not one failed yet.
    const moved = this.#file?.moved();
    if (moved) return Promise.reject(moved);
    return checkSqliteWrites(this.#store.db, this.#writes, () => this.#checkpointer?.truncate());
  }

  appendsDue(): boolean {
    return this.#group.due;
  }

  append(event: NewEvent, options: AppendOptions = {}): Promise<AppendResult> {
    return this.#group.append(event, options);
  }

  applyWithAppends(actions: readonly LedgerAction[]): Promise<Array<DeliveryRef | undefined>> | undefined {
    const ledger = this.#ledger;
    return ledger !== undefined && this.#group.due ? this.#riders.add(() => ledger.applyNow(actions)) : undefined;
  }

  async appendBatch(requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
    const s = this.#s;
    const prepared = requests.map(prepareAppend);
    // After a failed commit, an event above this was stored by this batch (one writer per file). Read in the transaction (outside, a read is a snapshot of its own): a failed BEGIN stored nothing.
    let headBefore: number | undefined;
    let rode: RodeRider[] = [];
    // IMMEDIATE: the write lock is taken up front, so no check goes stale before its insert; one commit.
    const { db } = this.#store;
    const run = () => {
      const timestamp = now();
      const version = this.#dataVersion();
      const before = (headBefore = this.#recent.headAt(version) ?? s.head.get()?.seq ?? 0);
      const published: StoredEvent[] = [];
      let after = before; // the head after the batch: its last new event's position (AUTOINCREMENT, one writer)
      const outcomes = prepared.map((append): AppendOutcome => {
        if (!append.ok) return append;
        try {
          const result = insertOne(s, append, timestamp);
          if (result.created && result.event.position > after) after = result.event.position;
          if (result.created && append.options.publisher !== undefined && append.scheduled === undefined) published.push(result.event);
          return { ok: true, result };
        } catch (error) {
          // A coded refusal is thrown before the request writes anything: the batch goes on.
          if (error instanceof EventflowError) return { ok: false, error };
          throw error;
        }
      });
      this.#ledger?.leaseAppended(published, before, after);
      rode = this.#riders.ride();
      return { outcomes, before, after, version, published };
    };
    try {
      this.#file?.check();
      const { outcomes, before, after, version, published } = immediate(db, run);
      this.#ledger?.appendEnded(true);
      this.#recent.committed(before, after, version, published);
      this.#writes.succeeded();
      this.#riders.committed(rode);
      return outcomes;
    } catch (error) {
      this.#ledger?.appendEnded(false);
      this.#riders.failed(rode);
      // An error of one row (a constraint, a value too big): the batch was rolled back whole; each
      // request alone, so that only the one that causes it fails.
      if (isRowError(error)) {
        if (requests.length === 1) return [{ ok: false, error: asError(error) }];
        const outcomes: AppendOutcome[] = [];
        for (const request of requests) outcomes.push(...(await this.appendBatch([request])));
        return outcomes;
      }
      // Anything else is the database's state (full, I/O, busy): it would fail each of them again.
      return this.#afterFailedWrite(prepared, headBefore ?? s.head.get()?.seq ?? 0, error);
    }
  }

  /**
   * A batch failed with the database (no space, I/O, busy). A COMMIT can report an error after
   * the commit itself succeeded (a failed automatic checkpoint after it, say), so what the batch
   * stored is read back: each request is answered as committed, or as not stored (retryable).
   * Writes are failing until one succeeds (/readyz), and the WAL gives its space back as soon as
   * the database file can take its pages (checkpointer.ts).
   */
  #afterFailedWrite(prepared: readonly PreparedAppend[], headBefore: number, error: unknown): AppendOutcome[] {
    this.#failedWrite();
    this.#recent.forget();
    return readBack(this.#s, prepared, headBefore, error);
  }

  /** A write failed with the database's state: writes are failing (/readyz), and the WAL gives its space back. */
  #failedWrite(): void {
    this.#writes.failed();
    void this.#checkpointer?.truncate();
  }

  async read(id: string): Promise<StoredEvent | undefined> {
    const row = this.#s.read.get({ id });
    return row === undefined ? undefined : toStoredEvent(row);
  }

  async readEventlog(domain: string, pid: string, after: Position = 0): Promise<StoredEvent[]> {
    return this.#s.eventlog.all({ domain, pid, after }).map(toStoredEvent);
  }

  readSnapshot(domain: string, pid: string): Promise<SnapshotRead> {
    return this.#store.snapshots.readSnapshot(domain, pid);
  }

  writeSnapshot(domain: string, pid: string, snapshot: { count: number; position: Position; eventId: string; state: string }): Promise<void> {
    return this.#store.snapshots.writeSnapshot(domain, pid, snapshot);
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
    const recent = this.#readRecent(filter, after, bounded);
    if (recent !== undefined) return recent;
    const rows =
      filter.name === '*'
        ? this.#s.publishedAfterAny.all({ domain: filter.domain, after, limit: bounded })
        : this.#s.publishedAfterNamed.all({ domain: filter.domain, name: filter.name, after, limit: bounded });
    return rows.map(toStoredEvent);
  }

  async readPublishedSince(after: Position, limit: number): Promise<StoredEvent[]> {
    const bounded = Math.max(0, Math.floor(limit));
    return this.#readRecent(undefined, after, bounded) ?? this.#s.publishedSince.all({ after, limit: bounded }).map(toStoredEvent);
  }

  #readRecent(filter: EventFilter | undefined, after: Position, limit: number): StoredEvent[] | undefined {
    const version = this.#dataVersion();
    const head = this.#recent.headAt(version);
    return head === undefined ? undefined : this.#recent.read(filter, after, limit, head, version);
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
    this.#recent.forget();
    return this.#s.delete.run({ id }).changes > 0;
  }

  async deleteEventlog(domain: string, pid: string): Promise<boolean> {
    this.#recent.forget();
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
    deferred(db, () => {
      // Checked first so that an unknown event fails with the documented code, not a raw foreign-key error.
      if (s.exists.get(eventId) === undefined) {
        throw new EventflowError('E_EVENTFLOW_EVENT_NOT_FOUND', `no event has id "${eventId}"`, {
          details: { id: eventId },
        });
      }
      insert(s);
    });
  }

  async claimForRouting(eventId: string, hub: string): Promise<boolean> {
    return this.#s.claimForRouting.run({ id: eventId, now: now(), hub }).changes === 1;
  }

  async claimAllForRouting(eventIds: readonly string[], hub: string): Promise<string[]> {
    const { db, s } = this.#store;
    const at = now();
    return deferred(db, () => eventIds.filter((id) => s.claimForRouting.run({ id, now: at, hub }).changes === 1));
  }

  async claimForConsumer(eventId: string, consumer: string): Promise<boolean> {
    return this.#s.claimForConsumer.run({ id: eventId, now: now(), consumer }).changes === 1;
  }

  async retakeConsumerClaim(eventId: string, consumer: string, lease: { owner: string; now: number }): Promise<boolean> {
    // One statement: atomic under SQLite's single writer. Prepared here, not with the others: the ledger's tables
    // are created after them (SqliteLedger).
    this.#retake ??= this.#store.db.prepare<[{ id: string; now: string; consumer: string; owner: string; at: number }]>(
      `UPDATE event_published SET consumed_spoke = @now, consumer = @consumer
       WHERE event_id = @id AND consumed_spoke IS NULL AND success IS NULL AND failed IS NULL
         AND EXISTS (SELECT 1 FROM eventflow_delivery d WHERE d.event_id = @id AND d.gname = '' AND d.grp = '' AND d.owner = @owner AND d.outcome IS NULL AND d.deadline > @at)`,
    );
    return this.#retake.run({ id: eventId, now: now(), consumer, owner: lease.owner, at: lease.now }).changes === 1;
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

  markOrphans(eventIds: readonly string[]): Promise<void> {
    return this.#orphanMarks.mark(eventIds);
  }

  async deadLetter(eventId: string, attempts: number, reason: string): Promise<boolean> {
    const s = this.#s;
    return immediate(this.#store.db, (): boolean => {
      const at = now();
      if (s.settle.failed.run({ id: eventId, now: at }).changes !== 1) return false;
      s.insertDeadLetter.run({ id: eventId, now: at, attempts, reason });
      return true;
    });
  }

  async deadLetters(limit = 100): Promise<DeadLetter[]> {
    return this.#s.deadLetters.all({ limit });
  }

  async nextScheduled(): Promise<Date | undefined> {
    const next = this.#s.nextScheduled.get()?.next;
    return next === null || next === undefined ? undefined : new Date(next);
  }

  async claimDueScheduled(at: Date): Promise<StoredEvent[]> {
    this.#file?.check();
    const fired = claimDue(this.#store.db, this.#s, at);
    // A fired event moved to a new position, after the recent window's end.
    if (fired.length > 0) this.#recent.forget();
    return fired;
  }

  async settleScheduled(eventId: string, outcome: Outcome): Promise<void> {
    this.#s.settleScheduled[outcome].run({ id: eventId, now: now() });
  }
}
