/**
 * What the SQLite ledger answers operators (store/ledger.ts): the groups with their counts, dead
 * letters listed, requeued and discarded (each only in the domain its key names).
 */
import type { DeadLetterQuery, GroupKey, GroupRecord, GroupSummary, LedgerDeadLetter } from '../ledger.js';
import { CLAIMABLE_V4, DEFAULT_GROUP, keyOf, ledgerColumns, OWNED_ROW } from '../ledger.js';
import { globPatterns } from '../catalog.js';
import { eventScope, toRecord, type GroupRow, type LedgerSql } from './ledger-sql.js';
import { now } from './statements.js';

export class SqliteLedgerOperator {
  readonly #sql: LedgerSql;

  constructor(sql: LedgerSql) {
    this.#sql = sql;
  }

  async countGroups(domain: string): Promise<number> {
    return this.#sql.get<{ n: number }>(`SELECT COUNT(*) AS n FROM eventflow_group WHERE domain = @domain`, { domain })?.n ?? 0;
  }

  /** `written`: how far a group's rows are written, where the claims know it better than its row (SqliteLedger's watermarks). */
  async groups(at: number, domains?: readonly string[], patterns?: readonly string[], written: (key: GroupKey) => number | undefined = () => undefined): Promise<GroupSummary[]> {
    const only = `${domains === undefined ? '' : 'AND domain IN (SELECT value FROM json_each(@domains))'} ${patterns === undefined ? '' : 'AND EXISTS (SELECT 1 FROM json_each(@patterns) g WHERE domain GLOB g.value)'}`;
    const params = { now: at, domains: JSON.stringify(domains ?? []), patterns: JSON.stringify(globPatterns(patterns ?? [])) };
    const rows = this.#sql.all<GroupRow>(`SELECT * FROM eventflow_group WHERE 1 = 1 ${only} ORDER BY domain, name, grp`, params);
    type Count = { domain: string; gname: string; grp: string; name: string | null; n: number; inFlight: number; oldest: number | null };
    // Per ledger and event name: the default groups of a domain share one ledger and take their own names of it.
    const tally = (sql: string) => this.#sql.all<Count>(sql, params);
    // A default group's row under a v4 spoke's claim is the spoke's work, not pending here (as the claims' CLAIMABLE_V4).
    const open = tally(
      `SELECT d.domain, d.gname, d.grp, d.name, SUM(CASE WHEN d.grp <> '' OR (${CLAIMABLE_V4}) THEN 1 ELSE 0 END) AS n, SUM(CASE WHEN d.deadline > @now THEN 1 ELSE 0 END) AS inFlight, MIN(d.position) AS oldest
       FROM eventflow_delivery d LEFT JOIN event_published p ON d.grp = '' AND p.event_id = d.event_id WHERE d.outcome IS NULL AND ${OWNED_ROW('d')} ${only.replaceAll(' domain ', ' d.domain ')} GROUP BY d.domain, d.gname, d.grp, d.name`,
    );
    const dead = tally(`SELECT domain, gname, grp, name, COUNT(*) AS n, 0 AS inFlight, NULL AS oldest FROM eventflow_delivery WHERE outcome = 'dead' AND ${OWNED_ROW('eventflow_delivery')} ${only} GROUP BY domain, gname, grp, name`);
    const redelivered = tally(`SELECT domain, gname, grp, name, COUNT(*) AS n, 0 AS inFlight, NULL AS oldest FROM eventflow_delivery WHERE attempts > 1 AND ${OWNED_ROW('eventflow_delivery')} ${only} GROUP BY domain, gname, grp, name`);
    const sum = (counts: Count[], record: GroupRecord) => {
      const { gname, grp } = ledgerColumns(record);
      const mine = counts.filter((c) => c.domain === record.domain && c.gname === gname && c.grp === grp && (record.group !== DEFAULT_GROUP || record.name === '*' || c.name === record.name));
      return {
        n: mine.reduce((total, c) => total + c.n, 0),
        inFlight: mine.reduce((total, c) => total + c.inFlight, 0),
        oldest: mine.reduce<number | undefined>((low, c) => (c.oldest === null ? low : Math.min(low ?? Infinity, c.oldest)), undefined),
      };
    };
    return rows.map((row) => {
      const record = toRecord(row);
      const unsettled = sum(open, record);
      // Events after the watermark have no row yet: pending all the same.
      // (The watermark in the row lags the claims' by up to PERSIST_MS: rows already written are not counted twice.)
      const later = this.#sql.get<{ n: number; first: number | null }>(
        `SELECT SUM(CASE WHEN ${record.group === DEFAULT_GROUP ? 'p.consumed_spoke IS NULL' : '1'} THEN 1 ELSE 0 END) AS n, MIN(e.position) AS first ${eventScope(record)} AND e.position > @after
           AND NOT EXISTS (SELECT 1 FROM eventflow_delivery r WHERE r.event_id = e.id AND r.gname = @gname AND r.grp = @grp)`,
        { domain: record.domain, name: record.name, after: Math.max(row.materialized ?? row.created_position, written(record) ?? 0), ...ledgerColumns(record) },
      );
      const oldest = unsettled.oldest ?? later?.first ?? undefined;
      const timestamp = oldest === undefined ? undefined : this.#sql.get<{ timestamp: string }>(`SELECT timestamp FROM event WHERE position = @oldest`, { oldest })?.timestamp;
      return {
        ...record,
        pending: unsettled.n - unsettled.inFlight + (later?.n ?? 0),
        inFlight: unsettled.inFlight,
        redelivered: sum(redelivered, record).n,
        deadLetters: sum(dead, record).n,
        oldestPendingAt: timestamp,
      };
    });
  }

  async deadLetters({ domain, domains, limit, offset }: DeadLetterQuery): Promise<LedgerDeadLetter[]> {
    const where = `${domain === undefined ? '' : 'AND d.domain = @domain'} ${domains === undefined ? '' : 'AND EXISTS (SELECT 1 FROM json_each(@patterns) g WHERE d.domain GLOB g.value)'}`;
    const rows = this.#sql.all<{ eventId: string; domain: string; name: string; pid: string; gname: string; grp: string; attempts: number; lastError: string | null; at: string }>(
      `SELECT d.event_id AS eventId, e.domain, e.name, e.pid, d.gname, d.grp, d.attempts, d.last_error AS lastError, d.updated AS at
       FROM eventflow_delivery d JOIN event e ON e.id = d.event_id WHERE d.outcome = 'dead' AND ${OWNED_ROW('d')} ${where}
       ORDER BY d.updated DESC, d.rowid DESC LIMIT @limit OFFSET @offset`,
      { domain: domain ?? null, patterns: JSON.stringify(globPatterns(domains ?? [])), limit, offset },
    );
    return rows.map(({ gname, grp, lastError, ...row }) => ({ ...row, consumes: keyOf(row.domain, gname, grp, row.name).name, group: grp, lastError: lastError ?? '' }));
  }

  async requeue(key: GroupKey, eventId: string): Promise<boolean> {
    const params = { id: eventId, domain: key.domain, ...ledgerColumns(key), updated: now() };
    return this.#sql.immediate(() => {
      const changed = this.#sql.run(
        `UPDATE eventflow_delivery SET outcome = NULL, attempts = 0, deadline = NULL, available_at = NULL, delivery = NULL, owner = NULL, updated = @updated
         WHERE event_id = @id AND gname = @gname AND grp = @grp AND domain = @domain AND outcome = 'dead' AND ${OWNED_ROW('eventflow_delivery')}`,
        params,
      );
      if (changed === 0) return false;
      if (key.group === DEFAULT_GROUP) {
        this.#sql.run(`UPDATE event_published SET failed = NULL, consumed_spoke = NULL, consumer = NULL WHERE event_id = @id`, params);
        this.#sql.run(`DELETE FROM eventflow_dead_letter WHERE event_id = @id`, params);
      }
      return true;
    });
  }

  async discard(key: GroupKey, eventId: string): Promise<boolean> {
    const params = { id: eventId, domain: key.domain, ...ledgerColumns(key), updated: now() };
    return this.#sql.immediate(() => {
      const changed = this.#sql.run(
        `UPDATE eventflow_delivery SET outcome = 'discarded', updated = @updated WHERE event_id = @id AND gname = @gname AND grp = @grp AND domain = @domain AND outcome = 'dead' AND ${OWNED_ROW('eventflow_delivery')}`,
        params,
      );
      if (changed > 0 && key.group === DEFAULT_GROUP) this.#sql.run(`DELETE FROM eventflow_dead_letter WHERE event_id = @id`, params);
      return changed > 0;
    });
  }}
