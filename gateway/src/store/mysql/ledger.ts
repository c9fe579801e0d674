/**
 * The MySQL/MariaDB delivery ledger (store/ledger.ts): consumer groups and their work queue on the
 * gateway's own tables, shared by every gateway on the database.
 *
 * Its transactions run at READ COMMITTED on a pool of their own: a locking read then locks only the
 * rows it returns (no gap locks behind which appends or other gateways would queue), and a plain
 * read inside a transaction sees what is committed now. A claim takes its page with
 * `FOR UPDATE SKIP LOCKED` (MariaDB 10.6+, MySQL 8): gateways claiming one group at once take
 * different rows instead of waiting for each other's commits.
 */
import type { Pool, PoolConnection } from 'mysql2/promise';
import { EventflowError, type StoredEvent } from '@eventflow/core';
import type { AppendClaimer, Claimed, ClaimedDead, ClaimRequest, ClaimResult, DeadLetterQuery, DeliveryLedger, DeliveryRef, GroupKey, GroupOptions, GroupRecord, GroupSummary, LedgerAction, LedgerDeadLetter } from '../ledger.js';
import { atHand, checkInTime, CLAIMABLE_V4, DEFAULT_GROUP, deliveryId, deliveryPrefix, keyOf, ledgerColumns, UNSETTLED } from '../ledger.js';
import { ATTEMPTS, driverCode, isStoreStateError, notOpen, readAgain, run, type MysqlStoreOptions } from './db.js';
import type { WriteHealth } from '../write-health.js';
import { COLUMNS, toStoredEvent, type EventRow } from './rows.js';
import { affected, select, type Params } from './statements.js';
import { createLedgerTables, openLedgerPool } from './ledger-schema.js';
import { deadLetters, MysqlLedgerOperator } from './ledger-operator.js';
import { GROUP_READ_MS, groupId, heldAfterLostCommit, HELD_TABLE, ID_TABLE, num, persistWatermark, rowScope, toRecord, type CachedGroup, type GroupRow } from './ledger-rows.js';
import { AppendLeases } from './append-leases.js';
import { ClaimFrontier, materialize } from './claim-frontier.js';
import { applyActions, HELD, withHeld, type RefRow } from './ledger-settle.js';
import { SettleRoutine } from './settle-routine.js';
import { claimOrderColumns, orderedClaimable } from '../ordered-claim.js';

/** `consumed` answers kept at most (see #consumedAt). */
const CONSUMED_KEPT = 4096;

export class MysqlLedger implements DeliveryLedger {
  readonly #options: MysqlStoreOptions;
  #pool: Pool | undefined;
  /** Connections with autocommit off: a transaction opens with its first statement (no BEGIN round trip). */
  #writer: Pool | undefined;
  readonly #groups = new Map<string, CachedGroup>();
  /** How far the group's claims here wrote rows and found free ones (claim-frontier.ts). */
  readonly #frontier = new ClaimFrontier();
  /** Small batches of plain settles in one CALL that commits (MariaDB). */
  readonly #settles = new SettleRoutine();
  /**
   * (domain, name) → when a group was last found for it (`consumed`): every request() asks, one
   * round trip on its way. Kept GROUP_READ_MS, as the claims keep a group (a delete on another
   * gateway is seen that late); "none" is not kept, so a group recorded anywhere counts at once.
   */
  readonly #consumedAt = new Map<string, number>();
  /** The listings and the dead letters' operations (ledger-operator.ts). */
  readonly #operator = new MysqlLedgerOperator({ do: (what, work) => this.#do(what, work), tx: (what, work) => this.#tx(what, work) });
  /** The groups whose members wait for work, leased to in the appends' transactions (the store's appendBatch). */
  readonly atAppend = new AppendLeases({
    cached: (key) => this.#groups.get(groupId(key)),
    read: (conn, key, now, head) => this.#cached(conn, key, now, false, head),
  });

  /** The store's: a claim or settle that fails with the database's state makes /readyz probe the writes. */
  readonly #writes: WriteHealth | undefined;

  constructor(options: MysqlStoreOptions, writes?: WriteHealth) {
    this.#options = options;
    this.#writes = writes;
  }

  /** Creates or upgrades the ledger's tables (ledger-schema.ts), and opens its pools. */
  async open(setup: Pool): Promise<void> {
    await Promise.all([createLedgerTables(setup), this.atAppend.detect(setup)]);
    if (this.#options.appendRoutine !== false) await this.#settles.install(setup);
    this.#pool = openLedgerPool(this.#options, true);
    this.#writer = openLedgerPool(this.#options, false);
  }

  async close(): Promise<void> {
    const pools = [this.#pool, this.#writer];
    this.#pool = undefined;
    this.#writer = undefined;
    this.#groups.clear();
    this.atAppend.clear();
    this.#settles.close();
    await Promise.all(pools.map((pool) => pool?.end()));
  }

  /**
   * `work` in one transaction on a writer connection (autocommit off), run again on a deadlock.
   * COMMIT is sent as the last statement; a failure rolls back (or drops the connection). A COMMIT
   * that fails may have committed all the same (its answer lost): `lost`, given, reads back what holds.
   */
  async #transaction<T>(work: (conn: PoolConnection) => Promise<T>, lost?: (result: T) => Promise<T>): Promise<T> {
    const writer = this.#writer;
    if (writer === undefined) throw notOpen();
    for (let attempt = 1; ; attempt += 1) {
      const conn = await writer.getConnection();
      let worked: { result: T } | undefined;
      try {
        worked = { result: await work(conn) };
        await conn.query('COMMIT');
        conn.release();
        return worked.result;
      } catch (error) {
        await conn.query('ROLLBACK').then(() => conn.release(), () => conn.destroy());
        if (worked && lost) return lost(worked.result).catch(() => Promise.reject(error));
        if (driverCode(error) !== 'ER_LOCK_DEADLOCK' || attempt >= ATTEMPTS) throw error;
      }
    }
  }

  /**
   * One ledger operation, driver errors wrapped. One that failed with the database's state (read-only,
   * unreachable, a table gone) marks the store's writes failing, as a failed append does: /readyz then
   * answers by a write check, instead of ready while every claim and settle fails (nothing published).
   */
  #do<T>(what: string, work: (pool: Pool) => Promise<T>): Promise<T> {
    const pool = this.#pool;
    if (pool === undefined) return Promise.reject(notOpen());
    return run(pool, what, (on) =>
      work(on).catch((error: unknown) => {
        if (!(error instanceof EventflowError) && isStoreStateError(driverCode(error))) this.#writes?.failed();
        throw error;
      }),
    );
  }

  #tx<T>(what: string, work: (conn: PoolConnection) => Promise<T>): Promise<T> {
    return this.#do(what, () => this.#transaction(work));
  }

  async #groupRow(on: Pool | PoolConnection, key: GroupKey): Promise<(GroupRow & { head: number | string }) | undefined> {
    const [row] = await select<GroupRow & { head: number | string }>(
      on,
      `SELECT g.*, ${claimOrderColumns('g')}, (SELECT value FROM eventflow_sequence WHERE name = 'event') AS head FROM eventflow_group g WHERE g.domain = ? AND g.name = ? AND g.grp = ?`,
      [key.domain, key.name, key.group],
    );
    return row;
  }

  async ensureGroup(key: GroupKey, options: Partial<GroupOptions> = {}): Promise<GroupRecord> {
    return this.#do('record the consumer group', async (pool) => {
      const ordered = options.ordered === undefined ? 0 : Number(options.ordered);
      const created = await affected(
        pool,
        `INSERT IGNORE INTO eventflow_group (domain, name, grp, created_position, created_at, ordered)
         SELECT ?, ?, ?, value, UTC_TIMESTAMP(3), ? FROM eventflow_sequence WHERE name = 'event'`,
        [key.domain, key.name, key.group, ordered],
      );
      const changed = options.ordered === undefined ? 0 : await affected(pool, `UPDATE eventflow_group SET ordered = ? WHERE domain = ? AND name = ? AND grp = ? AND ordered <> ?`, [ordered, key.domain, key.name, key.group, ordered]);
      this.#groups.delete(groupId(key));
      this.#frontier.forget(groupId(key));
      // The domain's other default groups claim by it too (claimOrderColumns): read again here at once (other gateways within GROUP_READ_MS).
      if (changed > 0 && key.group === DEFAULT_GROUP) this.#groups.clear();
      const row = await this.#groupRow(pool, key);
      if (!row) throw new Error('the group was not recorded (eventflow_sequence has no row)');
      // Recorded now: rows of this key up to its start are an earlier group's, written after that one's
      // delete by a claim going by its cached copy on another gateway (GROUP_READ_MS). Left, the
      // listing would count them as this group's pending work for good.
      if (created > 0 && key.group !== DEFAULT_GROUP) {
        await affected(pool, `DELETE FROM eventflow_delivery WHERE domain = ? AND gname = ? AND grp = ? AND position <= ?`, [key.domain, key.name, key.group, row.created_position]);
      }
      return toRecord(row);
    });
  }

  async group(key: GroupKey): Promise<GroupRecord | undefined> {
    const row = await this.#do('read the consumer group', (pool) => this.#groupRow(pool, key));
    return row && toRecord(row);
  }

  async deleteGroup(key: GroupKey): Promise<boolean> {
    this.#groups.delete(groupId(key));
    this.#frontier.forget(groupId(key));
    this.atAppend.forget(key);
    const deleted = await this.#tx('delete the consumer group', async (conn) => {
      const deleted = (await affected(conn, `DELETE FROM eventflow_group WHERE domain = ? AND name = ? AND grp = ?`, [key.domain, key.name, key.group])) > 0;
      if (deleted && key.group !== DEFAULT_GROUP) await affected(conn, `DELETE FROM eventflow_delivery WHERE domain = ? AND gname = ? AND grp = ?`, [key.domain, key.name, key.group]);
      return deleted;
    });
    // After the commit: a `consumed` read while the delete ran may have found the group again.
    this.#consumedAt.clear();
    return deleted;
  }

  countGroups(domain: string): Promise<number> {
    return this.#operator.countGroups(domain);
  }

  groups(at: number, domains?: readonly string[], patterns?: readonly string[]): Promise<GroupSummary[]> {
    // The watermarks this gateway's claims committed: the rows up to each are written (claim-frontier.ts).
    const written = [...this.#groups].map(([id, cached]) => {
      const [domain = '', name = '', group = ''] = id.split('\u0000');
      return { key: { domain, name, group }, created: cached.created, materialized: cached.materialized };
    });
    return this.#operator.groups(at, domains, patterns, written);
  }

  deadLetters(query: DeadLetterQuery): Promise<LedgerDeadLetter[]> {
    return this.#operator.deadLetters(query);
  }

  async requeue(key: GroupKey, eventId: string): Promise<boolean> {
    return this.#operator.requeue(key, eventId).finally(() => this.#frontier.rescan());
  }

  async discard(key: GroupKey, eventId: string): Promise<boolean> {
    return this.#operator.discard(key, eventId);
  }

  async consumed(domain: string, name: string): Promise<boolean> {
    const id = `${domain}\u0000${name}`;
    const at = this.#consumedAt.get(id);
    if (at !== undefined && Date.now() - at < GROUP_READ_MS) return true;
    const found = await this.#do('read the consumer groups', (pool) => readAgain(async () => (await select(pool, `SELECT 1 AS one FROM eventflow_group WHERE domain = ? AND name IN (?, '*') LIMIT 1`, [domain, name])).length > 0));
    if (!found) this.#consumedAt.delete(id);
    else {
      // Bounded: names published to by requests are few; a client making up names just empties it.
      if (this.#consumedAt.size >= CONSUMED_KEPT) this.#consumedAt.clear();
      this.#consumedAt.set(id, Date.now());
    }
    return found;
  }

  /**
   * The group as this gateway last read it, and how far its rows are written (the watermark: every
   * event of the group's filter up to it has its row). Read again at least every GROUP_READ_MS, so
   * that `ordered` set by another gateway's member applies here within that time.
   */
  async #cached(pool: Pool | PoolConnection, key: GroupKey, now: number, reread = false, head = Infinity): Promise<CachedGroup | undefined> {
    const id = groupId(key);
    const cached = this.#groups.get(id);
    if (cached && !reread && now - cached.readAt < GROUP_READ_MS) return cached;
    const row = await this.#groupRow(pool, key);
    if (!row) {
      this.#groups.delete(id);
      return undefined;
    }
    const fresh: CachedGroup = {
      created: Number(row.created_position),
      ordered: Number(row.claim_ordered ?? row.ordered) === 1,
      across: Number(row.across_names ?? 0) === 1,
      // Another gateway may have written further: the higher of the two.
      materialized: Math.max(cached?.materialized ?? 0, Number(row.materialized ?? row.created_position)),
      head: Math.min(head, Number(row.head)),
      readAt: now,
      persistedAt: cached?.persistedAt ?? now,
      stored: Number(row.materialized ?? row.created_position),
    };
    this.#groups.set(id, fresh);
    return fresh;
  }

  async claim({ group: key, owner, consumer, secret, deadline, now, limit, maxAttempts, upTo, known, held = [], clock }: ClaimRequest): Promise<ClaimResult> {
    return this.#do('claim events for a consumer group', async (pool) => {
      // Not caused by a route (a member joined, a timer): the head is read now, with the group.
      const group = await this.#cached(pool, key, now, upTo === undefined);
      if (!group) return { claimed: [], dead: [], nextDue: undefined, missing: true };
      const to = Math.max(upTo ?? 0, group.head);
      const id = groupId(key);
      let materialized = group.materialized;
      let writing = false;
      /** Where it looks for free rows, read once: a rolled-back attempt's scan moved the frontier past its rows, and the retry took the next page. */
      let scanFrom: number | undefined;
      let committed = true;
      const v4 = key.group === DEFAULT_GROUP;
      const { gname, grp } = ledgerColumns(key);
      const scope = rowScope(key);
      const keep = held.length > 0 ? `AND d.delivery NOT IN (SELECT h.id FROM ${HELD_TABLE})` : '';
      const keepParams = held.length > 0 ? [JSON.stringify(held)] : [];
      const free = `d.outcome IS NULL AND d.position > ? AND (d.deadline IS NULL OR d.deadline <= ? ${keep}) AND (d.available_at IS NULL OR d.available_at <= ?) ${v4 ? `AND ${CLAIMABLE_V4}` : ''}`;
      const freeParams = [group.created, now, ...keepParams, now];
      const join = v4 ? 'JOIN event_published p ON p.event_id = d.event_id' : '';
      type Candidate = { event_id: string; attempts: number; last_error: string | null };
      return this.#transaction(async (conn) => {
        // Again on each attempt (#transaction runs it again after a deadlock): a rolled-back attempt's rows are not there.
        materialized = group.materialized;
        if (group.materialized < to && (writing || (writing = this.#frontier.startWriting(id)))) materialized = await materialize(conn, key, group.materialized, to, limit);
        let rows: Candidate[];
        if (!group.ordered) {
          // Leases that ran out first (their gateways died or stalled): looked for without locks (a
          // locking read of the range `deadline <= now` also locks the first lease in force past it, an
          // open delivery whose settle would then wait for this claim), then locked by key. Then rows with
          // no lease, in position order: the index's range of NULL deadlines, which examines no lease.
          const v4Free = v4 ? `AND ${CLAIMABLE_V4}` : '';
          const expired = await select<{ event_id: string }>(
            conn,
            `SELECT d.event_id FROM eventflow_delivery d ${join} WHERE ${scope.sql} AND d.outcome IS NULL AND d.deadline <= ? ${keep} AND d.position > ? ${v4Free} ORDER BY d.deadline LIMIT ?`,
            [...scope.params, now, ...keepParams, group.created, limit],
          );
          rows =
            expired.length === 0
              ? []
              : await select<Candidate>(
                  conn,
                  `SELECT d.event_id, d.attempts, d.last_error FROM ${ID_TABLE} JOIN eventflow_delivery d ON d.event_id = j.id AND d.gname = ? AND d.grp = ? ${join}
                   WHERE d.outcome IS NULL AND d.deadline <= ? ${v4Free} FOR UPDATE SKIP LOCKED`,
                  [JSON.stringify(expired.map((row) => row.event_id)), gname, grp, now],
                );
          if (rows.length < limit) {
            const after = (scanFrom ??= this.#frontier.freeAfter(id, group.created, now));
            const asked = limit - rows.length;
            const more = await select<Candidate & { position: number | string }>(
              conn,
              // The index named: MariaDB otherwise reads it by its first five columns (`ref`) from the group's first row
              // with no lease, and tests the position on every entry up to `after`.
              `SELECT d.event_id, d.attempts, d.last_error, d.position FROM eventflow_delivery d FORCE INDEX (idx_delivery_queue) ${join}
               WHERE ${scope.sql} AND d.outcome IS NULL AND d.deadline IS NULL AND d.position > ? AND (d.available_at IS NULL OR d.available_at <= ?) ${v4Free}
               ORDER BY d.position LIMIT ? FOR UPDATE SKIP LOCKED`,
              [...scope.params, after, now, asked],
            );
            this.#frontier.scanned(id, group.created, after, asked, more.map((row) => Number(row.position)));
            rows = [...rows, ...more];
          }
        } else {
          // The first unsettled row of each pid, read without locks (a locking read would lock the
          // rows its NOT EXISTS reads); then those still free locked, skipping what another claim holds.
          const firsts = await select<{ event_id: string }>(
            conn,
            `SELECT d.event_id FROM eventflow_delivery d ${join} WHERE ${scope.sql} AND ${free} AND ${orderedClaimable('?', v4 && !group.across, '?')}
             ORDER BY d.position LIMIT ?`,
            [...scope.params, ...freeParams, group.created, now, limit],
          );
          rows =
            firsts.length === 0
              ? []
              : await select<Candidate>(
                  conn,
                  `SELECT d.event_id, d.attempts, d.last_error FROM ${ID_TABLE} JOIN eventflow_delivery d ON d.event_id = j.id AND d.gname = ? AND d.grp = ? ${join}
                   WHERE ${free} ORDER BY d.position FOR UPDATE SKIP LOCKED`,
                  [JSON.stringify(firsts.map((row) => row.event_id)), gname, grp, ...freeParams],
                );
        }
        const ids = rows.map((row) => row.event_id);
        const { events, missing } = atHand(ids, known);
        if (missing.length > 0) {
          for (const row of await select<EventRow>(conn, `SELECT ${COLUMNS} FROM ${ID_TABLE} STRAIGHT_JOIN event e FORCE INDEX (PRIMARY) ON e.id = j.id JOIN eventflow_position x ON x.event_id = e.id`, [JSON.stringify(missing)])) {
            events.set(row.id, toStoredEvent(row));
          }
        }
        // Rows of events deleted behind the ledger (no foreign key): dropped.
        const gone = ids.filter((id) => !events.has(id));
        if (gone.length > 0) await affected(conn, `DELETE d FROM ${ID_TABLE} STRAIGHT_JOIN eventflow_delivery d FORCE INDEX (PRIMARY) ON d.event_id = j.id WHERE d.gname = ? AND d.grp = ?`, [JSON.stringify(gone), gname, grp]);
        const dead: ClaimedDead[] = [];
        const letters = rows
          .filter((row) => Number(row.attempts) >= maxAttempts && events.has(row.event_id))
          .map((row) => ({ id: row.event_id, error: row.last_error ?? 'lease expired', attempts: Number(row.attempts) }));
        if (letters.length > 0) {
          await deadLetters(conn, gname, grp, letters);
          for (const letter of letters) dead.push({ event: events.get(letter.id) as StoredEvent, attempts: letter.attempts, lastError: letter.error });
        }
        const claiming = rows.filter((row) => Number(row.attempts) < maxAttempts && events.has(row.event_id));
        const claimed: Claimed[] = [];
        if (claiming.length > 0) {
          const ids = claiming.map((row) => row.event_id);
          const prefix = deliveryPrefix();
          // Single-table statements (a multi-table UPDATE costs about a millisecond whatever its size:
          // ledger-settle.ts): the rows' leases, and for the default group v4's claim beside them.
          await affected(
            conn,
            `UPDATE eventflow_delivery FORCE INDEX (PRIMARY) SET delivery = CONCAT(?, LEFT(SHA2(CONCAT(?, ':', event_id), 256), 32)), owner = ?, deadline = ?, available_at = NULL, attempts = attempts + 1, updated = UTC_TIMESTAMP(3), claimed_at = ?
             WHERE event_id IN (?) AND gname = ? AND grp = ?`,
            [prefix, secret, owner, deadline, now, ids, gname, grp],
          );
          if (v4) await affected(conn, `UPDATE event_published FORCE INDEX (PRIMARY) SET consumed_spoke = UTC_TIMESTAMP(), consumer = ? WHERE event_id IN (?)`, [consumer, ids]);
          for (const row of claiming) claimed.push({ event: events.get(row.event_id) as StoredEvent, delivery: deliveryId(prefix, secret, row.event_id), attempt: Number(row.attempts) + 1 });
        }
        let nextDue: number | undefined;
        // Rows written only part of the way to `to` (a page's worth that others hold or v4's spokes took): more may be
        // free beyond them, so the group claims again at once, not at its poll.
        if (rows.length < limit && materialized < to) nextDue = now;
        else if (rows.length < limit) {
          const [due] = await select<{ next: number | string | null }>(
            conn,
            `SELECT MIN(CASE WHEN d.deadline > ? THEN d.deadline ELSE d.available_at END) AS next FROM eventflow_delivery d
             WHERE ${scope.sql} AND d.outcome IS NULL AND (d.deadline > ? OR d.available_at > ?)`,
            [now, ...scope.params, now, now],
          );
          nextDue = num(due?.next);
        }
        // The last statement before COMMIT: a claim the link or the database held past its deadline rolls back.
        checkInTime(clock, deadline);
        return { claimed, dead, nextDue, missing: false };
      }, (result) => ((committed = false), heldAfterLostCommit(pool, key, result))).then((result) => {
        // Rows written by a claim whose COMMIT was lost may not be there: the watermark stays. The group's entry may
        // have been read again meanwhile (another claim): it moves too, or the next claim would write the rows again.
        if (committed && materialized > group.materialized) group.materialized = materialized;
        const current = this.#groups.get(id);
        if (committed && current && current.created === group.created && materialized > current.materialized) current.materialized = materialized;
        // Also by a claim that did not move it (a drained group's poll): a drain's rows are written by its first
        // claims, within a GROUP_READ_MS, and the row kept the watermark of before the drain until an event moved
        // it again; every listing (a /metrics scrape) counted the drain's events one by one meanwhile.
        if (committed && group.materialized > group.stored && now - group.persistedAt >= GROUP_READ_MS) {
          group.persistedAt = now;
          void persistWatermark(pool, key, group, this.atAppend.bound);
        }
        return result;
      }, (error: unknown) => {
        this.#frontier.rescan(); // the rows its scan passed are free again (rolled back: LateClaim, a deadlock)
        throw error;
      }).finally(() => writing && this.#frontier.doneWriting(id));
    });
  }

  claimAtAppend(group: GroupRecord, claimer: AppendClaimer | undefined): void {
    this.atAppend.set(group, claimer);
  }

  async apply(actions: readonly LedgerAction[]): Promise<Array<DeliveryRef | undefined | Error>> {
    if (actions.length === 0) return [];
    // Released rows are free once committed: claims here look for them again from then (claim-frontier.ts).
    const freeing = actions.some((action) => action.kind === 'release');
    const writer = this.#writer;
    const rows = await (async () =>
      (writer && this.#settles.takes(actions) ? await this.#do('record the deliveries', () => this.#settles.apply(writer, actions)) : undefined) ??
      this.#tx('record the deliveries', (conn) => applyActions(conn, actions, (sql) => `${sql} SKIP LOCKED`)))().finally(() => freeing && this.#frontier.rescan());
    const held = actions.filter((_, i) => rows[i] === HELD);
    // Rows another client's transaction holds (an operator's FOR UPDATE): written once the rest are committed, in a
    // transaction of their own that waits for the lock (bounded on MariaDB). Before, the batch's read waited, and
    // every settle of it failed with the lock wait, and again beside it each time it was sent again.
    const again =
      held.length === 0
        ? []
        : await this.#tx('record the deliveries', (conn) => applyActions(conn, held, (sql) => this.atAppend.bound(sql)))
            .finally(() => freeing && this.#frontier.rescan())
            .catch((error: unknown) => held.map(() => (error instanceof Error ? error : new Error(String(error)))));
    return withHeld(actions, rows, again);
  }

  async delivery(delivery: string): Promise<(DeliveryRef & { domain: string; deadline: number | undefined }) | undefined> {
    const [row] = await this.#do('read the delivery', (pool) =>
      select<RefRow & { deadline: number | string | null }>(pool, `SELECT event_id, domain, gname, grp, name, attempts, delivery, deadline FROM eventflow_delivery WHERE delivery = ? AND outcome IS NULL`, [delivery]),
    );
    return row && { key: keyOf(row.domain, row.gname, row.grp, row.name ?? ''), eventId: row.event_id, attempts: Number(row.attempts), domain: row.domain, deadline: row.deadline === null ? undefined : Number(row.deadline) };
  }

  async extend(delivery: string, deadline: number): Promise<boolean> {
    return this.#do('extend the lease', async (pool) => (await affected(pool, `UPDATE eventflow_delivery SET deadline = ? WHERE delivery = ? AND outcome IS NULL`, [deadline, delivery])) > 0);
  }

  async releaseOwner(owner: string): Promise<number> {
    return this.#tx('release the leases', async (conn) => {
      const rows = await select<{ event_id: string; grp: string }>(conn, `SELECT event_id, grp FROM eventflow_delivery WHERE owner = ? AND outcome IS NULL AND deadline IS NOT NULL FOR UPDATE`, [owner]);
      await affected(
        conn,
        `UPDATE eventflow_delivery SET delivery = NULL, owner = NULL, deadline = NULL, attempts = GREATEST(0, CAST(attempts AS SIGNED) - 1) WHERE owner = ? AND outcome IS NULL AND deadline IS NOT NULL`,
        [owner],
      );
      const v4 = rows.filter((row) => row.grp === DEFAULT_GROUP).map((row) => row.event_id);
      if (v4.length > 0) await affected(conn, `UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id IN (?) AND success IS NULL AND failed IS NULL`, [v4]);
      return rows.length;
    }).finally(() => this.#frontier.rescan());
  }
}
