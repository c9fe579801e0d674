/**
 * The MySQL store's write path: the appends of one group commit (see ../group-commit.ts) in one transaction on a
 * writer connection, under the sequence lock (see positions.ts).
 */
import type { Pool, PoolConnection } from 'mysql2/promise';
import { EventflowError, streamKey, type StoredEvent } from '@eventflow/core';
import { lockSequence, setSequence } from './schema.js';
import { positionEarlier } from './positions.js';
import { insertRows, select } from './statements.js';
import { isSameEvent } from '../same-event.js';
import { versionConflict, type AppendOptions, type AppendOutcome, type NewEvent } from '../store.js';
import { ATTEMPTS, driverCode, notOpen } from './db.js';
import { FIRED, INSERT_BATCH, toStoredEvent, WITH_POSITION, type EventRow, type Row } from './rows.js';

/** An append validated and serialised before its batch's transaction; `index` is its place in the batch. */
export interface PreparedAppend {
  index: number;
  event: NewEvent;
  options: AppendOptions;
  rid: string | null;
  data: string;
  due: Date | undefined;
}

/** Multi-row INSERT statements carry at most this many bytes of event data each, well below max_allowed_packet. */
const INSERT_BYTES = 1 << 20;

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

/**
 * The appends of one batch in one transaction, under the sequence lock: every check is one query for the whole batch,
 * decided here in request order (an append sees the ones before it), then one multi-row INSERT per table. A refused
 * append writes nothing and is an outcome, not a throw, so that the rest commits.
 */
/**
 * appendAll on a writer connection, rolled back on failure and run again (from the start) on `retryOn` or a deadlock.
 * `unpositionedSince`: events stamped before it all have positions (see positionEarlier).
 */
export async function appendTransaction(
  writer: Pool | undefined,
  appends: readonly PreparedAppend[],
  retryOn: readonly string[],
  unpositionedSince: Date,
): Promise<AppendOutcome[]> {
  if (writer === undefined) throw notOpen();
  for (let attempt = 1; ; attempt += 1) {
    const conn = await writer.getConnection();
    try {
      const outcomes = await appendAll(conn, appends, unpositionedSince);
      conn.release();
      return outcomes;
    } catch (error) {
      await conn.query('ROLLBACK').then(() => conn.release(), () => conn.destroy());
      const code = driverCode(error);
      if (!(code === 'ER_LOCK_DEADLOCK' || (code !== undefined && retryOn.includes(code))) || attempt >= ATTEMPTS) throw error;
    }
  }
}

async function appendAll(conn: PoolConnection, appends: readonly PreparedAppend[], unpositionedSince: Date): Promise<AppendOutcome[]> {
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
  // v4-written events of these eventlogs stored before this append come before it (positionEarlier).
  const positionedFirst = await positionEarlier(conn, base, [...new Set(appends.map(({ event }) => event.domain))], [...new Set(appends.map(({ event }) => event.pid))], unpositionedSince);
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

  let next = base + positionedFirst.size;
  const created = new Map<string, StoredEvent>();
  const rows = { event: [] as Row[], position: [] as Row[], published: [] as Row[], scheduled: [] as Row[], due: [] as Row[] };
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
