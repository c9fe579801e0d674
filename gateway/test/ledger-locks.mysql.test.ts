/**
 * The work half on MariaDB while another client's transaction holds locks on the ledger (an
 * operator's console in manual-commit mode, a script that inspects the pending jobs before it edits
 * them): `SELECT … FROM eventflow_delivery … FOR UPDATE` at the server's default REPEATABLE READ,
 * whose scan locks every row and gap of the table.
 * - Publishes go on, on this gateway (every domain) and on another gateway of the database: an
 *   append that leases its events to a waiting group wrote their ledger rows under the sequence
 *   lock and waited there for the lock (innodb_lock_wait_timeout, 50 s by default), every
 *   gateway's appends queued behind it, and the clients' publishes ended in E_EVENTFLOW_REQUEST_TIMEOUT.
 * - Once the lock is gone, every job reaches one outcome, on its first attempt, and the metrics
 *   count what the store holds.
 * - The same lock on the group's row (eventflow_group) holds no job: a claim wrote the group's
 *   watermark there in its transaction, and waited with every row it had written and locked, so the
 *   group's work stopped on every gateway until the lock was gone.
 * Both ways an append writes its rows: the append routine's CALL, and one statement per table (a
 * database user without EXECUTE, append-routine.ts).
 */
import { randomBytes } from 'node:crypto';
import { createConnection } from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { createClient, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { metric } from '@eventflow/test-support/gateway-http';
import { mysqlGatewayEnv, mysqlUnavailable, server, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';

describe.skipIf(mysqlUnavailable !== undefined).each(['routine', 'statements'])("another client's locks on the ledger (MariaDB, appends by %s)", (appends) => {
  const databases = useTestDatabases();
  let login: { user: string; password: string } | undefined;

  /** For the statements: a user of the database without EXECUTE, so the gateway appends without the routine. */
  async function user(db: TestDatabase): Promise<{ user: string; password: string }> {
    if (appends === 'routine') return { user: db.options.user, password: db.options.password };
    const made = { user: `ef_locks_${randomBytes(4).toString('hex')}`, password: randomBytes(8).toString('hex') };
    await db.query(`CREATE USER '${made.user}'@'%' IDENTIFIED BY '${made.password}'`);
    databases.onCleanup(() => db.query(`DROP USER IF EXISTS '${made.user}'@'%'`));
    await db.query(`GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP, REFERENCES ON \`${db.name}\`.* TO '${made.user}'@'%'`);
    return made;
  }

  async function gatewayOn(db: TestDatabase): Promise<{ gateway: Gateway; client: EventflowClient }> {
    login ??= await user(db);
    const gateway = await startGateway({ ...mysqlGatewayEnv({ ...db.options, ...login }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
    databases.onCleanup(() => gateway.close());
    const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
    databases.onCleanup(() => client.close());
    return { gateway, client };
  }

  it("a REPEATABLE READ `FOR UPDATE` over the group's pending rows: publishes of every domain and gateway go on, and the group's jobs run once the lock is gone", async () => {
    const db = await databases.fresh();
    login = undefined;
    const { gateway, client } = await gatewayOn(db);
    const other = await gatewayOn(db);
    const runs = new Map<string, number[]>();
    await client.consume(
      'jobs',
      'run',
      (event, { attempt }) => void runs.set(event.pid, [...(runs.get(event.pid) ?? []), attempt]),
      { group: 'workers', concurrency: 4 },
    );
    const settled = async (): Promise<number> => Number((await db.query<{ n: number }>(`SELECT COUNT(*) AS n FROM eventflow_delivery WHERE grp = 'workers' AND outcome IS NOT NULL`))[0]?.n);
    for (const pid of ['w1', 'w2']) await client.publish({ domain: 'jobs', name: 'run', pid });
    await eventually(async () => (await settled()) === 2, 5_000, 'the warm-up jobs settled');

    // The members wait for work: the next job is leased in its append's transaction (append-leases.ts).
    const locker = await createConnection({ ...server, database: db.name });
    databases.onCleanup(() => locker.end());
    await locker.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    await locker.query('BEGIN');
    await locker.query(`SELECT event_id FROM eventflow_delivery WHERE grp = 'workers' AND outcome IS NULL FOR UPDATE`);
    try {
      // Within the clients' patience (well under the server's 50 s lock wait): answered, not timed out.
      const timeout = 6_000;
      const published = await Promise.allSettled([
        client.publish({ domain: 'jobs', name: 'run', pid: 'locked-1' }, { timeout }),
        client.publish({ domain: 'audit', name: 'noted', pid: 'a1' }, { timeout }),
        other.client.publish({ domain: 'audit', name: 'noted', pid: 'a2' }, { timeout }),
        client.publish({ domain: 'jobs', name: 'run', pid: 'locked-2' }, { timeout }),
      ]);
      expect(published.map((result) => (result.status === 'fulfilled' ? 'stored' : String((result.reason as { code?: string }).code)))).toEqual(['stored', 'stored', 'stored', 'stored']);
    } finally {
      await locker.query('ROLLBACK');
    }
    await eventually(async () => (await settled()) === 4, 15_000, 'the jobs published under the lock settled');
    expect(Object.fromEntries(runs)).toEqual({ w1: [1], w2: [1], 'locked-1': [1], 'locked-2': [1] });
    expect(await db.query(`SELECT outcome, attempts FROM eventflow_delivery WHERE grp = 'workers' AND (outcome <> 'success' OR attempts <> 1)`)).toEqual([]);
    await eventually(async () => (await metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}')) === 4, 5_000, 'the metrics equal to the store');
    expect(Number((await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM event'))[0]?.n)).toBe(6);
    const routines = await db.query(`SELECT 1 FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME LIKE 'eventflow_append%'`, [db.name]);
    expect(routines.length > 0).toBe(appends === 'routine');
  }, 60_000);
  it("a REPEATABLE READ `FOR UPDATE` of the group's row: its jobs go on meanwhile, on their first attempt", async () => {
    const db = await databases.fresh();
    login = undefined;
    const { gateway, client } = await gatewayOn(db);
    // Published through another gateway: the rows of the group are written by the claims here.
    const publisher = await gatewayOn(db);
    const runs = new Map<string, number[]>();
    await client.consume(
      'jobs',
      'run',
      (event, { attempt }) => void runs.set(event.pid, [...(runs.get(event.pid) ?? []), attempt]),
      { group: 'workers', concurrency: 2 },
    );
    const settled = async (): Promise<number> => Number((await db.query<{ n: number }>(`SELECT COUNT(*) AS n FROM eventflow_delivery WHERE grp = 'workers' AND outcome IS NOT NULL`))[0]?.n);
    await publisher.client.publish({ domain: 'jobs', name: 'run', pid: 'warm-up' });
    await eventually(async () => (await settled()) === 1, 5_000, 'the warm-up job settled');
    const locker = await createConnection({ ...server, database: db.name });
    databases.onCleanup(() => locker.end());
    await locker.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    await locker.query('BEGIN');
    await locker.query(`SELECT * FROM eventflow_group WHERE grp = 'workers' FOR UPDATE`);
    try {
      // Over two seconds: the claims write the group's rows as the events come, and record how far (once a second).
      const pids = Array.from({ length: 30 }, (_, i) => `locked-${i}`);
      for (const pid of pids) {
        await publisher.client.publish({ domain: 'jobs', name: 'run', pid });
        await sleep(70);
      }
      await eventually(async () => (await settled()) === 31, 15_000, 'the jobs settled while the lock is held');
    } finally {
      await locker.query('ROLLBACK');
    }
    expect([...runs.values()].every((attempts) => attempts.length === 1 && attempts[0] === 1)).toBe(true);
    expect(runs.size).toBe(31);
    await eventually(async () => (await metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}')) === 31, 5_000, 'the metrics equal to the store');
    // Once the lock is gone, a claim records how far the group's rows are written (a claim a second later than the last).
    const watermark = async (): Promise<number> => Number((await db.query<{ m: number | null }>(`SELECT materialized AS m FROM eventflow_group WHERE grp = 'workers'`))[0]?.m ?? 0);
    await eventually(async () => {
      await publisher.client.publish({ domain: 'jobs', name: 'run', pid: `after-${Date.now()}` });
      return (await watermark()) > 31;
    }, 10_000, 'the watermark recorded', { every: 300 });
  }, 60_000);
});
