/**
 * The MySQL 8 / MariaDB 10.11 EventStore, on eventflow v4's tables (schema.ts), shareable with v4 hubs and spokes.
 *
 * Time: every DATETIME is UTC. The pool converts Dates as UTC (`timezone: 'Z'`) and every time the store writes is
 * explicit: UTC_TIMESTAMP() for v4's state columns, UTC_TIMESTAMP(3) read from the server for event timestamps (one
 * clock for all gateways). The session time_zone matters only to v4 peers' DEFAULT-filled columns.
 * JSON: MariaDB returns its JSON (a checked LONGTEXT) as text, MySQL parses; `jsonStrings` makes both return text,
 * parsed here, so that a JSON string value stays a string.
 *
 * Positions, and the lazy positioning of events written by v4 spokes: positions.ts. The write path: appends.ts.
 * Firing scheduled events: scheduled.ts. v4's routing and consumer claims: routing-claims.ts; the hub's routing claim
 * decided before its commit: early-claim.ts.
 */
import type { Pool, PoolConnection } from 'mysql2/promise';
import { EventflowError, type Position, type StoredEvent } from '@eventflow/core';
import { checkWritable, createSchema } from './schema.js';
import { GroupCommit, type BatchTurn } from '../group-commit.js';
import { affected, select, type Params } from './statements.js';
import type { AppendOptions, AppendOutcome, AppendRequest, AppendResult, DeadLetter, EventFilter, EventStore, NewEvent, Outcome } from '../store.js';
import { driverCode, exec, insertReturns, isStoreStateError, missingTable, notOpen, openPool, readAgain, run, storeError, transaction, validDate, type MysqlStoreOptions } from './db.js';
import { WriteHealth, writeFailed } from '../write-health.js';
import { appendTransaction, type PreparedAppend } from './appends.js';
import { AppendRoutine } from './append-routine.js';
import { Positions } from './positions.js';
import { FIRED, type Read } from './rows.js';
import { readSnapshot, writeSnapshot } from './snapshots.js';
import type { SnapshotRead } from '../snapshots.js';
import type { DeliveryLedger } from '../ledger.js';
import { MysqlLedger } from './ledger.js';
import { MysqlCatalog } from './catalog.js';
import { claimEarly } from './early-claim.js';
import { CLAIM_FOR_ROUTING, claimAllWon, PLACEHOLDER_HUB, retakeUnderLease } from './routing-claims.js';
import { insertDeadLetters } from './ledger-operator.js';
import { fireScheduled } from './scheduled.js';
import { checkBinlogFormat } from './binlog.js';
import { RecentPublished } from '../recent.js';

export type { MysqlStoreOptions } from './db.js';

/** The guard that makes the first outcome win (v4 overwrote, and could end with both set). */
const UNSETTLED = 'success IS NULL AND failed IS NULL';
const OUTCOME_COLUMN: Record<Outcome, string> = { success: 'success', failed: 'failed' };

export class MysqlStore implements EventStore {
  readonly kind = 'mysql';
  readonly #options: MysqlStoreOptions;
  #open: Pool | undefined;
  /** Connections for group commits (autocommit off: every batch is one transaction, ended by COMMIT or ROLLBACK). */
  #writer: Pool | undefined;
  /** Connections for claimForRoutingEarly (autocommit off: the claim is decided before its COMMIT returns). */
  #claimer: Pool | undefined;
  /** The server returns rows from an INSERT (db.ts insertReturns): the appends read the clock in their insert. */
  #insertReturns = false;
  /** Whether the append routine runs here (append-routine.ts): a batch's INSERTs in one CALL. */
  readonly #routine = new AppendRoutine();
  /** Hub ids whose hub row is known to exist. */
  readonly #hubs = new Set<string>();
  readonly #positions = new Positions();
  /** This store's batches just committed, for the dispatcher's read right after each (../recent.ts). */
  readonly #recent = new RecentPublished();
  readonly #group = new GroupCommit((requests, turn) => this.appendBatch(requests, turn), { overlap: true });
  /** Whether appends work (/readyz): see ../write-health.ts. */
  readonly #writes = new WriteHealth();
  readonly #ledger: MysqlLedger;
  readonly catalog = new MysqlCatalog(() => this.#pool, (domain, pid, after) => this.readEventlog(domain, pid, after));

  constructor(options: MysqlStoreOptions = {}) {
    this.#options = options;
    this.#ledger = new MysqlLedger(options, this.#writes);
  }

  async init(): Promise<void> {
    if (this.#open !== undefined) return;
    const { host = '127.0.0.1', port = 3306, database = 'eventflow', connectionLimit = 10 } = this.#options;
    const pool = openPool(this.#options, connectionLimit, true);
    // Group commits run one at a time, on their own connections at READ COMMITTED (appends.ts, append-leases.ts).
    const writer = openPool(this.#options, 2, false, true);
    // mysql2 pools connect on first use: a store that never claims early (a gateway) opens none.
    const claimer = openPool(this.#options, 4, false);
    try {
      await createSchema(pool);
      this.#insertReturns = await insertReturns(pool);
      if (this.#insertReturns && this.#options.appendRoutine !== false) await this.#routine.install(pool);
      if (this.#options.checkBinlogFormat !== false) await checkBinlogFormat(pool, writer, { host, port, user: this.#options.user ?? 'root' });
      await this.#ledger.open(pool);
      this.#open = pool;
      this.#writer = writer;
      this.#claimer = claimer;
      await this.#positions.sweep(pool);
    } catch (error) {
      this.#open = undefined;
      this.#writer = undefined;
      this.#claimer = undefined;
      await pool.end().catch(() => undefined);
      await this.#ledger.close().catch(() => undefined);
      await writer.end().catch(() => undefined);
      await claimer.end().catch(() => undefined);
      if (driverCode(error) !== 'ER_BAD_DB_ERROR') throw storeError(error, `open database "${database}" on ${host}:${port}`);
      const message = `database "${database}" does not exist on ${host}:${port}; create it or set EVENTFLOW_MYSQL_DB`;
      throw new EventflowError('E_EVENTFLOW_STORE_FAILED', message, { cause: error });
    }
  }

  async close(): Promise<void> {
    // Appends already accepted are written (or fail) before the pool goes.
    await this.#group.idle();
    const pool = this.#open;
    const writer = this.#writer;
    const claimer = this.#claimer;
    this.#open = undefined;
    this.#writer = undefined;
    this.#claimer = undefined;
    this.#routine.close();
    this.#hubs.clear();
    await this.#positions.sweeping;
    await pool?.end();
    await this.#ledger.close();
    await writer?.end();
    await claimer?.end();
  }

  ledger(): DeliveryLedger {
    return this.#ledger;
  }

  get #pool(): Pool {
    if (this.#open === undefined) throw notOpen();
    return this.#open;
  }

  /** Runs one store operation, wrapping driver errors. */
  #do<T>(what: string, work: (pool: Pool) => Promise<T>): Promise<T> {
    return run(this.#pool, what, work);
  }

  /** One statement (see db.ts exec): how many rows it matched. */
  #exec(what: string, sql: string, params: Params): Promise<number> {
    return exec(this.#pool, what, sql, params);
  }

  /** One row of one read (read again once on another connection when its own is lost under it: db.ts readAgain). */
  #one<T>(what: string, sql: string, params: Params = []): Promise<T | undefined> {
    return this.#do(what, (pool) => readAgain(async () => (await select<T>(pool, sql, params))[0]));
  }

  /** Runs `work` in a transaction, again from the start when it fails with one of `retryOn`. */
  #transaction<T>(work: (conn: PoolConnection) => Promise<T>, retryOn: readonly string[] = []): Promise<T> {
    return transaction(this.#pool, work, retryOn);
  }

  /** Runs a multi-event read, after positioning the unpositioned events of its scope (see positions.ts); again once when its connection is lost (readAgain: the dispatcher's pull, failed, waited for the domain's next publish). */
  #events(what: string, read: Read): Promise<StoredEvent[]> {
    return this.#do(what, (pool) => readAgain(() => this.#positions.events(pool, read)));
  }

  async head(): Promise<Position> {
    const row = await this.#one<{ value: number }>('read the head position', `SELECT value FROM eventflow_sequence WHERE name = 'event'`);
    return Number(row?.value ?? 0);
  }

  appendsDue(): boolean {
    return this.#group.due;
  }

  append(event: NewEvent, options: AppendOptions = {}): Promise<AppendResult> {
    return this.#group.append(event, options);
  }

  checkWrites(): Promise<void> {
    // Statements that need a writable database and every table the store writes (schema.ts), committed; they change nothing.
    return this.#writes.check(() => this.#do('check that writes work', () => transaction(this.#writer ?? this.#pool, checkWritable)));
  }

  /**
   * `turn` (from the group commit) is released as the batch's COMMIT is sent: the next batch may then start, and its
   * sequence lock waits for this commit (appends.ts), so positions stay in arrival order. Nothing is written for this
   * batch after that, so a failed COMMIT fails the whole batch instead of running each append alone.
   */
  async appendBatch(requests: readonly AppendRequest[], turn?: BatchTurn): Promise<AppendOutcome[]> {
    const outcomes: AppendOutcome[] = new Array<AppendOutcome>(requests.length);
    const valid: PreparedAppend[] = [];
    requests.forEach(({ event, options = {} }, index) => {
      try {
        const due = options.scheduledAt === undefined ? undefined : validDate(options.scheduledAt, 'scheduledAt');
        valid.push({ index, event, options, rid: event.rid ?? null, data: JSON.stringify(event.data), due });
      } catch (error) {
        outcomes[index] = { ok: false, error: storeError(error, 'append the event') };
      }
    });
    if (valid.length === 0) return outcomes;
    // A v4 spoke may insert the same id, or delete a rid, between our checks and our inserts: a second attempt sees it.
    const retryOn = ['ER_DUP_ENTRY', 'ER_NO_REFERENCED_ROW_2', 'ER_NO_REFERENCED_ROW'];
    let released = false;
    const release = (): void => {
      released = true;
      turn?.release();
    };
    try {
      for (const hub of new Set(valid.flatMap(({ options }) => (options.routedBy === undefined ? [] : [options.routedBy])))) await this.#registerHub(hub);
      const since = this.#positions.unpositionedSince(this.#options.v4Writers === true);
      const server = { clockInInsert: this.#insertReturns, routine: this.#routine.usable, routineGone: () => this.#routine.gone(), queued: () => this.#group.queued };
      // Where v4 spokes may write, their events get positions outside any batch, by a read's sweep: no window.
      const recent = since === undefined ? this.#recent : undefined;
      const written = await this.#do('append the events', () => appendTransaction(this.#writer, valid, retryOn, since, release, this.#ledger.atAppend, server, recent));
      valid.forEach((append, i) => (outcomes[append.index] = written[i] as AppendOutcome));
      this.#writes.succeeded();
    } catch (error) {
      const cause = error instanceof EventflowError ? error.cause : error;
      const code = driverCode(cause);
      // The database's state (unreachable, shut down, read-only, full): what a retry of the same appends may get past.
      // Sent, a COMMIT may have committed whatever its answer: whether the events were stored is unknown.
      if (released || isStoreStateError(code)) {
        this.#writes.failed();
        const stored = released ? 'unknown' : false;
        const missing = missingTable(cause);
        for (const append of valid) outcomes[append.index] = { ok: false, error: writeFailed(cause, `the MySQL store could not append the event${missing ? `: ${missing}` : ''}`, append.event.id, stored) };
        return outcomes;
      }
      // An error of the server about the statements (ER_…: a value too long for its column, say) may be one append's:
      // each append alone, so that only the one that causes it fails.
      if (valid.length === 1 || !code?.startsWith('ER_')) {
        for (const append of valid) outcomes[append.index] = { ok: false, error: storeError(error, 'append the event') };
        return outcomes;
      }
      for (const append of valid) {
        const [alone] = await this.appendBatch([requests[append.index] as AppendRequest]);
        outcomes[append.index] = alone as AppendOutcome;
      }
    }
    return outcomes;
  }

  async read(id: string): Promise<StoredEvent | undefined> {
    const [event] = await this.#events('read the event', { from: 'event e', where: 'e.id = ?', params: [id], onlyFired: false });
    return event;
  }

  async readEventlog(domain: string, pid: string, after: Position = 0): Promise<StoredEvent[]> {
    return this.#events('read the eventlog', { from: 'event e', where: 'e.domain = ? AND e.pid = ?', params: [domain, pid], after });
  }

  readSnapshot(domain: string, pid: string): Promise<SnapshotRead> {
    return this.#do('read the state snapshot', (pool) => readSnapshot(pool, this, domain, pid));
  }

  writeSnapshot(domain: string, pid: string, snapshot: { count: number; position: Position; eventId: string; state: string }): Promise<void> {
    return this.#do('store the state snapshot', (pool) => writeSnapshot(pool, domain, pid, snapshot));
  }

  async countEventlog(domain: string, pid: string): Promise<number> {
    const sql = `SELECT COUNT(*) AS count FROM event e WHERE e.domain = ? AND e.pid = ? AND ${FIRED}`;
    return Number((await this.#one<{ count: number }>('count the eventlog', sql, [domain, pid]))?.count ?? 0);
  }

  async readEventlogByTimestamp(domain: string, pid: string, from: Date, to: Date): Promise<StoredEvent[]> {
    const range = [domain, pid, validDate(from, 'from'), validDate(to, 'to')];
    const where = 'e.domain = ? AND e.pid = ? AND e.timestamp >= ? AND e.timestamp <= ?';
    return this.#events('read the eventlog by timestamp', { from: 'event e', where, params: range });
  }

  async readEventlogFilteredByNames(domain: string, pid: string, names: readonly string[]): Promise<StoredEvent[]> {
    if (names.length === 0) return [];
    const where = 'e.domain = ? AND e.pid = ? AND e.name IN (?)';
    return this.#events('read the eventlog by names', { from: 'event e', where, params: [domain, pid, [...names]] });
  }

  async readEventlogByChildProcess(domain: string, cpid: string): Promise<StoredEvent[]> {
    return this.#events('read by child process', { from: 'event_cpid c JOIN event e ON e.id = c.event_id', where: 'c.domain = ? AND c.cpid = ?', params: [domain, cpid] });
  }

  async readEventlogByEid(eid: string): Promise<StoredEvent[]> {
    return this.#events('read by entity', { from: 'event_eid y JOIN event e ON e.id = y.event_id', where: 'y.eid = ?', params: [eid] });
  }

  async readEventlogByDomainAndEid(domain: string, eid: string): Promise<StoredEvent[]> {
    const from = 'event_eid y JOIN event e ON e.id = y.event_id';
    return this.#events('read by entity', { from, where: 'y.eid = ? AND e.domain = ?', params: [eid, domain] });
  }

  async readDistinctPidByDomain(domain: string): Promise<string[]> {
    // ascii_bin (v4's collation) orders bytewise, as SQLite's BINARY does.
    const sql = `SELECT DISTINCT e.pid FROM event e WHERE e.domain = ? AND ${FIRED} ORDER BY e.pid`;
    return this.#do('read the pids', async (pool) => (await select<{ pid: string }>(pool, sql, [domain])).map((row) => row.pid));
  }

  async readPublishedAfter(filter: EventFilter, after: Position, limit: number, upTo?: Position): Promise<StoredEvent[]> {
    if (upTo !== undefined && this.#positions.unpositionedSince(this.#options.v4Writers === true) === undefined) {
      const recent = this.#recent.readThrough(filter, after, Math.max(0, Math.floor(limit)), upTo);
      if (recent !== undefined) return recent;
    }
    const from = 'event e JOIN event_published p ON p.event_id = e.id';
    const [where, params] = filter.name === '*' ? ['e.domain = ?', [filter.domain]] : ['e.domain = ? AND e.name = ?', [filter.domain, filter.name]];
    return this.#events('read published events', { from, where, params, after, limit: Math.max(0, Math.floor(limit)), wide: filter.domain });
  }

  async readPublishedSince(after: Position, limit: number): Promise<StoredEvent[]> {
    // Wide: unpositioned (v4) events are looked for in the recent window of every domain, as for one domain.
    const from = 'event e JOIN event_published p ON p.event_id = e.id';
    return this.#events('read published events', { from, where: '1 = 1', params: [], after, limit: Math.max(0, Math.floor(limit)), wide: '\u0000every domain' });
  }

  async findOutcome(domain: string, pid: string, names: readonly string[], after: Position): Promise<StoredEvent | undefined> {
    if (names.length === 0) return undefined;
    const where = 'e.domain = ? AND e.pid = ? AND e.name IN (?) AND EXISTS (SELECT 1 FROM event_published p WHERE p.event_id = e.id)';
    const [event] = await this.#events('find an outcome', { from: 'event e', where, params: [domain, pid, [...names]], after, limit: 1 });
    return event;
  }

  // Cascades to the association, delivery and position rows; v4's foreign key sets referring events' rid to NULL.
  async delete(id: string): Promise<boolean> {
    return this.#deleting(() => this.#exec('delete the event', 'DELETE FROM event WHERE id = ?', [id]));
  }


  async deleteEventlog(domain: string, pid: string): Promise<boolean> {
    return this.#deleting(() => this.#exec('delete the eventlog', 'DELETE FROM event WHERE domain = ? AND pid = ?', [domain, pid]));
  }


  /** A deletion empties the window of recent batches, before and after: a batch committed meanwhile starts it again, perhaps with the event deleted. */
  async #deleting(work: () => Promise<number>): Promise<boolean> {
    this.#recent.forget();
    try {
      return (await work()) > 0;
    } finally {
      this.#recent.forget();
    }
  }

  async persistEntityAssociation(eventId: string, eid: string): Promise<void> {
    await this.#associate(eventId, 'INSERT INTO event_eid (event_id, eid) VALUES (?, ?) ON DUPLICATE KEY UPDATE eid = eid', [eventId, eid]);
  }

  async persistChildProcessAssociation(eventId: string, domain: string, cpid: string): Promise<void> {
    const sql = 'INSERT INTO event_cpid (event_id, domain, cpid) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE cpid = cpid';
    await this.#associate(eventId, sql, [eventId, domain, cpid]);
  }

  async #associate(eventId: string, sql: string, params: Params): Promise<void> {
    // The foreign key on event_id is the existence check, atomic with the insert.
    const notFound = (error: unknown) =>
      driverCode(error)?.startsWith('ER_NO_REFERENCED_ROW') ? new EventflowError('E_EVENTFLOW_EVENT_NOT_FOUND', `no event has id "${eventId}"`, { details: { id: eventId } }) : error;
    await this.#do('store the association', (pool) => affected(pool, sql, params).catch((error: unknown) => Promise.reject(notFound(error))));
  }

  async claimForRouting(eventId: string, hub: string): Promise<boolean> {
    await this.#registerHub(hub);
    return (await this.#exec('claim the event for routing', CLAIM_FOR_ROUTING, [hub, eventId])) === 1;
  }

  /** claimForRouting, decided before the commit's log flush (early-claim.ts): for the hub, which routes as soon as it wins. */
  async claimForRoutingEarly(eventId: string, hub: string): Promise<{ won: boolean; durable: Promise<void> }> {
    await this.#registerHub(hub);
    const claimer = this.#claimer;
    if (claimer === undefined) throw notOpen();
    const conn = await run(this.#pool, 'claim the event for routing', () => claimer.getConnection());
    // A deadlock victim had no effect: claimed as claimForRouting does (which runs it again).
    return claimEarly(conn, CLAIM_FOR_ROUTING, [hub, eventId], () => this.claimForRouting(eventId, hub));
  }

  /** A router's id needs a hub row before it can claim (see PLACEHOLDER_HUB). */
  async #registerHub(hub: string): Promise<void> {
    if (!this.#hubs.has(hub)) await this.#exec('register the hub', PLACEHOLDER_HUB, [hub]).then(() => this.#hubs.add(hub));
  }

  async claimAllForRouting(eventIds: readonly string[], hub: string): Promise<string[]> {
    if (eventIds.length === 0) return [];
    await this.#registerHub(hub);
    const won = await this.#do('claim the events for routing', () => this.#transaction((conn) => claimAllWon(conn, eventIds, hub)));
    return eventIds.filter((id) => won.has(id));
  }

  async claimForConsumer(eventId: string, consumer: string): Promise<boolean> {
    const sql = `UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = ? WHERE event_id = ? AND consumed_spoke IS NULL AND ${UNSETTLED}`;
    return (await this.#exec('claim the event for a consumer', sql, [consumer, eventId])) === 1;
  }

  async retakeConsumerClaim(eventId: string, consumer: string, lease: { owner: string; now: number }): Promise<boolean> {
    return this.#do('take the consumer claim back', () => this.#transaction((conn) => retakeUnderLease(conn, eventId, consumer, lease)));
  }

  async releaseConsumerClaim(eventId: string): Promise<void> {
    const sql = `UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id = ? AND ${UNSETTLED}`;
    await this.#exec('release the consumer claim', sql, [eventId]);
  }

  async settle(eventId: string, outcome: Outcome): Promise<void> {
    const sql = `UPDATE event_published SET ${OUTCOME_COLUMN[outcome]} = UTC_TIMESTAMP() WHERE event_id = ? AND ${UNSETTLED}`;
    await this.#exec('record the outcome', sql, [eventId]);
  }

  async markOrphan(eventId: string): Promise<void> {
    await this.#exec('mark the event orphan', 'UPDATE event_published SET orphan = UTC_TIMESTAMP() WHERE event_id = ? AND orphan IS NULL', [eventId]);
  }

  async markOrphans(eventIds: readonly string[]): Promise<void> {
    if (eventIds.length === 0) return;
    const sql = 'UPDATE event_published SET orphan = UTC_TIMESTAMP() WHERE event_id IN (?) AND orphan IS NULL';
    await this.#exec('mark the events orphan', sql, [[...eventIds]]);
  }

  async deadLetter(eventId: string, attempts: number, reason: string): Promise<boolean> {
    const work = async (conn: PoolConnection): Promise<boolean> => {
      if ((await affected(conn, `UPDATE event_published SET failed = UTC_TIMESTAMP() WHERE event_id = ? AND ${UNSETTLED}`, [eventId])) !== 1) return false;
      await insertDeadLetters(conn, [{ id: eventId, attempts, error: reason }]);
      return true;
    };
    return this.#do('record the dead letter', () => this.#transaction(work));
  }

  async deadLetters(limit = 100): Promise<DeadLetter[]> {
    const sql = `SELECT d.event_id AS eventId, e.domain, e.name, e.pid, d.attempts, d.reason, d.at
      FROM eventflow_dead_letter d JOIN event e ON e.id = d.event_id ORDER BY d.at DESC, d.event_id DESC LIMIT ?`;
    const rows = await this.#do('read the dead letters', (pool) => select<Omit<DeadLetter, 'at'> & { at: Date }>(pool, sql, [limit]));
    return rows.map((row) => ({ ...row, attempts: Number(row.attempts), at: row.at.toISOString() }));
  }

  async nextScheduled(): Promise<Date | undefined> {
    const sql = `SELECT MIN(COALESCE(d.due, s.scheduled)) AS next
      FROM event_scheduled s LEFT JOIN eventflow_schedule d ON d.event_id = s.event_id WHERE s.executed IS NULL`;
    return (await this.#one<{ next: Date | null }>('read the next due time', sql))?.next ?? undefined;
  }

  async claimDueScheduled(at: Date): Promise<StoredEvent[]> {
    const now = validDate(at, 'now');
    return this.#do('fire scheduled events', (pool) => fireScheduled(pool, now));
  }

  async settleScheduled(eventId: string, outcome: Outcome): Promise<void> {
    const sql = `UPDATE event_scheduled SET ${OUTCOME_COLUMN[outcome]} = UTC_TIMESTAMP() WHERE event_id = ? AND ${UNSETTLED}`;
    await this.#exec('record the scheduled outcome', sql, [eventId]);
  }
}
