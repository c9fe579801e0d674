/**
 * The settle routine (store/mysql/settle-routine.ts): small batches of plain settles in one CALL that
 * commits, on MariaDB. It writes what the statements write, row for row, in the ledger and in v4's
 * columns, and answers the same (a stale delivery, a second action of one delivery, a hand-back that
 * takes its attempt back); a routine dropped while the store runs costs no settle.
 */
import { describe, expect, it } from 'vitest';
import { mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';
import type { MysqlStore } from '../src/store/mysql/mysql.js';
import { SETTLE_ROUTINE } from '../src/store/mysql/settle-routine.js';
import type { GroupKey, LedgerAction } from '../src/store/ledger.js';
import { routines, storeOpener } from './mysql-stores.js';

const TABLES = {
  eventflow_delivery: `SELECT e.pid, d.grp, d.attempts, d.outcome, d.last_error, d.owner IS NULL AS unowned, d.delivery IS NULL AS free, d.deadline IS NULL AS undated, d.settled_at IS NULL AS unsettled
    FROM eventflow_delivery d JOIN event e ON e.id = d.event_id ORDER BY e.pid, d.grp`,
  event_published: `SELECT e.pid, p.success IS NULL AS no_success, p.failed IS NULL AS no_failure, p.consumed_spoke IS NULL AS unclaimed, p.consumer
    FROM event_published p JOIN event e ON e.id = p.event_id ORDER BY e.pid`,
};

describe.skipIf(mysqlUnavailable !== undefined)('the settle routine (MariaDB)', () => {
  const databases = useTestDatabases();
  const open = storeOpener(databases);

  /** Claims every event of `key` (one per pid) and returns its delivery id by pid. */
  async function claimAll(store: MysqlStore, key: GroupKey, pids: readonly string[]): Promise<Map<string, string>> {
    for (const pid of pids) await store.append({ id: `${key.group || 'v4'}-${pid}`, domain: key.domain, name: key.name, pid, data: {} }, { publisher: 'pub' });
    const group = await store.ledger().ensureGroup(key);
    const now = Date.now();
    const { claimed } = await store.ledger().claim({ group, owner: 'gw-1', consumer: 'GW', secret: 'secret', deadline: now + 60_000, now, limit: 100, maxAttempts: 5 });
    return new Map(claimed.map((one) => [one.event.pid, one.delivery]));
  }

  /** The same batches on `store`: what each answered, without what differs from run to run. */
  async function workload(store: MysqlStore): Promise<unknown[]> {
    const answers: unknown[] = [];
    const ledger = store.ledger();
    for (const group of ['', 'billing']) {
      // Created before the events: its backlog is them (the default group's key names the event).
      const key = { domain: 'jobs', name: 'run', group };
      await ledger.ensureGroup(key);
      const pids = ['a', 'b', 'c', 'd', 'e', 'f'].map((pid) => `${group || 'v4'}-${pid}`);
      const delivery = await claimAll(store, key, pids);
      const of = (pid: string): string => delivery.get(`${group || 'v4'}-${pid}`) as string;
      const batch: LedgerAction[] = [
        { kind: 'outcome', delivery: of('a'), outcome: 'success' },
        { kind: 'outcome', delivery: of('b'), outcome: 'failed' },
        { kind: 'release', delivery: of('c') },
        { kind: 'release', delivery: of('d'), uncount: true },
        // A second action of one delivery: only the first counts.
        { kind: 'outcome', delivery: of('a'), outcome: 'failed' },
        { kind: 'outcome', delivery: 'no-such-delivery', outcome: 'success' },
      ];
      answers.push(await ledger.apply(batch));
      // Settled already: answered as recorded (the same outcome) or not current (another).
      answers.push(await ledger.apply([{ kind: 'outcome', delivery: of('a'), outcome: 'success' }, { kind: 'outcome', delivery: of('b'), outcome: 'success' }]));
      // Not plain (an error, a dead letter): the statements, in both runs.
      answers.push(await ledger.apply([{ kind: 'outcome', delivery: of('e'), outcome: 'failed', error: 'it broke' }, { kind: 'dead', delivery: of('f'), error: 'gave up' }]));
    }
    return answers;
  }

  const rows = async (db: TestDatabase): Promise<Record<string, unknown[]>> =>
    Object.fromEntries(await Promise.all(Object.entries(TABLES).map(async ([table, sql]) => [table, await db.query(sql)] as const)));

  it('writes what the statements write, row for row, and answers the same', async () => {
    const [withRoutine, without] = [await databases.fresh(), await databases.fresh()];
    const routed = await open(withRoutine);
    const plain = await open(without, { appendRoutine: false });
    expect(await routines(withRoutine, 'eventflow_settle')).toEqual([SETTLE_ROUTINE]);
    expect(await routines(without, 'eventflow_settle')).toEqual([]);
    const [a, b] = [await workload(routed), await workload(plain)];
    expect(a).toEqual(b);
    expect(a[0]).toMatchObject([{ attempts: 1 }, { attempts: 1 }, { attempts: 1 }, { attempts: 0 }, undefined, undefined]);
    const [stored, statements] = [await rows(withRoutine), await rows(without)];
    expect(stored.eventflow_delivery).toHaveLength(12);
    expect(stored).toEqual(statements);
  });

  it('dropped while the store runs: no settle fails, and the routine is made again', async () => {
    const db = await databases.fresh();
    const store = await open(db);
    const key = { domain: 'jobs', name: 'run', group: 'billing' };
    await store.ledger().ensureGroup(key);
    const delivery = await claimAll(store, key, ['p1', 'p2', 'p3']);
    const settle = (pid: string) => store.ledger().apply([{ kind: 'outcome', delivery: delivery.get(pid) as string, outcome: 'success' }]);
    expect(await settle('p1')).toMatchObject([{ attempts: 1 }]);
    await db.query(`DROP PROCEDURE ${SETTLE_ROUTINE}`);
    expect(await settle('p2')).toMatchObject([{ attempts: 1 }]);
    await expect.poll(() => routines(db, 'eventflow_settle')).toEqual([SETTLE_ROUTINE]);
    expect(await settle('p3')).toMatchObject([{ attempts: 1 }]);
    expect((await db.query<{ outcome: string }>(`SELECT outcome FROM eventflow_delivery ORDER BY event_id`)).map((row) => row.outcome)).toEqual(['success', 'success', 'success']);
  });
});
