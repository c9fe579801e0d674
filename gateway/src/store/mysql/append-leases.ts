/**
 * Leases at append on MySQL/MariaDB (DeliveryLedger.claimAtAppend, as sqlite/append-claims.ts): while
 * a group's members wait for work, the events of a batch are leased in the append's transaction, so
 * that a live job costs the append's commit and the settle's, not a claim's transaction too (its
 * round trips and its log flush), and goes out as soon as it is stored rather than after its route.
 * A steady 500 jobs/s waited ~20 ms at the median for its claim, behind the claim under way.
 *
 * Only once the group's rows are written up to the head before the batch (the sequence lock, held
 * from there to the commit, keeps every other writer's events out of the batch's range): then every
 * earlier event of the group has its row, and position order holds. Where this gateway's watermark
 * is behind and no batch under way here ends where this one starts (another gateway's events, a
 * claim that read before the last appends), the batch first writes the missing rows, those without
 * one, in one statement (unless the gap is long: claims write them). Each event of the group in the
 * batch gets its row, leased while the group takes more, free after (its route then claims it as
 * before). A batch that positions events written by v4 spokes leases nothing. The group is read again
 * in the batch once its copy here is GROUP_READ_MS old, as claims do (`ordered` set by a member on
 * another gateway, a deletion).
 *
 * The default group's lease is v4's claim too: `consumed_spoke` is written by the batch's own INSERT
 * of event_published, so a v4 spoke never sees the event unclaimed, as after a claim.
 *
 * The batch's ledger rows are written under the sequence lock, which every append of every gateway on
 * the database waits for: on MariaDB they wait LEDGER_LOCK_WAIT_S at most for a lock another client
 * holds on the ledger (`SET STATEMENT innodb_lock_wait_timeout`), and a batch that met one runs again
 * without leases, and leases nothing for PAUSE_MS (appends.ts). An operator's REPEATABLE READ `SELECT
 * … FROM eventflow_delivery … FOR UPDATE` (its scan locks the table's gaps) held every publish of
 * every gateway for the server's innodb_lock_wait_timeout (50 s by default), again and again while
 * it stayed open. MySQL has no SET STATEMENT: there the first batch waits that long, the rest go on.
 */
import { randomBytes } from 'node:crypto';
import type { Pool, PoolConnection } from 'mysql2/promise';
import type { StoredEvent } from '@eventflow/core';
import { DEFAULT_GROUP, deliveryId, deliveryPrefix, ledgerColumns, type AppendClaimer, type Claimed, type GroupKey, type GroupRecord } from '../ledger.js';
import { groupId, materializeRows, type CachedGroup } from './ledger-rows.js';
import { appendInserts } from './append-sql.js';
import { select } from './statements.js';

/** Seconds an append waits at most for a lock on the ledger's rows (MariaDB), well within a client's request timeout. */
export const LEDGER_LOCK_WAIT_S = 1;
/** After a batch whose ledger rows met a lock: appends lease nothing for so long (claims take the events, without the sequence lock). */
const PAUSE_MS = 10_000;

/** A statement as it is sent in an append's transaction (with its lock wait bounded, on MariaDB). */
export type Bound = (sql: string) => string;

/** A watermark further behind than this is left to the claims. */
const GAP_MAX = 1_000;

interface Armed {
  group: GroupRecord;
  claimer: AppendClaimer;
}

interface Taken {
  armed: Armed;
  /** The positions whose rows of the group the batch writes, or the batch before it (see AppendLeases). */
  range: Written;
  claimed: Claimed[];
  given: number;
}

/** Positions (`from`, `to`] whose rows of a group were written by a batch and what came before it, committed or not yet. */
interface Written {
  from: number;
  to: number;
  committed: boolean;
}

/** Ranges kept per group at most (batches under way, and committed ones ahead of the watermark). */
const RANGES_MAX = 64;

/** One row of the batch's INSERT: event id, domain, gname, grp, position, pid, name, [delivery, owner, deadline, claimed at]. */
type LeaseRow = [string, string, string, string, number, string, string, ...Array<string | number>];

/** The rows, each as an array (JSON_TABLE's paths by index); a free row has no lease members (NULL ON EMPTY). */
const INSERT_ROWS = appendInserts('?').leases;

/** What one batch leased: its rows and v4 claims to write, and its end (handed over, or given up). */
export class BatchLeases {
  readonly rows: LeaseRow[] = [];
  /** Event id → v4's `consumer`, for the default group's leases (written with event_published). */
  readonly spokes = new Map<string, string>();
  readonly #groups: Taken[];
  readonly #ended: (taken: Taken, committed: boolean) => void;
  /** The batch's statements that write the ledger (its rows, or the CALL that does) go so. */
  readonly bound: Bound;
  #done = false;

  constructor(groups: Taken[], ended: (taken: Taken, committed: boolean) => void, bound: Bound) {
    this.#groups = groups;
    this.#ended = ended;
    this.bound = bound;
  }

  /** In the transaction, after the batch's inserts: the group rows. */
  async write(conn: PoolConnection): Promise<void> {
    if (this.rows.length > 0) await conn.execute(this.bound(INSERT_ROWS), [JSON.stringify(this.rows)]);
  }

  /**
   * After a COMMIT that failed: whether it committed all the same (its answer lost, the connection killed or cut), read
   * by the first lease's delivery id, which only this batch writes. Read on a writer connection (autocommit off), its
   * transaction ended after.
   */
  async committedAfterAll(writer: Pool): Promise<boolean> {
    const delivery = this.rows.find((row) => row.length > 7)?.[7];
    if (delivery === undefined) return false;
    const conn = await writer.getConnection();
    try {
      return (await select(conn, 'SELECT 1 AS one FROM eventflow_delivery WHERE delivery = ?', [delivery])).length > 0;
    } finally {
      await conn.query('ROLLBACK').then(() => conn.release(), () => conn.destroy());
    }
  }

  /** The transaction ended: what it leased goes to the claimers (committed), or none of it was taken. Once. */
  end(committed: boolean): void {
    if (this.#done) return;
    this.#done = true;
    for (const taken of this.#groups) this.#ended(taken, committed);
  }
}

/** What the leases ask of the ledger (ledger.ts). */
export interface LedgerView {
  /** The group as the claims here last read it (its watermark), without reading the store. */
  cached(key: GroupKey): CachedGroup | undefined;
  /**
   * The same, read again on `conn` when older than GROUP_READ_MS; `head`: the head to record (the
   * append's transaction reads its own positions, which a claim must not take as committed).
   */
  read(conn: PoolConnection, key: GroupKey, now: number, head: number): Promise<CachedGroup | undefined>;
}

export class AppendLeases {
  readonly #ledger: LedgerView;
  readonly #armed = new Map<string, Armed>();
  /**
   * Per group, what batches wrote ahead of the watermark: the watermark moves through a range once it
   * is committed and starts at or below it. A batch whose group rows start where a batch under way
   * ends trusts it (no statement to look): if that one fails, neither range is ever reached from the
   * watermark, and claims write the rows as before.
   */
  readonly #ranges = new Map<string, Written[]>();
  /** The server's bound of a statement's lock wait (detect), for the ledger's statements that must not wait long. */
  bound: Bound = (sql) => sql;
  #pausedUntil = 0;

  constructor(ledger: LedgerView) {
    this.#ledger = ledger;
  }

  /** At the store's open: whether the server bounds one statement's lock wait (MariaDB's SET STATEMENT). */
  async detect(setup: Pool): Promise<void> {
    const [row] = await select<{ version: string }>(setup, 'SELECT VERSION() AS version');
    const mariadb = /-MariaDB/i.test(row?.version ?? '');
    this.bound = mariadb ? (sql) => `SET STATEMENT innodb_lock_wait_timeout = ${LEDGER_LOCK_WAIT_S} FOR ${sql}` : (sql) => sql;
  }

  /** A batch's ledger rows met another client's lock: the next batches lease nothing for a while. */
  pause(): void {
    this.#pausedUntil = Date.now() + PAUSE_MS;
  }

  set(group: GroupRecord, claimer: AppendClaimer | undefined): void {
    if (claimer && !group.ordered) this.#armed.set(groupId(group), { group, claimer });
    else this.forget(group);
  }

  forget(key: GroupKey): void {
    this.#armed.delete(groupId(key));
    this.#ranges.delete(groupId(key));
  }

  clear(): void {
    this.#armed.clear();
    this.#ranges.clear();
  }

  /**
   * In the append's transaction, under the sequence lock: the batch holds positions `before` + 1 to
   * `after`, and `published` are its events in the backlogs (published, fired), in position order.
   * Undefined when no group here takes part.
   */
  async take(conn: PoolConnection, published: readonly StoredEvent[], before: number, after: number): Promise<BatchLeases | undefined> {
    if (this.#armed.size === 0 || Date.now() < this.#pausedUntil) return undefined;
    const groups: Taken[] = [];
    const batch = new BatchLeases(groups, (taken, committed) => this.#ended(taken, committed), this.bound);
    try {
      await this.#plan(conn, published, before, after, groups, batch);
    } catch (error) {
      // Leases given to the groups planned before the failure: given up.
      batch.end(false);
      throw error;
    }
    return groups.length === 0 ? undefined : batch;
  }

  async #plan(conn: PoolConnection, published: readonly StoredEvent[], before: number, after: number, groups: Taken[], batch: BatchLeases): Promise<void> {
    const now = Date.now();
    /** (event id, ledger) rows of this batch: the default groups of a domain share one ledger. */
    const written = new Set<string>();
    for (const armed of this.#armed.values()) {
      const key = armed.group;
      // Read again once a second, as claims do: `ordered` set by a member on another gateway, a deletion.
      const group = await this.#ledger.read(conn, key, now, before);
      if (group === undefined || group.ordered) continue;
      const ranges = this.#advance(key);
      let from = before;
      if (group.materialized > before) continue;
      if (group.materialized < before && !ranges.some((range) => range.to === before)) {
        if (before - group.materialized > GAP_MAX) continue;
        // Committed before this batch took the sequence lock: every event up to `before` is visible.
        from = group.materialized;
        await materializeRows(conn, key, from, before, this.bound);
      }
      const range: Written = { from, to: after, committed: false };
      if (ranges.length >= RANGES_MAX) ranges.shift();
      ranges.push(range);
      const taken: Taken = { armed, range, claimed: [], given: 0 };
      groups.push(taken);
      const { gname, grp } = ledgerColumns(key);
      // One per group, as per claim: a delivery id is the event's and the secret's, and two groups lease one event.
      const secret = randomBytes(16).toString('hex');
      const prefix = deliveryPrefix();
      let taking = true;
      for (const event of published) {
        if (event.domain !== key.domain || (key.name !== '*' && event.name !== key.name)) continue;
        const row = `${event.id}\u0000${gname}\u0000${grp}`;
        // Written already: another default group of the ledger took it in this batch.
        if (written.has(row)) {
          taking = false;
          continue;
        }
        written.add(row);
        // Position order: once the group takes no more, the rest wait for a claim.
        const lease = taking ? armed.claimer.lease(event) : undefined;
        const base: LeaseRow = [event.id, event.domain, gname, grp, event.position, event.pid, event.name];
        if (lease === undefined) {
          taking = false;
          batch.rows.push(base);
          continue;
        }
        taken.given += 1;
        const delivery = deliveryId(prefix, secret, event.id);
        batch.rows.push([...base, delivery, lease.owner, lease.deadline, lease.now] as LeaseRow);
        if (key.group === DEFAULT_GROUP) batch.spokes.set(event.id, lease.consumer);
        taken.claimed.push({ event, delivery, attempt: 1 });
      }
    }
  }

  /** The batch's transaction ended for one group. */
  #ended(taken: Taken, committed: boolean): void {
    const { armed, range } = taken;
    if (!committed) {
      const ranges = this.#ranges.get(groupId(armed.group)) ?? [];
      const at = ranges.indexOf(range);
      if (at >= 0) ranges.splice(at, 1);
      armed.claimer.abandoned(taken.given);
      return;
    }
    range.committed = true;
    this.#advance(armed.group);
    // Not `covered`: the route of an event of the batch before, unleased, may come after this one.
    armed.claimer.committed(taken.claimed, taken.given, undefined);
  }

  /** The group's watermark through the committed ranges that start at or below it; the ranges still ahead of it. */
  #advance(key: GroupKey): Written[] {
    const id = groupId(key);
    let ranges = this.#ranges.get(id);
    if (ranges === undefined) this.#ranges.set(id, (ranges = []));
    const group = this.#ledger.cached(key);
    if (group === undefined) return ranges;
    for (let moved = true; moved; ) {
      moved = false;
      for (const range of ranges) {
        if (range.committed && range.from <= group.materialized && range.to > group.materialized) {
          group.materialized = range.to;
          moved = true;
        }
      }
    }
    const ahead = ranges.filter((range) => !range.committed || range.to > group.materialized);
    this.#ranges.set(id, ahead);
    return ahead;
  }
}
