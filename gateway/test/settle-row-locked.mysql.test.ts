/**
 * Settles written together while another client holds a lock on one of their ledger rows (an operator's
 * `SELECT … FOR UPDATE` of one job in a console left in a transaction). The batch's locking read waited for that one
 * row (innodb_lock_wait_timeout, 50 s by default) and then failed every settle of the batch; each report written
 * again met the same lock beside it. Now the read's wait is bounded (MariaDB) and the batch is written one by one
 * after such a failure: only the locked job waits, and it is recorded once the lock is gone.
 */
import { createConnection } from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { createClient } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, server, useTestDatabases } from '@eventflow/test-support/mysql';

describe.skipIf(mysqlUnavailable !== undefined)("a settle batch with one row under another client's lock (MariaDB)", () => {
  const databases = useTestDatabases();

  it('the other settles of the batch are recorded meanwhile, the locked one once the lock is gone; each job runs once', async () => {
    const db = await databases.fresh();
    const gateway = await startGateway({ ...mysqlGatewayEnv(db.options), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
    databases.onCleanup(() => gateway.close());
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close({ drainTimeout: 0 }));

    const JOBS = 4;
    const runs = new Map<string, number>();
    let started = 0;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    await client.consume(
      'jobs',
      'run',
      async (event) => {
        runs.set(event.pid, (runs.get(event.pid) ?? 0) + 1);
        started += 1;
        // Every handler returns in one turn: their settles are one batch.
        await finished;
      },
      { group: 'workers', concurrency: JOBS },
    );
    for (let i = 0; i < JOBS; i++) await client.publish({ domain: 'jobs', name: 'run', pid: `p${i}` });
    await eventually(() => started === JOBS, 10_000, 'every job running');

    const outcomes = async (): Promise<Map<string, string | null>> =>
      new Map((await db.query<{ pid: string; outcome: string | null }>(`SELECT pid, outcome FROM eventflow_delivery WHERE grp = 'workers'`)).map((row) => [row.pid, row.outcome]));
    const locker = await createConnection({ ...server, database: db.name });
    databases.onCleanup(() => locker.end());
    // By its primary key: the one row locked, whatever the isolation level.
    const [row] = await db.query<{ event_id: string; gname: string }>(`SELECT event_id, gname FROM eventflow_delivery WHERE grp = 'workers' AND pid = 'p0'`);
    await locker.query('BEGIN');
    const [locked] = await locker.query(`SELECT event_id FROM eventflow_delivery WHERE event_id = ? AND gname = ? AND grp = 'workers' FOR UPDATE`, [row?.event_id, row?.gname]);
    expect(locked).toHaveLength(1);
    const asked = Date.now();
    finish();
    // Well under the server's 50 s lock wait, which every settle of the batch waited for before.
    await eventually(async () => [...(await outcomes()).entries()].filter(([pid, outcome]) => pid !== 'p0' && outcome === 'success').length === JOBS - 1, 8_000, 'the unlocked jobs recorded');
    console.info(`the ${JOBS - 1} settles beside the locked row recorded ${Date.now() - asked} ms after their handlers returned`);
    expect((await outcomes()).get('p0')).toBeNull();

    await locker.query('ROLLBACK');
    await eventually(async () => (await outcomes()).get('p0') === 'success', 10_000, 'the locked job recorded once the lock is gone');
    expect([...runs.values()]).toEqual(Array.from({ length: JOBS }, () => 1));
  }, 40_000);
});
