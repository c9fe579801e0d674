/**
 * Writing a SQLite consumer group's rows (ledger.ts claims): ahead of time for an ordered group, whose
 * claim reads the first unsettled row of each pid, or as they are leased for the others; and the
 * watermark (`eventflow_group.materialized`) they move. Every event of the group's filter positioned
 * up to the watermark has its row.
 */
import type { GroupKey } from '../ledger.js';
import { DEFAULT_GROUP, ledgerColumns } from '../ledger.js';
import { eventScope, type GroupRow, type LedgerSql } from './ledger-sql.js';

/** Events per claim whose rows are written at most (the watermark moves in steps: bounded transactions). */
export const MATERIALIZE_PAGE = 10_000;
/** The largest literal page size of a claim statement (a power of two; claims of up to twice this less one are taken in sizes). */
export const PAGE_SIZES = 1024;
/** How often the watermark is written to the group's row (a restart writes the rows after it again, ignored). */
export const PERSIST_MS = 1_000;

/** A row a claim leased, as its statements return it. */
export type Taken = { event_id: string; attempts: number; delivery: string; position: number; last_error: string | null };
/** The columns a claim's statements return (`RETURNING ${TAKEN}`), as LedgerSql.tuples gives them. */
export const TAKEN = 'event_id, attempts, delivery, position, last_error';
export type TakenTuple = [event_id: string, attempts: number, delivery: string | null, position: number, last_error: string | null];

/** What the claims know of a group: its row, how far its rows are written, when leases were last looked at. */
export interface KnownGroup {
  row: GroupRow;
  /** Every event of the group's filter up to this position has its row (the watermark). */
  materialized: number;
  /** When the watermark was last written to the group's row. */
  persistedAt: number;
  /** The watermark the group's row holds, as last read or written. */
  stored: number;
  /** When a claim last looked for leases that ran out. */
  expiredAt: number;
}

export class GroupRows {
  readonly #sql: LedgerSql;
  /** pidsRead's answers, until the groups change (forgetPids): every lease at append asked. */
  readonly #pids = new Map<string, boolean>();

  constructor(sql: LedgerSql) {
    this.#sql = sql;
  }

  /** How far the group's rows are to be written: `upTo` (a position routed here, committed), else the head. */
  head(from: number, upTo: number | undefined): number {
    return upTo !== undefined && upTo > from ? upTo : (this.#sql.get<{ seq: number }>(`SELECT seq FROM sqlite_sequence WHERE name = 'event'`)?.seq ?? 0);
  }

  /** The watermark `to` into the group's row (the claims write it at most once per PERSIST_MS: a restart writes the rows after it again, ignored). */
  persist(key: GroupKey, to: number): void {
    this.#sql.run(`UPDATE eventflow_group SET materialized = @to WHERE domain = @domain AND name = @name AND grp = @group AND COALESCE(materialized, 0) < @to`, { ...key, to });
  }

  /**
   * An ordered group's claim: writes the group's rows for the events published after its watermark,
   * up to `upTo` or the head, at most MATERIALIZE_PAGE events of the domain at a time (its first
   * unsettled row of each pid is read from them). Returns the new watermark (the caller keeps it once
   * the transaction commits).
   */
  materialize(known: KnownGroup, key: GroupKey, updated: string, upTo: number | undefined): number {
    const from = known.materialized;
    const head = this.head(from, upTo);
    if (head <= from) return from;
    const params = { domain: key.domain, name: key.name, from, ...ledgerColumns(key), updated, withPid: this.pidsRead(key) ? 1 : 0 };
    // A long way behind (a backlog, a group without members for a while): a bounded step.
    const far = head - from > MATERIALIZE_PAGE ? this.#sql.get<{ position: number }>(`SELECT e.position FROM event e WHERE e.domain = @domain AND e.position > @from ORDER BY e.position LIMIT 1 OFFSET ${MATERIALIZE_PAGE - 1}`, params) : undefined;
    const to = far?.position ?? head;
    this.#sql.run(
      `INSERT OR IGNORE INTO eventflow_delivery (event_id, domain, gname, grp, position, pid, name, attempts, updated)
       SELECT e.id, e.domain, @gname, @grp, e.position, CASE WHEN @withPid = 1 THEN e.pid END, e.name, 0, @updated ${eventScope(key)} AND e.position > @from AND e.position <= @to`,
      { ...params, to },
    );
    return to;
  }

  /**
   * An unordered group's claim, once the rows it has are taken: the next `wanted` events after the
   * watermark get their rows leased as they are written, one INSERT where writing them free ahead of
   * time and leasing them after cost two (the second moving every index entry the first wrote), and
   * where a backlog's claim wrote 10,000 rows ahead in one transaction (22–35 ms of the event loop,
   * once every 10,000 events of a drain). The group's own rows are at or before its watermark
   * (append-claims.ts writes a batch's rows whole and moves it past them), so the free rows the
   * caller took first come before these in position order. Rows after it that exist already (another
   * default group's of the same ledger; this gateway's before a restart, the watermark in the store
   * lagging by up to PERSIST_MS) are left out, so that the watermark moves to the last event given a
   * row, or to the head once short.
   */
  leaseNew(known: KnownGroup, key: GroupKey, params: Record<string, unknown>, wanted: number, upTo: number | undefined): { taken: Taken[]; watermark: number } {
    let from = known.materialized;
    const to = this.head(from, upTo);
    const taken: Taken[] = [];
    if (to <= from || wanted <= 0) return { taken, watermark: from };
    const scope = { ...params, name: key.name, withPid: this.pidsRead(key) ? 1 : 0, to };
    // The default group's event under a v4 spoke's claim gets its row free, as the claims' filter
    // (CLAIMABLE_V4) would leave it.
    const leased = key.group === DEFAULT_GROUP ? 'p.consumed_spoke IS NULL' : '1';
    // In literal page sizes (as the caller's): the largest power of two left, until the events up to
    // `to` all have rows, or `wanted` are leased, or MATERIALIZE_PAGE rows are written (a long run
    // of events under v4 spokes' claims: the next claim goes on from there).
    for (let written = 0; taken.length < wanted && written < MATERIALIZE_PAGE; ) {
      const size = Math.min(PAGE_SIZES, 2 ** Math.floor(Math.log2(wanted - taken.length)));
      const rows = this.#sql.tuples<TakenTuple>(
        `INSERT INTO eventflow_delivery (event_id, domain, gname, grp, position, pid, name, attempts, updated, delivery, owner, deadline, claimed_at)
         SELECT e.id, e.domain, @gname, @grp, e.position, CASE WHEN @withPid = 1 THEN e.pid END, e.name, CASE WHEN ${leased} THEN 1 ELSE 0 END, @updated,
           CASE WHEN ${leased} THEN @prefix || lower(hex(randomblob(16))) END, CASE WHEN ${leased} THEN @owner END, CASE WHEN ${leased} THEN @deadline END, CASE WHEN ${leased} THEN @now END
         ${eventScope(key)} AND e.position > @from AND e.position <= @to
           AND NOT EXISTS (SELECT 1 FROM eventflow_delivery w WHERE w.event_id = e.id AND w.gname = @gname AND w.grp = @grp)
         ORDER BY e.position LIMIT ${size}
         RETURNING ${TAKEN}`,
        { ...scope, from },
      );
      for (const [event_id, attempts, delivery, position, last_error] of rows) if (delivery !== null) taken.push({ event_id, attempts, delivery, position, last_error });
      written += rows.length;
      if (rows.length < size) {
        from = to;
        break;
      }
      for (const row of rows) if (row[3] > from) from = row[3];
    }
    return { taken, watermark: from };
  }

  /**
   * Whether an ordered group reads the rows of the key's ledger: the group itself, or, on the default
   * groups' shared ledger, any default group of the domain. Kept until forgetPids: one gateway writes
   * the file (the store's lock), and every change of a group goes through its ledger, which calls it.
   */
  pidsRead(key: GroupKey): boolean {
    const shared = key.group === DEFAULT_GROUP;
    const id = shared ? `${key.domain}\u0000` : `${key.domain}\u0000${key.name}\u0000${key.group}`;
    let read = this.#pids.get(id);
    if (read === undefined) {
      const sql = shared
        ? `SELECT 1 AS one FROM eventflow_group WHERE domain = @domain AND grp = '' AND ordered = 1 LIMIT 1`
        : `SELECT 1 AS one FROM eventflow_group WHERE domain = @domain AND name = @name AND grp = @group AND ordered = 1`;
      read = this.#sql.get(sql, key) !== undefined;
      // Bounded as the groups of a store are (EVENTFLOW_MAX_GROUPS_PER_DOMAIN a domain); cleared whole when full.
      if (this.#pids.size >= 10_000) this.#pids.clear();
      this.#pids.set(id, read);
    }
    return read;
  }

  /** A group was recorded, changed or deleted: pidsRead reads again. */
  forgetPids(): void {
    this.#pids.clear();
  }
}
