/** The MySQL/MariaDB delivery ledger (store/ledger.ts): consumer groups and leases on the gateway's own tables. */
import type { Pool, PoolConnection } from 'mysql2/promise';
import type { ClaimRequest, DeadLetterQuery, DeliveryLedger, EndedDelivery, GroupKey, GroupRecord, GroupSummary, LedgerDeadLetter, Unsettled } from '../ledger.js';
import { DEFAULT_GROUP, foreign, keyOf, ledgerColumns, UNSETTLED, type LedgerRow } from '../ledger.js';
import { driverCode, run, transaction } from './db.js';
import { FIRED, toStoredEvent, type EventRow } from './rows.js';
import { affected, select, type Params } from './statements.js';

const ASCII = 'ENGINE=InnoDB DEFAULT CHARACTER SET ascii DEFAULT COLLATE ascii_bin';

/** Not foreign keys on `event`: the ledger's reads join `event`, so rows of a deleted event are never seen. */
const TABLES = [
  `CREATE TABLE IF NOT EXISTS eventflow_group (
  domain VARCHAR(64) NOT NULL, name VARCHAR(64) NOT NULL, grp VARCHAR(64) NOT NULL,
  created_position BIGINT UNSIGNED NOT NULL, created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (domain, name, grp)
) ${ASCII}`,
  `CREATE TABLE IF NOT EXISTS eventflow_delivery (
  event_id VARCHAR(64) NOT NULL, domain VARCHAR(64) NOT NULL, gname VARCHAR(64) NOT NULL, grp VARCHAR(64) NOT NULL,
  delivery VARCHAR(96) NULL, owner VARCHAR(64) NULL, deadline BIGINT NULL, available_at BIGINT NULL,
  attempts INT UNSIGNED NOT NULL DEFAULT 0, outcome VARCHAR(16) NULL, last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  updated DATETIME(3) NOT NULL,
  PRIMARY KEY (event_id, gname, grp),
  INDEX idx_delivery_id (delivery),
  INDEX idx_delivery_owner (owner, outcome),
  INDEX idx_delivery_group (domain, gname, grp, outcome)
) ${ASCII}`,
];

type DeliveryRow = LedgerRow<number | string>;

type UnsettledRow = EventRow & { attempts: number | null; owner: string | null; deadline: string | number | null; available_at: string | number | null; foreign_claim: number; last_error: string | null };

const num = (value: string | number | null | undefined): number | undefined => (value === null || value === undefined ? undefined : Number(value));

/** The backlog scope of a group and its parameters (gname, grp, domain, [name], after). */
function scope(key: GroupKey, after: number): { sql: string; params: Params } {
  const { gname, grp } = ledgerColumns(key);
  const name = key.name === '*' ? '' : 'AND e.name = ?';
  const settled = key.group === DEFAULT_GROUP ? `AND ${UNSETTLED}` : '';
  return {
    sql: `FROM eventflow_position x JOIN event e ON e.id = x.event_id JOIN event_published p ON p.event_id = e.id
      LEFT JOIN eventflow_delivery d ON d.event_id = e.id AND d.gname = ? AND d.grp = ?
      WHERE e.domain = ? ${name} AND x.position > ? AND ${FIRED} AND d.outcome IS NULL ${settled}`,
    params: [gname, grp, key.domain, ...(key.name === '*' ? [] : [key.name]), after],
  };
}

export class MysqlLedger implements DeliveryLedger {
  readonly #pool: () => Pool;

  constructor(pool: () => Pool) {
    this.#pool = pool;
  }

  static async createTables(pool: Pool): Promise<void> {
    for (const ddl of TABLES) await pool.query(ddl);
  }

  #do<T>(what: string, work: (pool: Pool) => Promise<T>): Promise<T> {
    return run(this.#pool(), what, work);
  }

  #tx<T>(what: string, work: (conn: PoolConnection) => Promise<T>): Promise<T> {
    return this.#do(what, (pool) => transaction(pool, work));
  }

  async ensureGroup(key: GroupKey): Promise<GroupRecord> {
    return this.#do('record the consumer group', async (pool) => {
      await affected(
        pool,
        `INSERT IGNORE INTO eventflow_group (domain, name, grp, created_position, created_at)
         SELECT ?, ?, ?, value, UTC_TIMESTAMP(3) FROM eventflow_sequence WHERE name = 'event'`,
        [key.domain, key.name, key.group],
      );
      const [row] = await select<{ domain: string; name: string; grp: string; createdPosition: number; createdAt: Date }>(
        pool,
        `SELECT domain, name, grp, created_position AS createdPosition, created_at AS createdAt FROM eventflow_group WHERE domain = ? AND name = ? AND grp = ?`,
        [key.domain, key.name, key.group],
      );
      return toGroup(row ?? { domain: key.domain, name: key.name, grp: key.group, createdPosition: 0, createdAt: new Date() });
    });
  }

  async deleteGroup(key: GroupKey): Promise<boolean> {
    return this.#tx('delete the consumer group', async (conn) => {
      const deleted = (await affected(conn, `DELETE FROM eventflow_group WHERE domain = ? AND name = ? AND grp = ?`, [key.domain, key.name, key.group])) > 0;
      if (deleted && key.group !== DEFAULT_GROUP) await affected(conn, `DELETE FROM eventflow_delivery WHERE domain = ? AND gname = ? AND grp = ?`, [key.domain, key.name, key.group]);
      return deleted;
    });
  }

  async groups(at: number): Promise<GroupSummary[]> {
    return this.#do('read the consumer groups', async (pool) => {
      const rows = await select<{ domain: string; name: string; grp: string; createdPosition: number; createdAt: Date }>(
        pool,
        `SELECT domain, name, grp, created_position AS createdPosition, created_at AS createdAt FROM eventflow_group ORDER BY domain, name, grp`,
      );
      const summaries: GroupSummary[] = [];
      for (const row of rows) {
        const group = toGroup(row);
        const { sql, params } = scope(group, group.createdPosition);
        const [open] = await select<{ open: number; inFlight: string | null; foreign_claim: string | null; oldest: Date | null }>(
          pool,
          `SELECT COUNT(*) AS open, SUM(CASE WHEN d.deadline > ? THEN 1 ELSE 0 END) AS inFlight,
             SUM(${foreign(group)}) AS foreign_claim, MIN(e.timestamp) AS oldest ${sql}`,
          [at, ...params],
        );
        const { gname, grp } = ledgerColumns(group);
        const name = group.name === '*' ? '' : 'AND e.name = ?';
        const [counts] = await select<{ redelivered: string | null; dead: string | null }>(
          pool,
          `SELECT SUM(CASE WHEN d.attempts > 1 THEN 1 ELSE 0 END) AS redelivered, SUM(CASE WHEN d.outcome = 'dead' THEN 1 ELSE 0 END) AS dead
           FROM eventflow_delivery d JOIN event e ON e.id = d.event_id JOIN eventflow_position x ON x.event_id = e.id
           WHERE d.domain = ? AND d.gname = ? AND d.grp = ? AND x.position > ? ${name}`,
          [group.domain, gname, grp, group.createdPosition, ...(group.name === '*' ? [] : [group.name])],
        );
        const inFlight = Number(open?.inFlight ?? 0);
        summaries.push({
          ...group,
          pending: Math.max(0, Number(open?.open ?? 0) - inFlight - Number(open?.foreign_claim ?? 0)),
          inFlight,
          redelivered: Number(counts?.redelivered ?? 0),
          deadLetters: Number(counts?.dead ?? 0),
          oldestPendingAt: open?.oldest ? open.oldest.toISOString() : undefined,
        });
      }
      return summaries;
    });
  }

  async consumed(domain: string, name: string): Promise<boolean> {
    return this.#do('read the consumer groups', async (pool) => (await select(pool, `SELECT 1 AS one FROM eventflow_group WHERE domain = ? AND name IN (?, '*') LIMIT 1`, [domain, name])).length > 0);
  }

  async unsettled(group: GroupRecord, after: number, limit: number): Promise<Unsettled[]> {
    const { sql, params } = scope(group, Math.max(after, group.createdPosition));
    const rows = await this.#do('read the group backlog', (pool) =>
      select<UnsettledRow>(
        pool,
        `SELECT e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, e.data, x.position, d.attempts, d.owner, d.deadline, d.available_at, d.last_error,
           ${foreign(group)} AS foreign_claim
         ${sql} ORDER BY x.position LIMIT ?`,
        [...params, Math.max(0, Math.floor(limit))],
      ),
    );
    return rows.map(({ attempts, owner, deadline, available_at, foreign_claim, last_error, ...event }) => ({
      event: toStoredEvent(event),
      attempts: Number(attempts ?? 0),
      owner: owner ?? undefined,
      deadline: num(deadline),
      availableAt: num(available_at),
      foreign: Number(foreign_claim) === 1,
      lastError: last_error ?? undefined,
    }));
  }

  async claim({ key, event, owner, consumer, delivery, deadline, now }: ClaimRequest): Promise<number | undefined> {
    const { gname, grp } = ledgerColumns(key);
    // The row first, outside the transaction: a FOR UPDATE on a missing row would take a gap lock,
    // and two claims inserting into one gap deadlock each other.
    await this.#do('claim the event for a consumer group', (pool) =>
      affected(pool, `INSERT IGNORE INTO eventflow_delivery (event_id, domain, gname, grp, attempts, updated) VALUES (?, ?, ?, ?, 0, UTC_TIMESTAMP(3))`, [event.id, key.domain, gname, grp]),
    );
    try {
      return await this.#tx('claim the event for a consumer group', async (conn) => {
        const [row] = await select<DeliveryRow>(conn, `SELECT * FROM eventflow_delivery WHERE event_id = ? AND gname = ? AND grp = ? FOR UPDATE`, [event.id, gname, grp]);
        if (row && (row.outcome !== null || (num(row.deadline) ?? 0) > now || (num(row.available_at) ?? 0) > now)) return undefined;
        if (key.group === DEFAULT_GROUP) {
          // v4's guarded claim. A lease that expired unreleased (its gateway died) is a gateway's
          // claim, never a v4 spoke's (they claim only NULL): it is taken over.
          const expired = row && row.deadline !== null ? 1 : 0;
          const won = await affected(
            conn,
            `UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP(), consumer = ?
             WHERE event_id = ? AND success IS NULL AND failed IS NULL AND (consumed_spoke IS NULL OR ? = 1)`,
            [consumer, event.id, expired],
          );
          if (won !== 1) return undefined;
        }
        if (row) {
          await affected(
            conn,
            `UPDATE eventflow_delivery SET delivery = ?, owner = ?, deadline = ?, available_at = NULL, attempts = attempts + 1, updated = UTC_TIMESTAMP(3)
             WHERE event_id = ? AND gname = ? AND grp = ?`,
            [delivery, owner, deadline, event.id, gname, grp],
          );
          return Number(row.attempts) + 1;
        }
        await affected(
          conn,
          `INSERT INTO eventflow_delivery (event_id, domain, gname, grp, delivery, owner, deadline, attempts, updated) VALUES (?, ?, ?, ?, ?, ?, ?, 1, UTC_TIMESTAMP(3))`,
          [event.id, key.domain, gname, grp, delivery, owner, deadline],
        );
        return 1;
      });
    } catch (error) {
      // Another gateway inserted the row first: it won the claim.
      if (driverCode((error as { cause?: unknown }).cause) === 'ER_DUP_ENTRY') return undefined;
      throw error;
    }
  }

  async extend(delivery: string, deadline: number): Promise<boolean> {
    return this.#do('extend the lease', async (pool) => (await affected(pool, `UPDATE eventflow_delivery SET deadline = ? WHERE delivery = ? AND outcome IS NULL`, [deadline, delivery])) > 0);
  }

  async #current(conn: PoolConnection, delivery: string): Promise<DeliveryRow | undefined> {
    const [row] = await select<DeliveryRow>(
      conn,
      `SELECT d.*, e.name FROM eventflow_delivery d JOIN event e ON e.id = d.event_id WHERE d.delivery = ? AND d.outcome IS NULL FOR UPDATE`,
      [delivery],
    );
    return row;
  }

  async settle(delivery: string, outcome: 'success' | 'failed', error: string | undefined): Promise<EndedDelivery | undefined> {
    return this.#tx('record the outcome', async (conn) => {
      const row = await this.#current(conn, delivery);
      if (!row) return undefined;
      await affected(conn, `UPDATE eventflow_delivery SET outcome = ?, last_error = ?, deadline = NULL, updated = UTC_TIMESTAMP(3) WHERE delivery = ? AND outcome IS NULL`, [outcome, error ?? null, delivery]);
      const column = outcome === 'success' ? 'success' : 'failed';
      if (row.grp === DEFAULT_GROUP) await affected(conn, `UPDATE event_published SET ${column} = UTC_TIMESTAMP() WHERE event_id = ? AND success IS NULL AND failed IS NULL`, [row.event_id]);
      return ended(row);
    });
  }

  async release(delivery: string, options: { availableAt?: number | undefined; error?: string | undefined; uncount?: boolean }): Promise<EndedDelivery | undefined> {
    return this.#tx('release the lease', async (conn) => {
      const row = await this.#current(conn, delivery);
      if (!row) return undefined;
      const uncount = options.uncount ? 1 : 0;
      await affected(
        conn,
        `UPDATE eventflow_delivery SET deadline = NULL, available_at = ?, last_error = COALESCE(?, last_error), attempts = GREATEST(0, CAST(attempts AS SIGNED) - ?), updated = UTC_TIMESTAMP(3)
         WHERE delivery = ? AND outcome IS NULL`,
        [options.availableAt ?? null, options.error ?? null, uncount, delivery],
      );
      if (row.grp === DEFAULT_GROUP) await unclaim(conn, row.event_id);
      return ended({ ...row, attempts: Math.max(0, Number(row.attempts) - uncount) });
    });
  }

  async releaseOwner(owner: string): Promise<number> {
    return this.#tx('release the leases', async (conn) => {
      const rows = await select<{ event_id: string; grp: string }>(conn, `SELECT event_id, grp FROM eventflow_delivery WHERE owner = ? AND outcome IS NULL AND deadline IS NOT NULL FOR UPDATE`, [owner]);
      await affected(conn, `UPDATE eventflow_delivery SET deadline = NULL, attempts = GREATEST(0, CAST(attempts AS SIGNED) - 1) WHERE owner = ? AND outcome IS NULL AND deadline IS NOT NULL`, [owner]);
      for (const row of rows) if (row.grp === DEFAULT_GROUP) await unclaim(conn, row.event_id);
      return rows.length;
    });
  }

  async deadLetter(key: GroupKey, eventId: string, attempts: number, lastError: string): Promise<boolean> {
    const { gname, grp } = ledgerColumns(key);
    return this.#tx('record the dead letter', async (conn) => {
      if (key.group === DEFAULT_GROUP) {
        if ((await affected(conn, `UPDATE event_published SET failed = UTC_TIMESTAMP() WHERE event_id = ? AND ${UNSETTLED.replace(/p\./g, '')}`, [eventId])) !== 1) return false;
        const why = lastError.slice(0, 64);
        await affected(
          conn,
          `INSERT INTO eventflow_dead_letter (event_id, attempts, reason, at) VALUES (?, ?, ?, UTC_TIMESTAMP(3)) ON DUPLICATE KEY UPDATE attempts = ?, reason = ?, at = UTC_TIMESTAMP(3)`,
          [eventId, attempts, why, attempts, why],
        );
      }
      const [row] = await select<{ outcome: string | null }>(conn, `SELECT outcome FROM eventflow_delivery WHERE event_id = ? AND gname = ? AND grp = ? FOR UPDATE`, [eventId, gname, grp]);
      if (row && row.outcome !== null) return key.group === DEFAULT_GROUP;
      if (row) {
        await affected(conn, `UPDATE eventflow_delivery SET outcome = 'dead', attempts = ?, last_error = ?, deadline = NULL, updated = UTC_TIMESTAMP(3) WHERE event_id = ? AND gname = ? AND grp = ?`, [
          attempts,
          lastError,
          eventId,
          gname,
          grp,
        ]);
      } else {
        await affected(conn, `INSERT INTO eventflow_delivery (event_id, domain, gname, grp, attempts, outcome, last_error, updated) VALUES (?, ?, ?, ?, ?, 'dead', ?, UTC_TIMESTAMP(3))`, [
          eventId,
          key.domain,
          gname,
          grp,
          attempts,
          lastError,
        ]);
      }
      return true;
    });
  }

  async nextDue(at: number): Promise<number | undefined> {
    return this.#do('read the next lease deadline', async (pool) => {
      const [row] = await select<{ deadline: string | null; available: string | null }>(
        pool,
        `SELECT (SELECT MIN(deadline) FROM eventflow_delivery WHERE outcome IS NULL AND deadline > ?) AS deadline,
           (SELECT MIN(available_at) FROM eventflow_delivery WHERE outcome IS NULL AND deadline IS NULL AND available_at > ?) AS available`,
        [at, at],
      );
      const times = [num(row?.deadline), num(row?.available)].filter((time): time is number => time !== undefined);
      return times.length ? Math.min(...times) : undefined;
    });
  }

  async deadLetters({ domain, limit, offset }: DeadLetterQuery): Promise<LedgerDeadLetter[]> {
    const where = domain === undefined ? '' : 'AND d.domain = ?';
    const rows = await this.#do('read the dead letters', (pool) =>
      select<{ eventId: string; domain: string; name: string; pid: string; gname: string; grp: string; attempts: number; lastError: string | null; at: Date }>(
        pool,
        `SELECT d.event_id AS eventId, e.domain, e.name, e.pid, d.gname, d.grp, d.attempts, d.last_error AS lastError, d.updated AS at
         FROM eventflow_delivery d JOIN event e ON e.id = d.event_id WHERE d.outcome = 'dead' ${where}
         ORDER BY d.updated DESC, d.event_id DESC LIMIT ? OFFSET ?`,
        [...(domain === undefined ? [] : [domain]), limit, offset],
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
    return this.#tx('requeue the dead letter', async (conn) => {
      const changed = await affected(
        conn,
        `UPDATE eventflow_delivery SET outcome = NULL, attempts = 0, deadline = NULL, available_at = NULL, delivery = NULL, owner = NULL, updated = UTC_TIMESTAMP(3)
         WHERE event_id = ? AND gname = ? AND grp = ? AND outcome = 'dead'`,
        [eventId, gname, grp],
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
    return this.#tx('discard the dead letter', async (conn) => {
      const changed = await affected(conn, `UPDATE eventflow_delivery SET outcome = 'discarded', updated = UTC_TIMESTAMP(3) WHERE event_id = ? AND gname = ? AND grp = ? AND outcome = 'dead'`, [eventId, gname, grp]);
      if (changed > 0 && key.group === DEFAULT_GROUP) await affected(conn, `DELETE FROM eventflow_dead_letter WHERE event_id = ?`, [eventId]);
      return changed > 0;
    });
  }
}

/** The default group's v4 claim back to NULL (the lease being released is the claim). */
async function unclaim(conn: PoolConnection, eventId: string): Promise<void> {
  await affected(conn, `UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id = ? AND success IS NULL AND failed IS NULL`, [eventId]);
}

function toGroup(row: { domain: string; name: string; grp: string; createdPosition: number; createdAt: Date }): GroupRecord {
  return { domain: row.domain, name: row.name, group: row.grp, createdPosition: Number(row.createdPosition), createdAt: row.createdAt.toISOString() };
}

function ended(row: DeliveryRow): EndedDelivery {
  return { key: keyOf(row.domain, row.gname, row.grp, row.name), eventId: row.event_id, attempts: Number(row.attempts) };
}
