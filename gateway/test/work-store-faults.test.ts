/**
 * The work half on a MariaDB that an operator reconfigures under it (a private mariadbd: these
 * change the server), the gateway connected as a user of its own database, as in production (a
 * root user would not see read_only):
 * - `SET GLOBAL read_only = 1` while a backlog drains and nothing is published: the claims and
 *   settles that fail make /readyz 503 (it said ready, since only failed publishes counted), and
 *   once writes work again it is 200, every event reaches its outcome, and the gateway's metrics
 *   equal what the store holds;
 * - a table of the ledger renamed away (an operator's mistake): what the user meets is a coded error
 *   that names the table and what to do, /readyz is 503 and says why, and once the table is back
 *   the drain goes on without a restart;
 * - a request() while the check that a group takes its event cannot read the store: the publish is
 *   answered as a write that stored nothing (retryable), so the client sends it again and the
 *   request() rides the moment out, as a publish does (it failed at once);
 * - a request()'s wait whose read of the head position loses its connection (KILL CONNECTION by
 *   another client): read again on another connection, not refused with the request() failed;
 * - a request() whose wait cannot be registered while a lock holds the head's read past the server's
 *   `max_statement_time`: the wait and its publish are refused as retryable and sent again, and the
 *   request() is answered once the lock is gone (it failed at once);
 * - a publish stopped by the server's `max_statement_time` (MariaDB's error 1969, which mysql2 names
 *   nothing) while an operator's lock holds it: a store state, answered retryable, stored once.
 */
import { createConnection, type Connection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { mysqlGatewayEnv } from '@eventflow/test-support/mysql';
import { eventually } from '@eventflow/test-support/wait';
import { metric, readyz } from '@eventflow/test-support/gateway-http';
import { startPrivateMariadb, unavailable, type PrivateMariadb } from './private-mariadb.js';

if (unavailable !== undefined) console.warn(`Skipping the work half's store faults: ${unavailable}`);

const USER = 'eventflow_gw';
const PASSWORD = 'gw-secret';

describe.skipIf(unavailable !== undefined)('the work half on a MariaDB reconfigured under it', () => {
  let server: PrivateMariadb;
  let admin: Connection;
  const closers: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    server = await startPrivateMariadb();
    admin = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password });
    for (const host of ['%', 'localhost']) await admin.query(`CREATE USER '${USER}'@'${host}' IDENTIFIED BY '${PASSWORD}'`);
  }, 120_000);

  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
    await admin?.query('SET GLOBAL read_only = 0').catch(() => undefined);
    await admin?.end();
    await server?.stop();
  }, 60_000);

  /** A database of its own for the gateway's user (every right on it, none on the server), and a gateway on it. */
  async function gatewayOn(database: string): Promise<{ gateway: Gateway; client: EventflowClient; count: (sql: string) => Promise<number> }> {
    await admin.query(`CREATE DATABASE ${database}`);
    for (const host of ['%', 'localhost']) await admin.query(`GRANT ALL ON ${database}.* TO '${USER}'@'${host}'`);
    const gateway = await startGateway({
      ...mysqlGatewayEnv({ host: server.host, port: server.port, user: USER, password: PASSWORD, database }),
      EVENTFLOW_PORT: 0,
      EVENTFLOW_LOG_LEVEL: 'silent',
      EVENTFLOW_CONSOLE_DIR: 'off',
      EVENTFLOW_CONSUME_LEASE_MS: 3_000,
    });
    closers.push(() => gateway.close());
    const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
    closers.push(() => client.close());
    const count = async (sql: string): Promise<number> => Number(((await admin.query(sql.replaceAll('$db', database)))[0] as Array<{ n: number }>)[0]?.n);
    return { gateway, client, count };
  }

  /** A per-user MAX_STATEMENT_TIME, as an operator sets it: the gateway's connections made from now on have it (taken off at the end). */
  async function limitStatements(seconds: number): Promise<void> {
    const set = async (value: number): Promise<void> => {
      for (const host of ['%', 'localhost']) await admin.query(`ALTER USER '${USER}'@'${host}' WITH MAX_STATEMENT_TIME ${value}`);
    };
    await set(seconds);
    closers.push(() => set(0));
  }

  const successes = (gateway: Gateway): Promise<number> => metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}');

  it('read_only while a backlog drains, nothing published: /readyz 503 while the settles and claims fail, then every event settled once, metrics = store', async () => {
    const { gateway, client, count } = await gatewayOn('read_only_drain');
    const EVENTS = 40;
    // The handlers finish only once the server is read-only: their settles meet it.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let running = 0;
    const handler = async (): Promise<void> => {
      running += 1;
      await gate;
    };
    await client.consume('ro', 'job', handler, { group: 'workers', concurrency: 4 });
    await client.consume('ro', 'job', handler, { concurrency: 4 });
    for (let i = 0; i < EVENTS; i++) await client.publish({ domain: 'ro', name: 'job', pid: `p${i % 8}` });
    await eventually(() => running === 8, 10_000, 'both groups to hold deliveries');
    expect((await readyz(gateway)).status).toBe(200);
    await admin.query('SET GLOBAL read_only = 1');
    open();
    const down = await eventually(async () => {
      const ready = await readyz(gateway);
      return ready.status === 503 && ready;
    }, 10_000, '/readyz to say the store cannot write');
    expect(down.store.reason).toContain('ER_OPTION_PREVENTS_STATEMENT');
    await admin.query('SET GLOBAL read_only = 0');
    await eventually(async () => (await readyz(gateway)).status === 200, 10_000, '/readyz to be ready again');
    await eventually(async () => (await count(`SELECT COUNT(*) AS n FROM $db.eventflow_delivery WHERE grp = 'workers' AND outcome = 'success'`)) === EVENTS, 30_000, "every event a success of 'workers'");
    await eventually(async () => (await count(`SELECT COUNT(*) AS n FROM $db.event_published WHERE success IS NOT NULL`)) === EVENTS, 30_000, 'every event a success of the default group');
    await eventually(async () => (await successes(gateway)) === 2 * EVENTS, 10_000, 'the metrics to count each recorded success once');
  }, 90_000);
  it('a ledger table renamed away: coded errors that name it and say what to do, /readyz 503 with the reason, and the drain goes on once it is back', async () => {
    const { gateway, client, count } = await gatewayOn('table_gone');
    const EVENTS = 20;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let running = 0;
    await client.consume(
      'tg',
      'job',
      async () => {
        running += 1;
        await gate;
      },
      { group: 'workers', concurrency: 2 },
    );
    for (let i = 0; i < EVENTS; i++) await client.publish({ domain: 'tg', name: 'job', pid: `p${i}` });
    await eventually(() => running === 2, 10_000, 'deliveries to be open');
    await admin.query('RENAME TABLE table_gone.eventflow_delivery TO table_gone.eventflow_delivery_old');
    open();
    const down = await eventually(async () => {
      const ready = await readyz(gateway);
      return ready.status === 503 && ready;
    }, 10_000, '/readyz to say the store cannot write');
    expect(down.store.reason).toContain('ER_NO_SUCH_TABLE');
    // What a user meets: the table named, and what to do about it.
    const refused = await client.consume('tg', 'job', () => undefined, { group: 'other' }).then(
      () => undefined,
      (error: unknown) => error as { code: string; message: string },
    );
    expect(refused?.code).toBe('E_EVENTFLOW_STORE_FAILED');
    expect(refused?.message).toMatch(/table "?eventflow_delivery"? is missing.*restore it or restart the gateway/);
    await admin.query('RENAME TABLE table_gone.eventflow_delivery_old TO table_gone.eventflow_delivery');
    await eventually(async () => (await readyz(gateway)).status === 200, 10_000, '/readyz to be ready again');
    await eventually(async () => (await count(`SELECT COUNT(*) AS n FROM $db.eventflow_delivery WHERE grp = 'workers' AND outcome = 'success'`)) === EVENTS, 30_000, 'every event a success');
    await eventually(async () => (await successes(gateway)) === EVENTS, 10_000, 'the metrics to count each recorded success once');
  }, 90_000);
  it("a request() while the store cannot tell whether a group takes its event: sent again, and answered once the store is back", async () => {
    const { gateway, client } = await gatewayOn('consumed_check');
    await client.consume('cc', 'job', async (event) => void (await client.publish({ domain: 'cc', name: 'success', pid: event.pid, rid: event.id })), { concurrency: 2 });
    // The groups' table away: the check reads it (and nothing had cached its answer), the append does not.
    await admin.query('RENAME TABLE consumed_check.eventflow_group TO consumed_check.eventflow_group_old');
    const storeFailures = (): Promise<number> => metric(gateway, 'eventflow_errors_total{code="E_EVENTFLOW_STORE_FAILED"}');
    const outcome = client.request({ domain: 'cc', name: 'job', pid: 'r1' }, { timeout: 20_000 });
    await eventually(async () => (await storeFailures()) >= 1, 10_000, 'the check to have failed');
    await admin.query('RENAME TABLE consumed_check.eventflow_group_old TO consumed_check.eventflow_group');
    expect((await outcome).name).toBe('success');
  }, 60_000);
  it("a request()'s wait whose head read has its connection killed: read again, and the request() answered", async () => {
    const { gateway, client } = await gatewayOn('head_killed');
    await client.consume('hk', 'job', async (event) => void (await client.publish({ domain: 'hk', name: 'success', pid: event.pid, rid: event.id })), { concurrency: 2 });
    expect((await client.request({ domain: 'hk', name: 'job', pid: 'warm-up' })).name).toBe('success');
    // Held by a table lock, so that the read is under way when its connection is killed.
    const locker = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password, database: 'head_killed' });
    closers.push(() => locker.end());
    await locker.query('LOCK TABLES eventflow_sequence WRITE');
    const outcome = client.request({ domain: 'hk', name: 'job', pid: 'r1' }, { timeout: 20_000 });
    const reading = await eventually(async () => {
      const [rows] = (await admin.query(`SELECT id FROM information_schema.PROCESSLIST WHERE user = ? AND info LIKE 'SELECT value FROM eventflow_sequence%'`, [USER])) as unknown as [Array<{ id: number }>];
      return rows[0]?.id;
    }, 10_000, "the wait's head read, held by the lock");
    await admin.query(`KILL CONNECTION ${reading}`);
    await locker.query('UNLOCK TABLES');
    expect((await outcome).name).toBe('success');
    expect((await readyz(gateway)).status).toBe(200);
  }, 60_000);
  it("a request() whose wait the store cannot register for a while (its head read stopped by max_statement_time): registered again with its publish, answered once the lock is gone", async () => {
    await limitStatements(0.3);
    const { gateway, client, count } = await gatewayOn('wait_refused');
    await client.consume('wr', 'job', async (event) => void (await client.publish({ domain: 'wr', name: 'success', pid: event.pid, rid: event.id })), { concurrency: 2 });
    expect((await client.request({ domain: 'wr', name: 'job', pid: 'warm-up' })).name).toBe('success');
    const locker = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password, database: 'wait_refused' });
    closers.push(() => locker.end());
    await locker.query('LOCK TABLES eventflow_sequence WRITE');
    const storeFailures = (): Promise<number> => metric(gateway, 'eventflow_errors_total{code="E_EVENTFLOW_STORE_FAILED"}');
    const before = await storeFailures();
    const outcome = client.request({ id: 'asked', domain: 'wr', name: 'job', pid: 'r1' }, { timeout: 20_000 });
    // Before: the wait's refusal (and its publish's, behind it) failed the request() at once.
    await eventually(async () => (await storeFailures()) >= before + 4, 10_000, 'the wait and its publish to have been refused, and sent again');
    await locker.query('UNLOCK TABLES');
    const answered = await outcome;
    expect(answered).toMatchObject({ name: 'success', pid: 'r1', rid: 'asked' });
    expect(await count(`SELECT COUNT(*) AS n FROM $db.event WHERE id = 'asked'`)).toBe(1);
    expect(await count(`SELECT COUNT(*) AS n FROM $db.event WHERE rid = 'asked'`)).toBe(1);
  }, 60_000);
  it("the server's max_statement_time stops a publish held by an operator's lock (MariaDB's own error 1969): answered retryable, stored once when the lock is gone", async () => {
    await limitStatements(0.3);
    const { gateway, client, count } = await gatewayOn('statement_time');
    await client.publish({ domain: 'st', name: 'job', pid: 'warm-up' });
    const locker = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password, database: 'statement_time' });
    closers.push(() => locker.end());
    await locker.query('LOCK TABLES eventflow_sequence WRITE');
    const storeFailures = (): Promise<number> => metric(gateway, 'eventflow_errors_total{code="E_EVENTFLOW_STORE_FAILED"}');
    const published = client.publish({ id: 'held', domain: 'st', name: 'job', pid: 'p1' }, { timeout: 20_000 });
    // Before: the interrupted append had no code, counted as the statement's fault, and was refused for good.
    await eventually(async () => (await storeFailures()) >= 2, 10_000, 'the append to have been stopped, answered and sent again');
    await locker.query('UNLOCK TABLES');
    expect(await published).toBe('held');
    expect(await count(`SELECT COUNT(*) AS n FROM $db.event WHERE id = 'held'`)).toBe(1);
  }, 60_000);
});
