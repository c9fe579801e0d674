/**
 * What the MySQL ledger answers operators (store/ledger.ts): the groups with their counts, dead
 * letters listed, requeued and discarded (each only in the domain its key names), and written by
 * claims and settles (the functions at the end).
 */
import type { Pool, PoolConnection } from 'mysql2/promise';
import type { DeadLetterQuery, GroupKey, GroupRecord, GroupSummary, LedgerDeadLetter } from '../ledger.js';
import { CLAIMABLE_V4, cut, DEFAULT_GROUP, keyOf, ledgerColumns, OWNED_ROW, UNSETTLED } from '../ledger.js';
import { likePatterns } from '../catalog.js';
import { FIRED } from './rows.js';
import { affected, select } from './statements.js';
import { ID_TABLE, num, toRecord, type GroupRow } from './ledger-rows.js';

/** What the listing takes of the ledger's cached groups: how far this gateway's claims wrote each one's rows. */
export interface KnownWatermark {
  key: GroupKey;
  created: number;
  materialized: number;
}
/** The token patterns of a listing (likePatterns, one JSON parameter) as a table `t` of LIKE patterns `p`. */
const PATTERN_TABLE = `JSON_TABLE(?, '$[*]' COLUMNS (p VARCHAR(1024) CHARACTER SET ascii COLLATE ascii_bin PATH '$')) t`;

interface Runner {
  do<T>(what: string, work: (pool: Pool) => Promise<T>): Promise<T>;
  tx<T>(what: string, work: (conn: PoolConnection) => Promise<T>): Promise<T>;
}

export class MysqlLedgerOperator {
  readonly #run: Runner;

  constructor(run: Runner) {
    this.#run = run;
  }

  async countGroups(domain: string): Promise<number> {
    return this.#run.do('count the consumer groups', async (pool) => Number((await select<{ n: number }>(pool, `SELECT COUNT(*) AS n FROM eventflow_group WHERE domain = ?`, [domain]))[0]?.n ?? 0));
  }

  /**
   * `written`: the watermarks this gateway's claims committed, with the `created` position of the group
   * they are of; the one in a group's row is written at most once per GROUP_READ_MS.
   */
  async groups(at: number, domains?: readonly string[], patterns?: readonly string[], written: readonly KnownWatermark[] = []): Promise<GroupSummary[]> {
    return this.#run.do('read the consumer groups', async (pool) => {
      const only = `${domains === undefined ? '' : 'AND domain IN (?)'} ${patterns === undefined ? '' : `AND EXISTS (SELECT 1 FROM ${PATTERN_TABLE} WHERE domain LIKE t.p ESCAPE '!')`}`;
      const scope = [...(domains === undefined ? [] : [[...domains]]), ...(patterns === undefined ? [] : [JSON.stringify(likePatterns(patterns))])];
      const v4Pending = `CASE WHEN d.grp <> '' OR (${CLAIMABLE_V4}) THEN 1 ELSE 0 END`;
      // A default group's event under a v4 spoke's claim is the spoke's work, not pending here (v4Pending).
      const groupRows = await select<GroupRow>(pool, `SELECT g.* FROM eventflow_group g WHERE 1 = 1 ${only.replaceAll(' domain ', ' g.domain ')} ORDER BY g.domain, g.name, g.grp`, scope);
      // Events after a group's watermark may have no row yet: counted from the events, group by group, from the
      // higher of its row's watermark and this gateway's (of the same group: created at the same position). A
      // statement a group, its watermark a parameter: in one statement, as a subquery of the groups' rows, the
      // bound came from the outer row and MariaDB read every event of the domain at each listing (each
      // /metrics scrape), however far the watermark (40,000 rows examined a listing after a drain of 10,000).
      const head = groupRows.length === 0 ? 0 : Number((await select<{ head: number | string }>(pool, 'SELECT COALESCE(MAX(position), 0) AS head FROM eventflow_position'))[0]?.head ?? 0);
      const mine = new Map(written.map(({ key, created, materialized }) => [`${key.domain}\u0000${key.name}\u0000${key.group}\u0000${created}`, materialized]));
      const NO_ROW = 'NOT EXISTS (SELECT 1 FROM eventflow_delivery r WHERE r.event_id = e.id AND r.gname = ? AND r.grp = ?)';
      const rows: Array<GroupRow & { later: number; laterFirst: number | undefined }> = [];
      for (const row of groupRows) {
        const created = Number(row.created_position);
        const after = Math.max(Number(row.materialized ?? created), mine.get(`${row.domain}\u0000${row.name}\u0000${row.grp}\u0000${created}`) ?? 0);
        if (after >= head) {
          rows.push({ ...row, later: 0, laterFirst: undefined });
          continue;
        }
        const { gname, grp } = ledgerColumns(toRecord(row));
        const scoped = [after, row.domain, row.name, row.name];
        // A default group's event under a v4 spoke's claim is the spoke's work, not pending here (as v4Pending).
        const [counted] = await select<{ later: number | string; laterFirst: number | string | null }>(
          pool,
          `SELECT
             (SELECT COUNT(*) FROM eventflow_position x JOIN event e ON e.id = x.event_id JOIN event_published p ON p.event_id = e.id
               WHERE x.position > ? AND e.domain = ? AND (? = '*' OR e.name = ?) AND ${FIRED} AND (${grp === '' ? `${UNSETTLED} AND p.consumed_spoke IS NULL` : '1 = 1'}) AND ${NO_ROW}) AS later,
             (SELECT MIN(x.position) FROM eventflow_position x JOIN event e ON e.id = x.event_id
               WHERE x.position > ? AND e.domain = ? AND (? = '*' OR e.name = ?) AND ${FIRED} AND ${NO_ROW}) AS laterFirst`,
          [...scoped, gname, grp, ...scoped, gname, grp],
        );
        rows.push({ ...row, later: Number(counted?.later ?? 0), laterFirst: num(counted?.laterFirst ?? null) });
      }
      type Count = { domain: string; gname: string; grp: string; name: string | null; n: number | string; inFlight: number | string | null; oldest: number | string | null };
      const open = await select<Count>(
        pool,
        `SELECT d.domain, d.gname, d.grp, d.name, SUM(${v4Pending}) AS n, SUM(CASE WHEN d.deadline > ? THEN 1 ELSE 0 END) AS inFlight, MIN(d.position) AS oldest
         FROM eventflow_delivery d LEFT JOIN event_published p ON d.grp = '' AND p.event_id = d.event_id
         WHERE d.outcome IS NULL AND ${OWNED_ROW('d')} ${only.replaceAll(' domain ', ' d.domain ')} GROUP BY d.domain, d.gname, d.grp, d.name`,
        [at, ...scope],
      );
      const dead = await select<Count>(pool, `SELECT domain, gname, grp, name, COUNT(*) AS n, 0 AS inFlight, NULL AS oldest FROM eventflow_delivery WHERE outcome = 'dead' AND ${OWNED_ROW('eventflow_delivery')} ${only} GROUP BY domain, gname, grp, name`, scope);
      const again = await select<Count>(pool, `SELECT domain, gname, grp, name, COUNT(*) AS n, 0 AS inFlight, NULL AS oldest FROM eventflow_delivery WHERE attempts > 1 AND ${OWNED_ROW('eventflow_delivery')} ${only} GROUP BY domain, gname, grp, name`, scope);
      const sum = (counts: Count[], record: GroupRecord) => {
        const { gname, grp } = ledgerColumns(record);
        const mine = counts.filter((c) => c.domain === record.domain && c.gname === gname && c.grp === grp && (record.group !== DEFAULT_GROUP || record.name === '*' || c.name === record.name));
        return {
          n: mine.reduce((total, c) => total + Number(c.n), 0),
          inFlight: mine.reduce((total, c) => total + Number(c.inFlight ?? 0), 0),
          oldest: mine.reduce<number | undefined>((low, c) => (c.oldest === null ? low : Math.min(low ?? Infinity, Number(c.oldest))), undefined),
        };
      };
      const records = rows.map((row) => ({ row, record: toRecord(row), unsettled: sum(open, toRecord(row)) }));
      const oldestPositions = records.map(({ row, unsettled }) => unsettled.oldest ?? num(row.laterFirst)).filter((p): p is number => p !== undefined);
      const stamps = new Map(
        (oldestPositions.length === 0
          ? []
          : await select<{ position: number | string; timestamp: Date }>(pool, `SELECT x.position, e.timestamp FROM eventflow_position x JOIN event e ON e.id = x.event_id WHERE x.position IN (?)`, [[...new Set(oldestPositions)]])
        ).map((stamp) => [Number(stamp.position), stamp.timestamp.toISOString()]),
      );
      return records.map(({ row, record, unsettled }) => ({
        ...record,
        pending: Math.max(0, unsettled.n - unsettled.inFlight) + Number(row.later),
        inFlight: unsettled.inFlight,
        redelivered: sum(again, record).n,
        deadLetters: sum(dead, record).n,
        oldestPendingAt: stamps.get(unsettled.oldest ?? num(row.laterFirst) ?? -1),
      }));
    });
  }

  async deadLetters({ domain, domains, limit, offset }: DeadLetterQuery): Promise<LedgerDeadLetter[]> {
    const where = `${domain === undefined ? '' : 'AND d.domain = ?'} ${domains === undefined ? '' : `AND EXISTS (SELECT 1 FROM ${PATTERN_TABLE} WHERE e.domain LIKE t.p ESCAPE '!')`}`;
    const rows = await this.#run.do('read the dead letters', (pool) =>
      select<{ eventId: string; domain: string; name: string; pid: string; gname: string; grp: string; attempts: number; lastError: string | null; at: Date }>(
        pool,
        `SELECT d.event_id AS eventId, e.domain, e.name, e.pid, d.gname, d.grp, d.attempts, d.last_error AS lastError, d.updated AS at
         FROM eventflow_delivery d JOIN event e ON e.id = d.event_id WHERE d.outcome = 'dead' AND ${OWNED_ROW('d')} ${where}
         ORDER BY d.updated DESC, d.event_id DESC LIMIT ? OFFSET ?`,
        [...(domain === undefined ? [] : [domain]), ...(domains === undefined ? [] : [JSON.stringify(likePatterns(domains))]), limit, offset],
      ),
    );
    return rows.map(({ gname, grp, lastError, at, ...row }) => ({
      ...row,
      attempts: Number(row.attempts),
      consumes: keyOf(row.domain, gname, grp, row.name).name,
      group: grp,
      lastError: lastError ?? '',
      at: at.toISOString(),
    }));
  }

  async requeue(key: GroupKey, eventId: string): Promise<boolean> {
    const { gname, grp } = ledgerColumns(key);
    return this.#run.tx('requeue the dead letter', async (conn) => {
      const changed = await affected(
        conn,
        `UPDATE eventflow_delivery SET outcome = NULL, attempts = 0, deadline = NULL, available_at = NULL, delivery = NULL, owner = NULL, updated = UTC_TIMESTAMP(3)
         WHERE event_id = ? AND gname = ? AND grp = ? AND domain = ? AND outcome = 'dead' AND ${OWNED_ROW('eventflow_delivery')}`,
        [eventId, gname, grp, key.domain],
      );
      if (changed === 0) return false;
      if (key.group === DEFAULT_GROUP) {
        await affected(conn, `UPDATE event_published SET failed = NULL, consumed_spoke = NULL, consumer = NULL WHERE event_id = ?`, [eventId]);
        await affected(conn, `DELETE FROM eventflow_dead_letter WHERE event_id = ?`, [eventId]);
      }
      return true;
    });
  }

  async discard(key: GroupKey, eventId: string): Promise<boolean> {
    const { gname, grp } = ledgerColumns(key);
    return this.#run.tx('discard the dead letter', async (conn) => {
      const changed = await affected(
        conn,
        `UPDATE eventflow_delivery SET outcome = 'discarded', updated = UTC_TIMESTAMP(3) WHERE event_id = ? AND gname = ? AND grp = ? AND domain = ? AND outcome = 'dead' AND ${OWNED_ROW('eventflow_delivery')}`,
        [eventId, gname, grp, key.domain],
      );
      if (changed > 0 && key.group === DEFAULT_GROUP) await affected(conn, `DELETE FROM eventflow_dead_letter WHERE event_id = ?`, [eventId]);
      return changed > 0;
    });
  }}

/** Rows out of attempts, dead in the claim's transaction: failed for the group, a dead letter with the last error. */
export async function deadLetters(conn: PoolConnection, gname: string, grp: string, letters: ReadonlyArray<{ id: string; error: string; attempts: number }>): Promise<void> {
  const list = JSON.stringify(letters.map((letter) => letter.id));
  await affected(
    conn,
    `UPDATE ${ID_TABLE} STRAIGHT_JOIN eventflow_delivery d FORCE INDEX (PRIMARY) ON d.event_id = j.id SET d.outcome = 'dead', d.last_error = COALESCE(d.last_error, 'lease expired'), d.deadline = NULL, d.delivery = NULL, d.updated = UTC_TIMESTAMP(3), d.settled_at = ?
     WHERE d.gname = ? AND d.grp = ?`,
    [list, Date.now(), gname, grp],
  );
  if (grp !== DEFAULT_GROUP) return;
  await affected(conn, `UPDATE ${ID_TABLE} STRAIGHT_JOIN event_published p FORCE INDEX (PRIMARY) ON p.event_id = j.id SET p.failed = UTC_TIMESTAMP() WHERE ${UNSETTLED}`, [list]);
  await insertDeadLetters(conn, letters);
}

/** The default group's dead-letter rows (v4-era listing, `EventStore.deadLetters`). */
export async function insertDeadLetters(conn: PoolConnection, letters: ReadonlyArray<{ id: string; error: string; attempts: number }>): Promise<void> {
  await affected(
    conn,
    `INSERT INTO eventflow_dead_letter (event_id, attempts, reason, at)
     SELECT j.i, j.n, j.r, UTC_TIMESTAMP(3) FROM JSON_TABLE(?, '$[*]' COLUMNS (i VARCHAR(64) PATH '$.i', n INT PATH '$.n', r VARCHAR(64) CHARACTER SET utf8mb4 PATH '$.r')) j
     ON DUPLICATE KEY UPDATE attempts = VALUES(attempts), reason = VALUES(reason), at = VALUES(at)`,
    [JSON.stringify(letters.map((letter) => ({ i: letter.id, n: letter.attempts, r: cut(letter.error, 64) })))],
  );
}
