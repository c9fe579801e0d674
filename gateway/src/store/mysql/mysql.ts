/**
 * The MySQL 8 / MariaDB 10.11 EventStore, on eventflow v4's tables (schema.ts), shareable with v4 hubs and spokes.
 *
 * Time: every DATETIME is UTC. The pool converts Dates as UTC (`timezone: 'Z'`) and every time the store writes is
 * explicit: UTC_TIMESTAMP() for v4's state columns, UTC_TIMESTAMP(3) read from the server for event timestamps (one
 * clock for all gateways). The session time_zone matters only to v4 peers' DEFAULT-filled columns.
 * JSON: MariaDB returns its JSON (a checked LONGTEXT) as text, MySQL parses; `jsonStrings` makes both return text,
 * parsed here, so that a JSON string value stays a string.
 *
 * Positions live in eventflow_position and come from the one eventflow_sequence row. Every transaction that assigns
 * positions first locks that row (SELECT … FOR UPDATE: the exclusive row lock an UPDATE would take) and holds it to
 * its commit. So across all gateways on the database, positions are assigned one transaction at a time and commit
 * order equals position order: once position n is visible, every lower one is committed (or rolled back, never to
 * appear), and a client resuming "after n" at any gateway misses nothing that committed late. Locking before the
 * first read also puts the transaction's snapshot after every earlier writer's commit, even under REPEATABLE READ.
 *
 * Events inserted by v4 spokes have no position row. They get one lazily, in (timestamp, id) order after everything
 * positioned so far, under the same lock: init() sweeps the whole database, and every read first positions the
 * unpositioned events of its scope. Narrow scopes (an id, an eventlog, an eid, a cpid) are checked whole. A whole
 * domain (readPublishedAfter, which must stay a seek by position) is checked only from 10 s before the last sweep,
 * at most once a second per domain and then only back to 2 s before the previous check (see CHECK_EVERY_MS), and a
 * sweep runs in the background at most once a minute: an event whose timestamp is older than that window when
 * inserted (a caller-set timestamp, a non-UTC server, a commit later than 2 s) joins the published log by the next
 * sweep at the latest.
 */
import { createPool, type Pool, type PoolConnection } from 'mysql2/promise';
import { EventflowError, streamKey, type JsonValue, type Position, type StoredEvent } from '@eventflow/core';
import { createSchema, lockSequence, setSequence } from './schema.js';
import { GroupCommit } from '../group-commit.js';
import { affected, insertRows, MAX_PREPARED_PER_CONNECTION, select, setSessionOnConnect, type Params } from './statements.js';
import { isSameEvent } from '../same-event.js';
import { versionConflict, type AppendOptions, type AppendOutcome, type AppendRequest, type AppendResult, type EventFilter, type EventStore, type NewEvent, type Outcome } from '../store.js';
import type { DeadLetter } from '../store.js';

/** Defaults as v4's: 127.0.0.1:3306, root without password, database eventflow, 10 connections. */
export interface MysqlStoreOptions {
  host?: string | undefined;
  port?: number | undefined;
  user?: string | undefined;
  password?: string | undefined;
  database?: string | undefined;
  connectionLimit?: number | undefined;
  /** The session time_zone of the store's connections (the server's by default). Nothing depends on it; tests prove that. */
  sessionTimeZone?: string | undefined;
}

type EventRow = Omit<StoredEvent, 'timestamp' | 'data' | 'position'> & { timestamp: Date; data: string | Buffer; position: number | null };

/**
 * A multi-event read: FROM and WHERE over `event e` (#events joins the positions), the events positioned after `after`
 * if set, at most `limit`. onlyFired false for read(id) only; wide (the domain) for a read scoped to a whole domain.
 */
type Read = { from: string; where: string; params: Params; after?: Position; limit?: number; onlyFired?: boolean; wide?: string };

const COLUMNS = 'e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, e.data, x.position';
const WITH_POSITION = 'LEFT JOIN eventflow_position x ON x.event_id = e.id';
/** A scheduled event joins its eventlog when it fires (see store.ts). */
const FIRED = 'NOT EXISTS (SELECT 1 FROM event_scheduled z WHERE z.event_id = e.id AND z.executed IS NULL)';
/** The guard that makes the first outcome win (v4 overwrote, and could end with both set). */
const UNSETTLED = 'success IS NULL AND failed IS NULL';
const OUTCOME_COLUMN: Record<Outcome, string> = { success: 'success', failed: 'failed' };
/**
 * event_published.hub references hub(id): a router's id needs a hub row to claim. A v4 hub inserts its own at start; for
 * any other id (the gateway routing in process) the store inserts one already quit, because v4 spokes connect to, and
 * v4 hubs announce themselves to, every hub whose quit is NULL. An existing row, e.g. a hub's own, is left as it is.
 */
const PLACEHOLDER_HUB = `INSERT INTO hub (id, timestamp, external_ip, external_port, internal_ip, internal_port, quit)
  VALUES (?, UTC_TIMESTAMP(), '127.0.0.1', 0, '127.0.0.1', 0, UTC_TIMESTAMP()) ON DUPLICATE KEY UPDATE id = id`;
const INSERT_BATCH = 1000;
/** How often wide reads start a background sweep, and how far before a sweep's start its window begins. */
const SWEEP_EVERY_MS = 60_000;
const SWEEP_MARGIN_MS = 10_000;
/**
 * A wide read looks for unpositioned events of its domain at most this often, and then only at those stamped since
 * its previous look, less CHECK_MARGIN_MS (for commits that came late). Looking at the whole window on every read
 * cost a scan of every event of the last minute per routed batch; what a look misses, the next sweep positions.
 */
const CHECK_EVERY_MS = 1_000;
const CHECK_MARGIN_MS = 2_000;
const ATTEMPTS = 5;

/** An append validated and serialised before its batch's transaction; `index` is its place in the batch. */
interface PreparedAppend {
  index: number;
  event: NewEvent;
  options: AppendOptions;
  rid: string | null;
  data: string;
  due: Date | undefined;
}

/** Multi-row INSERT statements carry at most this many bytes of event data each, well below max_allowed_packet. */
const INSERT_BYTES = 1 << 20;

type Row = Array<string | number | Date | null>;

/** `rows` cut into as few multi-row INSERTs as INSERT_BATCH rows and INSERT_BYTES (as `bytes` counts) allow. */
function chunks(rows: readonly Row[], bytes: (row: Row) => number): Row[][] {
  const cut: Row[][] = [];
  for (let start = 0; start < rows.length; ) {
    let end = start;
    for (let size = 0; end < rows.length && end - start < INSERT_BATCH && (end === start || size + bytes(rows[end] as Row) <= INSERT_BYTES); end += 1) {
      size += bytes(rows[end] as Row);
    }
    cut.push(rows.slice(start, end));
    start = end;
  }
  return cut;
}

const utcNow = async (on: Pool | PoolConnection): Promise<Date> => (await select<{ now: Date }>(on, 'SELECT UTC_TIMESTAMP(3) AS now'))[0]?.now ?? new Date();

function driverCode(error: unknown): string | undefined {
  return typeof (error as { code?: unknown } | null)?.code === 'string' ? (error as { code: string }).code : undefined;
}

/** Wraps a driver error. The message names the driver code only: SQL text and values stay in `cause`. */
function storeError(error: unknown, what: string): EventflowError {
  if (error instanceof EventflowError) return error;
  const code = driverCode(error);
  const message = `the MySQL store could not ${what}${code ? ` (${code})` : ''}; check the database and the gateway log`;
  return new EventflowError('E_EVENTFLOW_STORE_FAILED', message, { cause: error });
}

function toStoredEvent({ id, timestamp, domain, rid, pid, name, data, position }: EventRow): StoredEvent {
  const json = typeof data === 'string' ? data : data.toString('utf8');
  return { id, timestamp: timestamp.toISOString(), domain, rid, pid, name, data: JSON.parse(json) as JsonValue, position: Number(position) };
}

function validDate(date: Date, what: string): Date {
  if (Number.isNaN(date.getTime())) throw new EventflowError('E_EVENTFLOW_INVALID_DATE', `${what} is not a valid date`);
  return date;
}

export class MysqlStore implements EventStore {
  readonly kind = 'mysql';
  readonly #options: MysqlStoreOptions;
  #open: Pool | undefined;
  /** Connections for group commits (autocommit off: every batch is one transaction, ended by COMMIT or ROLLBACK). */
  #writer: Pool | undefined;
  /** Hub ids whose hub row is known to exist. */
  readonly #hubs = new Set<string>();
  /** Every event with an earlier timestamp had a position at the last sweep (at #sweptAt); wide reads look after it. */
  #sweptBefore = new Date(0);
  #sweptAt = 0;
  #sweeping: Promise<void> | undefined;
  /** Domain → when a wide read last looked for its unpositioned events (Date.now()), and the server time it looked from then. */
  readonly #checked = new Map<string, { at: number; serverTime: Date }>();
  readonly #group = new GroupCommit((requests) => this.appendBatch(requests));

  constructor(options: MysqlStoreOptions = {}) {
    this.#options = options;
  }

  async init(): Promise<void> {
    if (this.#open !== undefined) return;
    const { host = '127.0.0.1', port = 3306, database = 'eventflow', sessionTimeZone } = this.#options;
    const { user = 'root', password = '', connectionLimit = 10 } = this.#options;
    const open = (limit: number, autocommit: boolean): Pool => {
      // One statement per query on every pool (multipleStatements off), values only in prepared statements (statements.ts).
      const created = createPool({
        host,
        port,
        user,
        password,
        database,
        connectionLimit: limit,
        multipleStatements: false,
        maxPreparedStatements: MAX_PREPARED_PER_CONNECTION,
        charset: 'utf8mb4',
        timezone: 'Z',
        dateStrings: false,
        jsonStrings: true,
      });
      // The session is set up before the connection's first use (queued ahead of it): a known sql_mode whatever the
      // server's default, and the time zone when asked. A connection whose session cannot be set up is dropped.
      setSessionOnConnect(created, autocommit ? [] : ['autocommit = 0']);
      if (sessionTimeZone !== undefined) {
        created.pool.on('connection', (conn) => conn.execute('SET time_zone = ?', [sessionTimeZone], (error) => error && conn.destroy()));
      }
      return created;
    };
    const pool = open(connectionLimit, true);
    // Group commits run one at a time, on their own connections (see #appendAll).
    const writer = open(2, false);
    try {
      await createSchema(pool);
      this.#open = pool;
      this.#writer = writer;
      await this.#sweep(pool);
    } catch (error) {
      this.#open = undefined;
      this.#writer = undefined;
      await pool.end().catch(() => undefined);
      await writer.end().catch(() => undefined);
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
    this.#open = undefined;
    this.#writer = undefined;
    this.#hubs.clear();
    await this.#sweeping;
    await pool?.end();
    await writer?.end();
  }

  get #pool(): Pool {
    if (this.#open === undefined) throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the MySQL store is not open; call init() first');
    return this.#open;
  }

  /** Runs one store operation, wrapping driver errors. */
  async #do<T>(what: string, work: (pool: Pool) => Promise<T>): Promise<T> {
    const pool = this.#pool;
    try {
      return await work(pool);
    } catch (error) {
      throw storeError(error, what);
    }
  }

  /**
   * One statement; returns how many rows it matched (mysql2 sets FOUND_ROWS), so a guarded claim won iff 1. A deadlock
   * victim (a delete racing a firing, say) had no effect and runs again.
   */
  #exec(what: string, sql: string, params: Params): Promise<number> {
    const run = (attempt: number): Promise<number> =>
      affected(this.#pool, sql, params).catch((error: unknown) => (driverCode(error) === 'ER_LOCK_DEADLOCK' && attempt < ATTEMPTS ? run(attempt + 1) : Promise.reject(error)));
    return this.#do(what, () => run(1));
  }

  /** One row of one statement. */
  #one<T>(what: string, sql: string, params: Params = []): Promise<T | undefined> {
    return this.#do(what, async (pool) => (await select<T>(pool, sql, params))[0]);
  }

  /** Runs `work` in a transaction, again from the start when it fails with one of `retryOn`. */
  async #transaction<T>(work: (conn: PoolConnection) => Promise<T>, retryOn: readonly string[] = []): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      const conn = await this.#pool.getConnection();
      try {
        await conn.beginTransaction();
        const result = await work(conn);
        await conn.commit();
        conn.release();
        return result;
      } catch (error) {
        await conn.rollback().then(() => conn.release(), () => conn.destroy());
        const code = driverCode(error);
        const retry = code === 'ER_LOCK_DEADLOCK' || (code !== undefined && retryOn.includes(code));
        if (!retry || attempt >= ATTEMPTS) throw error;
      }
    }
  }

  /**
   * Positions those of `ids` that still have no position (events written by v4 spokes), in (timestamp, id) order after
   * every position assigned so far; a thousand per transaction, so that appends wait for the lock only briefly.
   */
  async #assign(ids: readonly string[]): Promise<void> {
    for (let start = 0; start < ids.length; start += INSERT_BATCH) {
      const work = async (conn: PoolConnection): Promise<void> => {
        const base = await lockSequence(conn);
        const sql = `SELECT e.id FROM event e ${WITH_POSITION} WHERE e.id IN (?) AND x.event_id IS NULL ORDER BY e.timestamp, e.id`;
        const missing = await select<{ id: string }>(conn, sql, [ids.slice(start, start + INSERT_BATCH)]);
        if (missing.length === 0) return;
        await insertRows(conn, 'INSERT INTO eventflow_position (position, event_id) VALUES', '(?, ?)', missing.map((row, i) => [base + i + 1, row.id]));
        await setSequence(conn, base + missing.length);
      };
      // An event deleted in between: again, without it.
      await this.#transaction(work, ['ER_NO_REFERENCED_ROW_2', 'ER_NO_REFERENCED_ROW']);
    }
  }

  /** Positions every unpositioned event in the database, then moves the window of wide reads up to the sweep's start. */
  async #sweep(pool: Pool): Promise<void> {
    const started = await utcNow(pool);
    const missing = await select<{ id: string }>(pool, `SELECT e.id FROM event e ${WITH_POSITION} WHERE x.event_id IS NULL ORDER BY e.timestamp, e.id`);
    await this.#assign(missing.map((row) => row.id));
    this.#sweptBefore = new Date(started.getTime() - SWEEP_MARGIN_MS);
    this.#sweptAt = Date.now();
  }

  /** Runs a multi-event read, after positioning the unpositioned events of its scope (see the header). */
  async #events(what: string, read: Read): Promise<StoredEvent[]> {
    return this.#do(what, async (pool) => {
      const scope = read.onlyFired === false ? read.where : `${read.where} AND ${FIRED}`;
      if (read.wide !== undefined && Date.now() - this.#sweptAt > SWEEP_EVERY_MS) {
        this.#sweeping ??= this.#sweep(pool).catch(() => undefined).finally(() => (this.#sweeping = undefined));
      }
      const since = read.wide === undefined ? undefined : await this.#checkSince(pool, read.wide);
      if (read.wide === undefined || since !== undefined) {
        const window = since === undefined ? '' : ' AND e.timestamp >= ?';
        const unpositioned = `SELECT e.id FROM ${read.from} ${WITH_POSITION} WHERE ${scope}${window} AND x.event_id IS NULL ORDER BY e.timestamp, e.id`;
        const missing = await select<{ id: string }>(pool, unpositioned, since === undefined ? read.params : [...read.params, since]);
        if (missing.length > 0) await this.#assign(missing.map((row) => row.id));
      }
      const after = read.after === undefined ? '' : ' AND x.position > ?';
      const limit = read.limit === undefined ? '' : ' LIMIT ?';
      const sql = `SELECT ${COLUMNS} FROM ${read.from} JOIN eventflow_position x ON x.event_id = e.id WHERE ${scope}${after} ORDER BY x.position${limit}`;
      const params = [...read.params, ...(read.after === undefined ? [] : [read.after]), ...(read.limit === undefined ? [] : [read.limit])];
      return (await select<EventRow>(pool, sql, params)).map(toStoredEvent);
    });
  }

  /** Where a wide read of `domain` looks for unpositioned events from, or undefined when it looked less than CHECK_EVERY_MS ago. */
  async #checkSince(pool: Pool, domain: string): Promise<Date | undefined> {
    const last = this.#checked.get(domain);
    if (last !== undefined && Date.now() - last.at < CHECK_EVERY_MS) return undefined;
    const serverTime = await utcNow(pool);
    this.#checked.set(domain, { at: Date.now(), serverTime });
    const since = last === undefined ? this.#sweptBefore : new Date(last.serverTime.getTime() - CHECK_MARGIN_MS);
    return since > this.#sweptBefore ? since : this.#sweptBefore;
  }

  async head(): Promise<Position> {
    const row = await this.#one<{ value: number }>('read the head position', `SELECT value FROM eventflow_sequence WHERE name = 'event'`);
    return Number(row?.value ?? 0);
  }

  append(event: NewEvent, options: AppendOptions = {}): Promise<AppendResult> {
    return this.#group.append(event, options);
  }

  async appendBatch(requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
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
    for (const hub of new Set(valid.flatMap(({ options }) => (options.routedBy === undefined ? [] : [options.routedBy])))) await this.#registerHub(hub);
    // A v4 spoke may insert the same id, or delete a rid, between our checks and our inserts: a second attempt sees it.
    const retryOn = ['ER_DUP_ENTRY', 'ER_NO_REFERENCED_ROW_2', 'ER_NO_REFERENCED_ROW'];
    try {
      const written = await this.#do('append the events', () => this.#appendTransaction(valid, retryOn));
      valid.forEach((append, i) => (outcomes[append.index] = written[i] as AppendOutcome));
    } catch (error) {
      // An error of the server about the statements (ER_…: a value too long for its column, say) may be one append's:
      // each append alone, so that only the one that causes it fails. A connection error would only fail each again.
      const cause = error instanceof EventflowError ? error.cause : error;
      if (valid.length === 1 || !driverCode(cause)?.startsWith('ER_')) {
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

  /**
   * The appends of one batch in one transaction, under the sequence lock: every check is one query for the whole batch,
   * decided here in request order (an append sees the ones before it), then one multi-row INSERT per table. A refused
   * append writes nothing and is an outcome, not a throw, so that the rest commits.
   */
  /** #appendAll on a writer connection, rolled back on failure and run again (from the start) on `retryOn` or a deadlock. */
  async #appendTransaction(appends: readonly PreparedAppend[], retryOn: readonly string[]): Promise<AppendOutcome[]> {
    const writer = this.#writer;
    if (writer === undefined) throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the MySQL store is not open; call init() first');
    for (let attempt = 1; ; attempt += 1) {
      const conn = await writer.getConnection();
      try {
        const outcomes = await this.#appendAll(conn, appends);
        conn.release();
        return outcomes;
      } catch (error) {
        await conn.query('ROLLBACK').then(() => conn.release(), () => conn.destroy());
        const code = driverCode(error);
        if (!(code === 'ER_LOCK_DEADLOCK' || (code !== undefined && retryOn.includes(code))) || attempt >= ATTEMPTS) throw error;
      }
    }
  }

  async #appendAll(conn: PoolConnection, appends: readonly PreparedAppend[]): Promise<AppendOutcome[]> {
    // The writer connection has autocommit off: the locking read opens the transaction, COMMIT ends it. First the
    // sequence lock, then (after the lock, so that their snapshot sees every earlier append's commit, and timestamps
    // ascend with positions across gateways) the server time and every check's rows. Counted under the sequence lock,
    // which every append and firing takes first, versions cannot change before the insert, on this gateway or any other.
    const ids = [...new Set(appends.map((append) => append.event.id))];
    const rids = [...new Set(appends.flatMap(({ rid }) => (rid === null ? [] : [rid])))];
    const streams = new Map(
      appends.filter((append) => append.options.expectedVersion !== undefined).map(({ event }) => [streamKey(event.domain, event.pid), [event.domain, event.pid]] as const),
    );
    const base = await lockSequence(conn);
    // One read for the clock, the events with these ids (whole) and the referenced ones (their id only).
    const lookup = `SELECT n.now, e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, IF(e.id IN (?), e.data, NULL) AS data, x.position, e.id IN (?) AS wanted
      FROM (SELECT UTC_TIMESTAMP(3) AS now) n LEFT JOIN (event e ${WITH_POSITION}) ON e.id IN (?)`;
    const rows0 = await select<EventRow & { now: Date; wanted: number | null }>(conn, lookup, [ids, ids, [...ids, ...rids]]);
    const now = rows0[0]?.now ?? new Date();
    const existing = rows0.filter((row) => row.id !== null && Number(row.wanted) === 1);
    const found = rows0.filter((row) => row.id !== null);
    const versionsWhere = [...streams.values()].map(() => '(e.domain = ? AND e.pid = ?)').join(' OR ');
    const counted =
      streams.size === 0
        ? []
        : await select<{ domain: string; pid: string; count: number }>(
            conn,
            `SELECT e.domain, e.pid, COUNT(*) AS count FROM event e WHERE (${versionsWhere}) AND ${FIRED} GROUP BY e.domain, e.pid`,
            [...streams.values()].flat(),
          );
    const timestamp = now.toISOString();
    const stored = new Map(existing.map((row) => [row.id, row]));
    const ridsFound = new Set(found.map((row) => row.id));
    const versions = new Map([...streams.keys()].map((stream) => [stream, 0]));
    for (const row of counted) versions.set(streamKey(row.domain, row.pid), Number(row.count));

    let next = base;
    const created = new Map<string, StoredEvent>();
    const rows = { event: [] as Row[], position: [] as Row[], published: [] as Row[], scheduled: [] as Row[], due: [] as Row[] };
    const outcomes = appends.map(({ event, options, rid, data, due }): AppendOutcome => {
      const found = stored.get(event.id);
      const earlier = found === undefined ? created.get(event.id) : toStoredEvent({ ...found, position: found.position ?? next + 1 });
      if (earlier !== undefined) {
        if (!isSameEvent(earlier, event)) {
          const message = `event id "${event.id}" is already used by another event; use a new id, or omit it and let the client generate one`;
          return { ok: false, error: new EventflowError('E_EVENTFLOW_DUPLICATE_ID', message, { details: { id: event.id } }) };
        }
        if (found !== undefined && found.position === null) {
          // The same event written by a v4 spoke, without a position yet: it gets the next one.
          next += 1;
          found.position = next;
          rows.position.push([next, event.id]);
        }
        return { ok: true, result: { event: earlier, created: false } };
      }
      if (rid !== null && !ridsFound.has(rid) && !stored.has(rid) && !created.has(rid)) {
        const message = `event "${event.id}" refers (rid) to event "${rid}", which does not exist`;
        return { ok: false, error: new EventflowError('E_EVENTFLOW_REFERENCE_NOT_FOUND', message, { details: { id: event.id, rid } }) };
      }
      const stream = streamKey(event.domain, event.pid);
      const current = versions.get(stream);
      const { expectedVersion } = options;
      if (expectedVersion !== undefined && current !== expectedVersion) {
        return { ok: false, error: versionConflict(event.domain, event.pid, current ?? 0, expectedVersion) };
      }
      // An unfired scheduled event does not count toward the version.
      if (current !== undefined && due === undefined) versions.set(stream, current + 1);
      next += 1;
      rows.event.push([event.id, now, event.domain, rid, event.pid, event.name, data]);
      rows.position.push([next, event.id]);
      if (options.publisher !== undefined) {
        const hub = options.routedBy ?? null;
        rows.published.push([event.id, options.publisher, hub, hub]);
      }
      if (due !== undefined) {
        // v4's column holds whole seconds: rounded up, so that nothing reading it fires early.
        rows.scheduled.push([event.id, new Date(Math.ceil(due.getTime() / 1000) * 1000)]);
        rows.due.push([event.id, due]);
      }
      const made: StoredEvent = { id: event.id, timestamp, domain: event.domain, rid, pid: event.pid, name: event.name, data: event.data, position: next };
      created.set(event.id, made);
      return { ok: true, result: { event: made, created: true } };
    });

    // Then every insert (power-of-two multi-row statements, see statements.ts), the sequence, and the commit.
    const insert = async (head: string, tuple: string, list: readonly Row[], bytes: (row: Row) => number = () => 0): Promise<void> => {
      for (const chunk of chunks(list, bytes)) await insertRows(conn, head, tuple, chunk);
    };
    await insert('INSERT INTO event (id, timestamp, domain, rid, pid, name, data) VALUES', '(?, ?, ?, ?, ?, ?, ?)', rows.event, (row) => String(row[6]).length);
    await insert('INSERT INTO eventflow_position (position, event_id) VALUES', '(?, ?)', rows.position);
    await insert('INSERT INTO event_published (event_id, published, publisher, hub, consumed_hub) VALUES', '(?, UTC_TIMESTAMP(), ?, ?, IF(? IS NULL, NULL, UTC_TIMESTAMP()))', rows.published);
    await insert('INSERT INTO event_scheduled (event_id, timestamp, scheduled) VALUES', '(?, UTC_TIMESTAMP(), ?)', rows.scheduled);
    await insert('INSERT INTO eventflow_schedule (event_id, due) VALUES', '(?, ?)', rows.due);
    if (next > base) await setSequence(conn, next);
    await conn.query('COMMIT');
    return outcomes;
  }

  /** Sets the event's position (a fired event moves) and raises the sequence to it. The sequence row must be locked. */
  async #position(conn: PoolConnection, eventId: string, position: number): Promise<void> {
    await affected(conn, 'INSERT INTO eventflow_position (position, event_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE position = ?', [position, eventId, position]);
    await setSequence(conn, position);
  }

  async read(id: string): Promise<StoredEvent | undefined> {
    const [event] = await this.#events('read the event', { from: 'event e', where: 'e.id = ?', params: [id], onlyFired: false });
    return event;
  }

  async readEventlog(domain: string, pid: string, after: Position = 0): Promise<StoredEvent[]> {
    return this.#events('read the eventlog', { from: 'event e', where: 'e.domain = ? AND e.pid = ?', params: [domain, pid], after });
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

  async readPublishedAfter(filter: EventFilter, after: Position, limit: number): Promise<StoredEvent[]> {
    const from = 'event e JOIN event_published p ON p.event_id = e.id';
    const [where, params] = filter.name === '*' ? ['e.domain = ?', [filter.domain]] : ['e.domain = ? AND e.name = ?', [filter.domain, filter.name]];
    return this.#events('read published events', { from, where, params, after, limit: Math.max(0, Math.floor(limit)), wide: filter.domain });
  }

  async findOutcome(domain: string, pid: string, names: readonly string[], after: Position): Promise<StoredEvent | undefined> {
    if (names.length === 0) return undefined;
    const where = 'e.domain = ? AND e.pid = ? AND e.name IN (?) AND EXISTS (SELECT 1 FROM event_published p WHERE p.event_id = e.id)';
    const [event] = await this.#events('find an outcome', { from: 'event e', where, params: [domain, pid, [...names]], after, limit: 1 });
    return event;
  }

  // Cascades to the association, delivery and position rows; v4's foreign key sets referring events' rid to NULL.
  async delete(id: string): Promise<boolean> {
    return (await this.#exec('delete the event', 'DELETE FROM event WHERE id = ?', [id])) > 0;
  }

  async deleteEventlog(domain: string, pid: string): Promise<boolean> {
    return (await this.#exec('delete the eventlog', 'DELETE FROM event WHERE domain = ? AND pid = ?', [domain, pid])) > 0;
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
    const sql = 'UPDATE event_published SET consumed_hub = UTC_TIMESTAMP(), hub = ? WHERE event_id = ? AND consumed_hub IS NULL';
    return (await this.#exec('claim the event for routing', sql, [hub, eventId])) === 1;
  }

  /** A router's id needs a hub row before it can claim (see PLACEHOLDER_HUB). */
  async #registerHub(hub: string): Promise<void> {
    if (!this.#hubs.has(hub)) await this.#exec('register the hub', PLACEHOLDER_HUB, [hub]).then(() => this.#hubs.add(hub));
  }

  async claimAllForRouting(eventIds: readonly string[], hub: string): Promise<string[]> {
    if (eventIds.length === 0) return [];
    await this.#registerHub(hub);
    // The locking read decides which rows this router wins (it waits for, then sees, a concurrent claimer's commit);
    // in id order, so that two routers claiming overlapping sets lock in the same order.
    const work = async (conn: PoolConnection): Promise<Set<string>> => {
      const sql = 'SELECT event_id AS id FROM event_published WHERE event_id IN (?) AND consumed_hub IS NULL ORDER BY event_id FOR UPDATE';
      const won = (await select<{ id: string }>(conn, sql, [[...eventIds]])).map((row) => row.id);
      if (won.length > 0) await affected(conn, 'UPDATE event_published SET consumed_hub = UTC_TIMESTAMP(), hub = ? WHERE event_id IN (?)', [hub, won]);
      return new Set(won);
    };
    const won = await this.#do('claim the events for routing', () => this.#transaction(work));
    return eventIds.filter((id) => won.has(id));
  }

  async claimForConsumer(eventId: string, consumer: string): Promise<boolean> {
    const sql = 'UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = ? WHERE event_id = ? AND consumed_spoke IS NULL';
    return (await this.#exec('claim the event for a consumer', sql, [consumer, eventId])) === 1;
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
      const why = reason.slice(0, 64);
      await affected(
        conn,
        `INSERT INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (?, ?, ?, UTC_TIMESTAMP(3))
         ON DUPLICATE KEY UPDATE attempts = ?, reason = ?, at = UTC_TIMESTAMP(3)`,
        [eventId, attempts, why, attempts, why],
      );
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
    // Events scheduled by v4 spokes have no eventflow_schedule row: their due time is v4's column.
    const dueSql = `SELECT s.event_id AS id FROM event_scheduled s
      LEFT JOIN eventflow_schedule d ON d.event_id = s.event_id LEFT JOIN eventflow_position x ON x.event_id = s.event_id
      WHERE s.executed IS NULL AND COALESCE(d.due, s.scheduled) <= ?
      ORDER BY COALESCE(d.due, s.scheduled), x.position IS NULL, x.position, s.event_id`;
    const work = async (conn: PoolConnection): Promise<StoredEvent[]> => {
      const base = await lockSequence(conn);
      const due = await select<{ id: string }>(conn, dueSql, [now]);
      if (due.length === 0) return [];
      const firedAt = await utcNow(conn);
      const fired: string[] = [];
      for (const { id } of due) {
        // Guarded (v4's own update of executed is not): exactly one claimer wins each event.
        const claim = 'UPDATE event_scheduled SET executed = UTC_TIMESTAMP() WHERE event_id = ? AND executed IS NULL';
        if ((await affected(conn, claim, [id])) !== 1) continue;
        fired.push(id);
        await this.#position(conn, id, base + fired.length);
        await affected(conn, 'UPDATE event SET timestamp = ? WHERE id = ?', [firedAt, id]);
      }
      if (fired.length === 0) return [];
      const rows = await select<EventRow>(conn, `SELECT ${COLUMNS} FROM event e ${WITH_POSITION} WHERE e.id IN (?) ORDER BY x.position`, [fired]);
      return rows.map(toStoredEvent);
    };
    return this.#do('fire scheduled events', () => this.#transaction(work));
  }

  async settleScheduled(eventId: string, outcome: Outcome): Promise<void> {
    const sql = `UPDATE event_scheduled SET ${OUTCOME_COLUMN[outcome]} = UTC_TIMESTAMP() WHERE event_id = ? AND ${UNSETTLED}`;
    await this.#exec('record the scheduled outcome', sql, [eventId]);
  }
}
