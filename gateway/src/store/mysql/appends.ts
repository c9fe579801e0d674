/**
 * The MySQL store's write path: the appends of one group commit (see ../group-commit.ts) in one transaction on a
 * writer connection, under the sequence lock (see positions.ts).
 */
import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise';
import { EventflowError, streamKey, type StoredEvent } from '@eventflow/core';
import { reserveSequence, setSequence } from './schema.js';
import { select } from './statements.js';
import { isSameEvent } from '../same-event.js';
import { versionConflict, type AppendOptions, type AppendOutcome, type NewEvent } from '../store.js';
import { ATTEMPTS, driverCode, notOpen } from './db.js';
import { FIRED, INSERT_BATCH, toStoredEvent, WITH_POSITION, type EventRow } from './rows.js';
import type { AppendLeases, BatchLeases } from './append-leases.js';
import { appendInserts } from './append-sql.js';
import { callAppendRoutine, ROUTINE_GONE } from './append-routine.js';
import type { RecentPublished } from '../recent.js';

/** An append validated and serialised before its batch's transaction; `index` is its place in the batch. */
export interface PreparedAppend {
  index: number;
  event: NewEvent;
  options: AppendOptions;
  rid: string | null;
  data: string;
  due: Date | undefined;
}

/** Each INSERT statement carries at most this many bytes of event data, well below max_allowed_packet. */
const INSERT_BYTES = 1 << 20;

/** `rows` cut into as few statements as INSERT_BATCH rows and INSERT_BYTES (as `bytes` counts) allow. */
function chunks<T>(rows: readonly T[], bytes: (row: T) => number): T[][] {
  const cut: T[][] = [];
  for (let start = 0; start < rows.length; ) {
    let end = start;
    for (let size = 0; end < rows.length && end - start < INSERT_BATCH && (end === start || size + bytes(rows[end] as T) <= INSERT_BYTES); end += 1) {
      size += bytes(rows[end] as T);
    }
    cut.push(rows.slice(start, end));
    start = end;
  }
  return cut;
}

const INSERT = appendInserts('?');

/** What the server offers the appends: the clock read by the event INSERT (MariaDB), the append routine (append-routine.ts). */
export interface AppendServer {
  clockInInsert: boolean;
  routine: boolean;
  /** A CALL found the routine gone (append-routine.ts ROUTINE_GONE): the batch runs again without it. */
  routineGone?: () => void;
  /** Appends wait for the next batch: the CALL leaves the COMMIT to a statement, sent as the next batch starts. */
  queued?: () => boolean;
}

/** Whether a batch's rows fit in one CALL: each table in one statement's bounds, as the statements' chunks would be. */
function oneCall(rows: { event: Array<Record<string, string>>; [table: string]: readonly unknown[] }, leaseRows: readonly unknown[]): boolean {
  let bytes = 0;
  for (const row of rows.event) bytes += (row.x as string).length;
  return bytes <= INSERT_BYTES && Object.values(rows).every((list) => list.length <= INSERT_BATCH) && leaseRows.length <= INSERT_BATCH;
}

/** A UTC time as DATETIME(3) text. */
const datetime = (date: Date): string => date.toISOString().slice(0, 23).replace('T', ' ');

/**
 * Appends of a batch whose routine commits, at most. A larger batch is a pipelined publisher's, whose next batch, its
 * appends often not arrived yet as this CALL is sent, starts sooner as a COMMIT of its own is sent (MariaDB publish
 * throughput, one client with 200 in flight: ~3.6–4.2k events/s with every CALL committing, 3.8–5.4k without, in one
 * sitting): the committing CALL is for a batch nobody waits behind (a request(), a steady job, a lone publish).
 */
const COMMIT_IN_CALL_MAX = 8;

/**
 * Errors of a CALL that commits (append-routine.ts) after which its COMMIT may have run: the connection lost, or the
 * statement interrupted (KILL, a timeout, a shutdown) at whatever point of the routine. Any other error of the
 * server's is a statement's before the COMMIT, which the routine then never reached.
 */
const INTERRUPTED = new Set(['ER_CONNECTION_KILLED', 'ER_QUERY_INTERRUPTED', 'ER_STATEMENT_TIMEOUT', 'ER_QUERY_TIMEOUT', 'ER_SERVER_SHUTDOWN', 'ER_ERROR_DURING_COMMIT']);
const maybeCommitted = (error: unknown): boolean => {
  const code = driverCode(error);
  return code === undefined || !code.startsWith('ER_') || INTERRUPTED.has(code);
};

/** Driver codes of an insert that met a stored id or a missing rid: the batch is decided again with the id lookup. */
const LOOKUP_ON = ['ER_DUP_ENTRY', 'ER_NO_REFERENCED_ROW_2', 'ER_NO_REFERENCED_ROW'];

/**
 * appendAll on a writer connection, rolled back on failure and run again (from the start) on `retryOn` or a deadlock.
 * `unpositionedSince`: events stamped before it all have positions (see the check in appendAll); undefined when no
 * v4-written events are expected (Positions.unpositionedSince).
 *
 * First without looking the ids up: a batch of new ids with stored rids (the usual publish) is decided without
 * reading a row, and the primary key and foreign key find a stored id or a missing rid. When they do (a retried
 * publish, a rid to nothing), or when the batch repeats an id or has an expectedVersion, the batch runs with the lookup, which compares the
 * stored event and decides each append alone.
 *
 * `beforeCommit` is called as the COMMIT is sent (the group commit's turn, see group-commit.ts): the sequence row is
 * locked by this transaction until that commit, so a batch started then takes its positions after this one's.
 * `leases`: the groups waiting for work lease the batch's events in it (append-leases.ts), handed over after the
 * commit, before the outcomes are answered. `recent`: told of the batch once committed (../recent.ts), before the
 * outcomes are answered and so before anything routes them.
 */
export async function appendTransaction(
  writer: Pool | undefined,
  appends: readonly PreparedAppend[],
  retryOn: readonly string[],
  unpositionedSince: Date | undefined,
  beforeCommit: () => void = () => undefined,
  leases?: AppendLeases,
  server: AppendServer = { clockInInsert: false, routine: false },
  recent?: RecentPublished,
): Promise<AppendOutcome[]> {
  if (writer === undefined) throw notOpen();
  // A version conflict is decided before the insert, and must not be one that a retry of a stored event causes.
  let lookup = appends.some(({ options }) => options.expectedVersion !== undefined) || new Set(appends.map(({ event }) => event.id)).size !== appends.length;
  let committing = false;
  const commit = (): void => {
    committing = true;
    beforeCommit();
  };
  // A batch whose ledger rows met another client's lock (append-leases.ts) runs again once, leasing nothing.
  let leasing = leases;
  for (let attempt = 1; ; attempt += 1) {
    const conn = await writer.getConnection();
    const leased: { batch?: BatchLeases } = {};
    try {
      const outcomes = await appendAll(conn, appends, unpositionedSince, lookup, commit, leasing, leased, server, recent);
      conn.release();
      leased.batch?.end(true);
      return outcomes;
    } catch (error) {
      await conn.query('ROLLBACK').then(() => conn.release(), () => conn.destroy());
      // A failed COMMIT may have committed (its answer lost): the leases it holds are handed out, as a claim's are
      // (ledger-rows.ts heldAfterLostCommit). Given up, their events waited for the leases to run out, an attempt lost
      // each: one on its last attempt became a dead letter that never ran.
      const batch = leased.batch;
      if (batch !== undefined) batch.end(committing && (await batch.committedAfterAll(writer).catch(() => false)));
      // A failed COMMIT is not run again: the next batch may hold the sequence lock already.
      if (committing) throw error;
      const code = driverCode(error);
      if (server.routine && code !== undefined && ROUTINE_GONE.includes(code)) {
        server = { ...server, routine: false };
        server.routineGone?.();
        attempt -= 1;
        continue;
      }
      if (leasing !== undefined && code === 'ER_LOCK_WAIT_TIMEOUT') {
        leasing.pause();
        leasing = undefined;
        attempt -= 1;
        continue;
      }
      if (!lookup && code !== undefined && LOOKUP_ON.includes(code)) {
        lookup = true;
        attempt -= 1;
        continue;
      }
      if (!(code === 'ER_LOCK_DEADLOCK' || (code !== undefined && retryOn.includes(code))) || attempt >= ATTEMPTS) throw error;
    }
  }
}

/**
 * The appends of one batch in one transaction, under the sequence lock, in round trips that do not grow with the
 * batch: the sequence reserved (its row locked), one read for the clock, the v4-written events to position first and
 * the versions, (with `lookup`: one read of the stored ids and rids), one INSERT per table, (the sequence set when
 * fewer or more positions were taken than reserved), COMMIT. Decided here in request order (an append sees the ones
 * before it). A refused append writes nothing and is an outcome, not a throw, so that the rest commits.
 */
async function appendAll(
  conn: PoolConnection,
  appends: readonly PreparedAppend[],
  unpositionedSince: Date | undefined,
  lookup: boolean,
  beforeCommit: () => void,
  leases: AppendLeases | undefined,
  leased: { batch?: BatchLeases },
  { clockInInsert, routine, queued }: AppendServer,
  recent: RecentPublished | undefined,
): Promise<AppendOutcome[]> {
  // The writer connection has autocommit off: the locking UPDATE opens the transaction, COMMIT ends it. First the
  // sequence lock, then (after the lock, so that their snapshot sees every earlier append's commit, and timestamps
  // ascend with positions across gateways) the server time and every check's rows. Counted under the sequence lock,
  // which every append and firing takes first, versions cannot change before the insert, on this gateway or any other.
  const ids = [...new Set(appends.map((append) => append.event.id))];
  const rids = [...new Set(appends.flatMap(({ rid }) => (rid === null ? [] : [rid])))];
  const streams = new Map(
    appends.filter((append) => append.options.expectedVersion !== undefined).map(({ event }) => [streamKey(event.domain, event.pid), [event.domain, event.pid]] as const),
  );
  const reserved = appends.length;
  const base = await reserveSequence(conn, reserved);
  const domains = [...new Set(appends.map(({ event }) => event.domain))];
  const pids = [...new Set(appends.map(({ event }) => event.pid))];
  // One read: the clock; the unpositioned (v4-written) events of these eventlogs stamped since the last sweep, which
  // take the positions before this batch's, so that they stay before it in eventlog order as in v4's timestamp
  // order, and wait({ after }) at this batch does not see them as later (a range of idx_domain_pid per eventlog,
  // usually empty; domains × pids may name more eventlogs than the batch's, positioning those first is as right);
  // and the counts of the eventlogs with an expectedVersion (GROUP BY: exact for each of them).
  const versions = streams.size === 0 ? '' : `UNION ALL SELECT 2, NULL, NULL, e.domain, e.pid, COUNT(*) FROM event e WHERE e.domain IN (?) AND e.pid IN (?) AND ${FIRED} GROUP BY e.domain, e.pid`;
  const earlier =
    unpositionedSince === undefined
      ? ''
      : `UNION ALL SELECT 1, e.timestamp, e.id, NULL, NULL, NULL FROM event e ${WITH_POSITION}
      WHERE e.domain IN (?) AND e.pid IN (?) AND e.timestamp >= ? AND x.event_id IS NULL AND ${FIRED}`;
  const check = `SELECT 0 AS k, UTC_TIMESTAMP(3) AS t, NULL AS id, NULL AS domain, NULL AS pid, NULL AS n ${earlier} ${versions}`;
  const streamList = [...streams.values()];
  const params = [
    ...(unpositionedSince === undefined ? [] : [domains, pids, unpositionedSince]),
    ...(streams.size === 0 ? [] : [[...new Set(streamList.map(([d]) => d))], [...new Set(streamList.map(([, p]) => p))]]),
  ];
  type CheckRow = { k: number; t: Date | null; id: string | null; domain: string | null; pid: string | null; n: number | null };
  // Only the clock to read (no v4-written events expected, no expectedVersion): on MariaDB the event
  // INSERT reads it and returns it (INSERT … RETURNING), one round trip of the batch's ~7 less.
  const clocked = clockInInsert && unpositionedSince === undefined && streams.size === 0;
  const checked = clocked ? [] : await select<CheckRow>(conn, check, params);
  const now = checked.find((row) => Number(row.k) === 0)?.t ?? new Date();
  const unpositioned = checked.filter((row) => Number(row.k) === 1) as Array<CheckRow & { t: Date; id: string }>;
  unpositioned.sort((a, b) => a.t.getTime() - b.t.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const positionedFirst = new Map(unpositioned.map((row, i) => [row.id, base + i + 1]));
  // With the lookup: the events with these ids (whole) and the referenced ones (their id only).
  const sql = `SELECT e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, IF(e.id IN (?), e.data, NULL) AS data, x.position, x.traceparent, x.tracestate, e.id IN (?) AS wanted
    FROM event e ${WITH_POSITION} WHERE e.id IN (?)`;
  const found = lookup ? await select<EventRow & { wanted: number | null }>(conn, sql, [ids, ids, [...ids, ...rids]]) : [];
  const existing = found.filter((row) => Number(row.wanted) === 1);
  const timestamp = now.toISOString();
  const stored = new Map(existing.map((row) => [row.id, row]));
  const ridsFound = new Set(found.map((row) => row.id));
  const versionsOf = new Map([...streams.keys()].map((stream) => [stream, 0]));
  for (const row of checked) if (Number(row.k) === 2 && versionsOf.has(streamKey(String(row.domain), String(row.pid)))) versionsOf.set(streamKey(String(row.domain), String(row.pid)), Number(row.n));

  let next = base + positionedFirst.size;
  const created = new Map<string, StoredEvent>();
  const at = datetime(now);
  type Json = Record<string, string> | Array<string | number>;
  const rows = { event: [] as Array<Record<string, string>>, position: [] as Json[], published: [] as Json[], scheduled: [] as Json[], due: [] as Json[] };
  for (const [id, position] of positionedFirst) {
    rows.position.push([position, id]);
    const retried = stored.get(id);
    if (retried !== undefined) retried.position = position;
  }
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
    // Without the lookup the foreign key checks the rid (its failure brings the lookup).
    if (lookup && rid !== null && !ridsFound.has(rid) && !stored.has(rid) && !created.has(rid)) {
      const message = `event "${event.id}" refers (rid) to event "${rid}", which does not exist`;
      return { ok: false, error: new EventflowError('E_EVENTFLOW_REFERENCE_NOT_FOUND', message, { details: { id: event.id, rid } }) };
    }
    const stream = streamKey(event.domain, event.pid);
    const current = versionsOf.get(stream);
    const { expectedVersion } = options;
    if (expectedVersion !== undefined && current !== expectedVersion) {
      return { ok: false, error: versionConflict(event.domain, event.pid, current ?? 0, expectedVersion) };
    }
    // An unfired scheduled event does not count toward the version.
    if (current !== undefined && due === undefined) versionsOf.set(stream, current + 1);
    next += 1;
    const row: Record<string, string> = { i: event.id, t: at, d: event.domain, p: event.pid, n: event.name, x: data };
    if (rid !== null) row.r = rid;
    rows.event.push(row);
    rows.position.push(event.traceparent === undefined ? [next, event.id] : [next, event.id, event.traceparent, ...(event.tracestate === undefined ? [] : [event.tracestate])]);
    if (options.publisher !== undefined) {
      rows.published.push(options.routedBy === undefined ? { i: event.id, p: options.publisher } : { i: event.id, p: options.publisher, h: options.routedBy });
    }
    if (due !== undefined) {
      // v4's column holds whole seconds: rounded up, so that nothing reading it fires early.
      rows.scheduled.push([event.id, datetime(new Date(Math.ceil(due.getTime() / 1000) * 1000))]);
      rows.due.push([event.id, datetime(due)]);
    }
    const made: StoredEvent = { id: event.id, timestamp, domain: event.domain, rid, pid: event.pid, name: event.name, data: event.data, position: next };
    if (event.traceparent !== undefined) {
      made.traceparent = event.traceparent;
      if (event.tracestate !== undefined) made.tracestate = event.tracestate;
    }
    created.set(event.id, made);
    return { ok: true, result: { event: made, created: true } };
  });

  // Every position of the batch is one of its new events (none a v4 spoke's positioned here): the waiting groups lease
  // those in their backlogs (published, fired).
  if (leases !== undefined && rows.position.length === created.size) {
    const publishedRows = rows.published as Array<Record<string, string>>;
    const ids = new Set(publishedRows.map((row) => row.i));
    for (const [id] of rows.due as string[][]) ids.delete(id);
    const batch = await leases.take(conn, [...created.values()].filter((made) => ids.has(made.id)), base, next);
    leased.batch = batch;
    for (const row of batch === undefined ? [] : publishedRows) {
      const consumer = batch?.spokes.get(row.i as string);
      if (consumer !== undefined) row.c = consumer;
    }
  }
  // Then one INSERT per table (more only past INSERT_BATCH rows or INSERT_BYTES of data), the sequence if it differs
  // from what was reserved, and the commit.
  const stamp = (stamped: ReadonlyArray<{ id: string; timestamp: Date }>): void => {
    for (const row of stamped) {
      const made = created.get(row.id);
      if (made !== undefined) made.timestamp = row.timestamp.toISOString();
    }
  };
  const leaseRows = leased.batch?.rows ?? [];
  const routed = routine && clocked && rows.event.length > 0 && oneCall(rows, leaseRows);
  // All of it, the commit included, in one round trip (append-routine.ts), unless appends wait for the next batch. The
  // next batch starts once a committing CALL has returned: one that failed before its COMMIT runs again, and must keep
  // its place before the next.
  const commitInCall = routed && appends.length <= COMMIT_IN_CALL_MAX && queued?.() !== true;
  if (routed) {
    const json = JSON.stringify;
    const ledger = leaseRows.length > 0 ? leased.batch?.bound : undefined;
    const seq = next !== base + reserved ? next : null;
    const routineRows = { ev: json(rows.event), pos: json(rows.position), pub: json(rows.published), sch: json(rows.scheduled), due: json(rows.due), lse: json(leaseRows), seq, commit: commitInCall };
    try {
      stamp(await callAppendRoutine(conn, routineRows, ledger));
    } catch (error) {
      if (commitInCall && maybeCommitted(error)) beforeCommit();
      throw error;
    }
  } else {
    const insert = async <T>(sql: string, list: readonly T[], bytes: (row: T) => number = () => 0): Promise<void> => {
      for (const chunk of chunks(list, bytes)) await conn.execute(sql, [JSON.stringify(chunk)]);
    };
    if (!clocked) await insert(INSERT.event, rows.event, (row) => (row.x as string).length);
    else {
      for (const chunk of chunks(rows.event, (row) => (row.x as string).length)) {
        stamp((await conn.execute<RowDataPacket[]>(INSERT.eventClocked, [JSON.stringify(chunk)]))[0] as Array<{ id: string; timestamp: Date }>);
      }
    }
    await insert(INSERT.position, rows.position);
    await insert(INSERT.published, rows.published);
    await insert(INSERT.scheduled, rows.scheduled);
    await insert(INSERT.due, rows.due);
    await leased.batch?.write(conn);
    if (next !== base + reserved) await setSequence(conn, next);
  }
  if (commitInCall) beforeCommit();
  else {
    const committed = conn.query('COMMIT');
    beforeCommit();
    await committed;
  }
  if (recent !== undefined) {
    // Every position of (base, next] is one of the batch's new events (no v4 spoke's positioned here): the window
    // holds those that are published and not scheduled, which is what a read of these positions finds.
    if (rows.position.length !== created.size) recent.forget();
    else {
      const waiting = new Set((rows.due as string[][]).map(([id]) => id));
      const published = new Set((rows.published as Array<Record<string, string>>).map((row) => row.i));
      recent.committed(base, next, 0, [...created.values()].filter((made) => published.has(made.id) && !waiting.has(made.id)));
    }
  }
  return outcomes;
}
