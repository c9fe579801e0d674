/**
 * Positions of the MySQL store, and the reads that first position what they would return.
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
 * unpositioned events of its scope. Narrow scopes (an id, an eventlog, an eid, a cpid) are checked whole, by the read
 * itself (one round trip; a second read only when it met an event without a position). A whole
 * domain (readPublishedAfter, which must stay a seek by position) is checked only from 10 s before the last sweep,
 * at most once a second per domain and then only back to 2 s before the previous check (see CHECK_EVERY_MS), and a
 * sweep runs in the background at most once a minute: an event whose timestamp is older than that window when
 * inserted (a caller-set timestamp, a non-UTC server, a commit later than 2 s) joins the published log by the next
 * sweep at the latest.
 */
import type { Pool, PoolConnection } from 'mysql2/promise';
import type { StoredEvent } from '@eventflow/core';
import { lockSequence, setSequence } from './schema.js';
import { affected, insertRows, select } from './statements.js';
import { transaction, utcNow } from './db.js';
import { COLUMNS, FIRED, INSERT_BATCH, toStoredEvent, WITH_POSITION, type EventRow, type Read } from './rows.js';

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

/** Sets the event's position (a fired event moves) and raises the sequence to it. The sequence row must be locked. */
export async function setPosition(conn: PoolConnection, eventId: string, position: number): Promise<void> {
  await affected(conn, 'INSERT INTO eventflow_position (position, event_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE position = ?', [position, eventId, position]);
  await setSequence(conn, position);
}

/** The lazy positioning of one store: its last sweep and its wide reads' last looks. */
export class Positions {
  /** Every event with an earlier timestamp had a position at the last sweep (at #sweptAt); wide reads look after it. */
  #sweptBefore = new Date(0);
  #sweptAt = 0;
  #sweeping: Promise<void> | undefined;
  /** An event without a position (written by a v4 spoke) was met since init. */
  #metUnpositioned = false;
  /** Domain → when a wide read last looked for its unpositioned events (Date.now()), and the server time it looked from then. */
  readonly #checked = new Map<string, { at: number; serverTime: Date }>();

  /**
   * Where an append looks for the unpositioned events of its eventlogs from (every event stamped before it had a
   * position at the last sweep), or undefined when it need not look: v4 spokes are not expected to write (`v4Writers`)
   * and this store has not met an unpositioned event since init.
   */
  unpositionedSince(v4Writers: boolean): Date | undefined {
    return v4Writers || this.#metUnpositioned ? this.#sweptBefore : undefined;
  }

  /** The background sweep, if one runs. */
  get sweeping(): Promise<void> | undefined {
    return this.#sweeping;
  }

  /**
   * Positions those of `ids` that still have no position (events written by v4 spokes), in (timestamp, id) order after
   * every position assigned so far; a thousand per transaction, so that appends wait for the lock only briefly.
   */
  async #assign(pool: Pool, ids: readonly string[]): Promise<void> {
    for (let start = 0; start < ids.length; start += INSERT_BATCH) {
      const work = async (conn: PoolConnection): Promise<void> => {
        const base = await lockSequence(conn);
        const sql = `SELECT e.id FROM event e ${WITH_POSITION} WHERE e.id IN (?) AND x.event_id IS NULL ORDER BY e.timestamp, e.id`;
        const missing = await select<{ id: string }>(conn, sql, [ids.slice(start, start + INSERT_BATCH)]);
        if (missing.length === 0) return;
        this.#metUnpositioned = true;
        await insertRows(conn, 'INSERT INTO eventflow_position (position, event_id) VALUES', '(?, ?)', missing.map((row, i) => [base + i + 1, row.id]));
        await setSequence(conn, base + missing.length);
      };
      // An event deleted in between: again, without it.
      await transaction(pool, work, ['ER_NO_REFERENCED_ROW_2', 'ER_NO_REFERENCED_ROW']);
    }
  }

  /** Positions every unpositioned event in the database, then moves the window of wide reads up to the sweep's start. */
  async sweep(pool: Pool): Promise<void> {
    const started = await utcNow(pool);
    const missing = await select<{ id: string }>(pool, `SELECT e.id FROM event e ${WITH_POSITION} WHERE x.event_id IS NULL ORDER BY e.timestamp, e.id`);
    await this.#assign(pool, missing.map((row) => row.id));
    this.#sweptBefore = new Date(started.getTime() - SWEEP_MARGIN_MS);
    this.#sweptAt = Date.now();
  }

  /** Runs a multi-event read, after positioning the unpositioned events of its scope (see the header). */
  async events(pool: Pool, read: Read): Promise<StoredEvent[]> {
    const scope = read.onlyFired === false ? read.where : `${read.where} AND ${FIRED}`;
    const params = [...read.params, ...(read.after === undefined ? [] : [read.after]), ...(read.limit === undefined ? [] : [read.limit])];
    const limit = read.limit === undefined ? '' : ' LIMIT ?';
    if (read.wide === undefined) {
      // A narrow scope in one round trip when none of it lacks a position (the usual case): its events and the
      // unpositioned ones together, these first (NULL sorts first), so that even under LIMIT one shows if any exists.
      const after = read.after === undefined ? '' : ' AND (x.position > ? OR x.position IS NULL)';
      const rows = await select<EventRow>(pool, `SELECT ${COLUMNS} FROM ${read.from} ${WITH_POSITION} WHERE ${scope}${after} ORDER BY x.position${limit}`, params);
      if (rows.every((row) => row.position !== null)) return rows.map(toStoredEvent);
    }
    if (read.wide !== undefined && Date.now() - this.#sweptAt > SWEEP_EVERY_MS) {
      this.#sweeping ??= this.sweep(pool).catch(() => undefined).finally(() => (this.#sweeping = undefined));
    }
    const since = read.wide === undefined ? undefined : await this.#checkSince(pool, read.wide);
    if (read.wide === undefined || since !== undefined) {
      const window = since === undefined ? '' : ' AND e.timestamp >= ?';
      const unpositioned = `SELECT e.id FROM ${read.from} ${WITH_POSITION} WHERE ${scope}${window} AND x.event_id IS NULL ORDER BY e.timestamp, e.id`;
      const missing = await select<{ id: string }>(pool, unpositioned, since === undefined ? read.params : [...read.params, since]);
      if (missing.length > 0) await this.#assign(pool, missing.map((row) => row.id));
    }
    const after = read.after === undefined ? '' : ' AND x.position > ?';
    const sql = `SELECT ${COLUMNS} FROM ${read.from} JOIN eventflow_position x ON x.event_id = e.id WHERE ${scope}${after} ORDER BY x.position${limit}`;
    return (await select<EventRow>(pool, sql, params)).map(toStoredEvent);
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
}
