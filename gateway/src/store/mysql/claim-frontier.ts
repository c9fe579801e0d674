/**
 * How far a group's claims on this gateway have written rows and found free ones (MariaDB/MySQL):
 * what lets a claim of a long backlog touch about a page of rows, not the whole backlog.
 *
 * - Rows are written a little ahead of the claims (`materialize`): a page's worth many times over,
 *   growing only while the rows written fall short of the page (a sparse domain among busy ones). A
 *   row costs MariaDB ~35 µs to write (its eight indexes): a claim that wrote a 20,000-job backlog's
 *   rows at once stalled ~1 s before its first delivery, and every member's first claim with it.
 * - One claim of the group at a time writes them (`startWriting`): the others meanwhile claim from
 *   the rows there are, rather than write the same rows and wait on the first's locks.
 * - Free rows are looked for from where this gateway's last full page of them ended (`freeAfter`).
 *   A claim moves a row out of the index range of free rows (`deadline IS NULL`), and InnoDB leaves
 *   the entry delete-marked until its purge, which lags on a busy server: each claim of a drain read
 *   back through every row claimed before it, ~40 pages a row it took (slow log, 10,000-job drain).
 *   Rows freed again behind that point are found by a scan from the group's start, which a claim makes
 *   after this gateway freed rows (`rescan`: a release, a requeue), whenever the previous claim came
 *   up short, and at least every FREE_RESCAN_MS (rows another gateway freed, a retry come due, a
 *   claim rolled back, another gateway's rows committed late).
 */
import type { PoolConnection } from 'mysql2/promise';
import type { GroupKey } from '../ledger.js';
import { materializeRows } from './ledger-rows.js';

/** A claim's first step of rows spans this many positions per event of its page, at least MATERIALIZE_FIRST. */
const MATERIALIZE_PER_EVENT = 16;
const MATERIALIZE_FIRST = 512;
/** A step's span at most, as it grows (×4). */
const MATERIALIZE_SPAN = 20_000;
/** Positions a claim writes rows for at most, in all (bounded transactions): a group far behind catches up over several claims. */
const MATERIALIZE_REACH = 100_000;
/** A scan for free rows from the group's start at least this often, while its claims take full pages. */
export const FREE_RESCAN_MS = 1_000;

/**
 * In the claim's transaction: the group's rows for the events positioned after `from` toward `to`,
 * as far as a page of `limit` needs (those without one: other gateways, and this one's appends, may
 * write the same rows; materializeRows). Resolves with how far they are written. Positions commit in
 * order (the sequence lock), so every position up to `to` (the head read, or a routed event's) is
 * visible: the rows up to that point are complete. The caller's cached watermark moves once its
 * transaction commits, the store's after that (persistWatermark); a later claim writes the same rows
 * again, ignored, should the gateway stop before.
 */
export async function materialize(conn: PoolConnection, key: GroupKey, from: number, to: number, limit: number): Promise<number> {
  const reach = Math.min(to, from + MATERIALIZE_REACH);
  let span = Math.max(MATERIALIZE_FIRST, limit * MATERIALIZE_PER_EVENT);
  // Rows another gateway wrote meanwhile are not counted: the claim then writes a little further, within its reach.
  for (let written = 0; from < reach && written < limit; span = Math.min(span * 4, MATERIALIZE_SPAN)) {
    const end = Math.min(reach, from + span);
    written += await materializeRows(conn, key, from, end);
    from = end;
  }
  return from;
}

interface FreeScan {
  /** The group's creation: a group deleted and recorded again starts over. */
  created: number;
  /** Free rows are looked for after this position. */
  after: number;
  /** When a scan last started from the group's start. */
  fullAt: number;
}

export class ClaimFrontier {
  readonly #writing = new Set<string>();
  readonly #free = new Map<string, FreeScan>();

  /** Whether this claim may write the group's rows: not while another claim of this gateway does. */
  startWriting(id: string): boolean {
    if (this.#writing.has(id)) return false;
    this.#writing.add(id);
    return true;
  }

  /** Once its transaction ended and the watermark moved: a claim let in sooner would write the same rows again. */
  doneWriting(id: string): void {
    this.#writing.delete(id);
  }

  /** Where the claim's scan for free rows starts (a position of the group's, exclusive). */
  freeAfter(id: string, created: number, now: number): number {
    const scan = this.#free.get(id);
    if (scan && scan.created === created && now - scan.fullAt < FREE_RESCAN_MS) return scan.after;
    this.#free.set(id, { created, after: created, fullAt: now });
    return created;
  }

  /**
   * After a claim's scan from `from` asked for `asked` rows and found `positions`: a full page moves
   * the next scan's start past them (unless a rescan began since); a short one sends the next scan
   * back to the group's start.
   */
  scanned(id: string, created: number, from: number, asked: number, positions: readonly number[]): void {
    const scan = this.#free.get(id);
    if (!scan || scan.created !== created) return;
    if (positions.length < asked) {
      scan.after = created;
      scan.fullAt = 0;
      return;
    }
    // Begun before the scans went back to the start (a rescan since: the frontier is behind where it looked from): it
    // leaves the frontier there. Moved past, it sent the next claims beyond the rows the rescan is taking back, and they
    // came back a page per FREE_RESCAN_MS while the group took full pages.
    if (from > scan.after) return;
    // Concurrent claims each move it: the furthest wins (a row skipped as locked behind it is found by a rescan).
    let after = Math.max(scan.after, from);
    for (const position of positions) after = Math.max(after, position);
    scan.after = after;
  }

  /**
   * Rows were freed behind the scans here (a release, a requeue, the gateway's hand-back): every group's
   * next claim looks from its start, so a job handed back is taken again at once, before later ones.
   */
  rescan(): void {
    this.#free.clear();
  }

  /** The group was deleted here: its state goes with it. */
  forget(id: string): void {
    this.#writing.delete(id);
    this.#free.delete(id);
  }
}
