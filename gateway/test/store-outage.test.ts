/**
 * The MySQL store failing under publishes:
 * - killed mid-load (SIGKILL of a private mariadbd, restarted a few seconds later): /readyz is 503
 *   while it is down and 200 again after; publishes in flight when it died were answered
 *   E_EVENTFLOW_STORE_FAILED with `details.stored` (false, or 'unknown' when the COMMIT was sent),
 *   and the client sent each again with the same id until the store took it. So every publish of
 *   the run resolves, and each is stored exactly once.
 * - a COMMIT that the server carries out while the connection dies before its answer (a proxy of
 *   the test's own drops the answer and cuts the connection): the fate is unknown to the gateway,
 *   which says so; the client's retry finds the event stored and gets it, and it is routed.
 */
import { createConnection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, isEventflowError, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { metric, readyz } from '@eventflow/test-support/gateway-http';
import { commitCuttingProxy } from './commit-cutting-proxy.js';
import { mysqlGatewayEnv, mysqlUnavailable, server as sharedServer, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';
import { connect as connectRaw } from '@eventflow/test-support/raw-socket';
import { startPrivateMariadb, unavailable, type PrivateMariadb } from './private-mariadb.js';

if (unavailable !== undefined) console.warn(`Skipping the store outage test: ${unavailable}`);

const DATABASE = 'eventflow_outage';

describe.skipIf(unavailable !== undefined)('the MySQL store killed mid-load and restarted', () => {
  let server: PrivateMariadb;

  beforeAll(async () => {
    server = await startPrivateMariadb();
    const admin = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password });
    await admin.query(`CREATE DATABASE ${DATABASE} CHARACTER SET utf8mb4`);
    await admin.end();
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
  }, 60_000);

  it('every publish resolves and is stored once; /readyz is 503 while the database is down', async () => {
    const gateway = await startGateway({
      EVENTFLOW_PORT: 0,
      EVENTFLOW_STORE: 'mysql',
      EVENTFLOW_MYSQL_HOST: server.host,
      EVENTFLOW_MYSQL_PORT: server.port,
      EVENTFLOW_MYSQL_USER: server.user,
      EVENTFLOW_MYSQL_PASSWORD: server.password,
      EVENTFLOW_MYSQL_DATABASE: DATABASE,
      EVENTFLOW_LOG_LEVEL: 'silent',
      EVENTFLOW_MAX_PUBLISH_RATE: 0,
    });
    // Longer than the outage: the client's retries of a failed publish ride it out.
    const client = createClient(gateway.url, { requestTimeout: 40_000, onError: () => undefined });
    try {
      expect((await readyz(gateway)).status).toBe(200);
      const resolved: string[] = [];
      const rejected: unknown[] = [];
      let running = true;
      let n = 0;
      // Four publishers, each one publish at a time.
      const publishers = Array.from({ length: 4 }, async () => {
        while (running) {
          await client.publish({ domain: 'outage', name: 'placed', pid: `p${n++ % 20}`, data: { n } }).then(
            (id) => resolved.push(id),
            (error: unknown) => rejected.push(error),
          );
        }
      });
      await eventually(() => resolved.length >= 200, 20_000, 'publishes before the outage');

      await server.kill();
      const killedAt = Date.now();
      await eventually(async () => (await readyz(gateway)).status === 503, 10_000, '/readyz 503 while the database is down');
      const down = await readyz(gateway);
      expect(down.store.ready).toBe(false);
      expect(down.store.reason).toMatch(/E_EVENTFLOW_STORE_FAILED/);
      await sleep(Math.max(0, 3_000 - (Date.now() - killedAt)));
      const before = resolved.length;
      await server.start();
      const startedAt = Date.now();
      await eventually(async () => (await readyz(gateway)).status === 200, 20_000, '/readyz 200 once the database is back');
      const readyMs = Date.now() - startedAt;
      // Publishing goes on after the outage, the ones held by it included.
      await eventually(() => resolved.length >= before + 200, 20_000, 'publishes after the outage');
      running = false;
      await Promise.all(publishers);

      const failures = await metric(gateway, 'eventflow_errors_total{code="E_EVENTFLOW_STORE_FAILED"}');
      console.info(
        `MariaDB killed mid-load for ${startedAt - killedAt} ms: ${resolved.length} publishes resolved, ${rejected.length} rejected; ` +
          `${failures} answered E_EVENTFLOW_STORE_FAILED on the way and sent again; /readyz 200 ${readyMs} ms after the restart`,
      );
      // The outage hit publishes (else this proves nothing), and none of them reached the application.
      expect(failures).toBeGreaterThan(0);
      expect(rejected.filter((error) => !isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED'))).toEqual([]);
      expect(rejected).toEqual([]);
      // Exactly one row per publish: no duplicate, nothing lost.
      const db = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password, database: DATABASE });
      try {
        const [rows] = await db.query('SELECT id FROM event WHERE domain = ?', ['outage']);
        const stored = (rows as Array<{ id: string }>).map((row) => row.id);
        expect(stored.length).toBe(resolved.length);
        expect(new Set(stored)).toEqual(new Set(resolved));
      } finally {
        await db.end();
      }
    } finally {
      await client.close();
      await gateway.close();
    }
  }, 120_000);
});

describe.skipIf(mysqlUnavailable !== undefined)('a COMMIT whose answer is lost', () => {
  const databases = useTestDatabases();

  /** A fresh database, the commit-cutting proxy in front of the shared server, and a gateway on the database through it. */
  async function behindProxy(extra: Record<string, string | number> = {}): Promise<{ db: TestDatabase; proxy: Awaited<ReturnType<typeof commitCuttingProxy>>; gateway: Gateway }> {
    const db = await databases.fresh();
    const proxy = await commitCuttingProxy(sharedServer);
    databases.onCleanup(() => proxy.close());
    const gateway = await startGateway({ ...mysqlGatewayEnv({ ...db.options, host: '127.0.0.1', port: proxy.port }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', ...extra });
    databases.onCleanup(() => gateway.close());
    return { db, proxy, gateway };
  }

  it('is answered stored: unknown; the client\'s retry gets the stored event, stored and routed once', async () => {
    const { db, proxy, gateway } = await behindProxy();
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close());
    const seen: StoredEvent[] = [];
    await client.subscribe('orders', '*', (event) => void seen.push(event));
    await client.publish({ domain: 'orders', name: 'placed', pid: 'warm-up' });
    await eventually(() => seen.length === 1, 5_000, 'the warm-up event');

    // A raw request, without the client's retry: the gateway cannot know whether it is stored, and says so. It is.
    const raw = await connectRaw(gateway.url);
    databases.onCleanup(async () => raw.ws.terminate());
    proxy.arm({ call: '"unknown-1"' });
    const answer = await raw.request('publish', { event: { id: 'unknown-1', domain: 'orders', name: 'placed', pid: 'p1', data: {} } });
    expect(proxy.cut).toBe(1);
    expect(answer).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_STORE_FAILED', details: { id: 'unknown-1', stored: 'unknown', retryable: true } });
    expect(answer.message).toMatch(/same id/);
    expect(await db.query('SELECT id FROM event WHERE id = ?', ['unknown-1'])).toHaveLength(1);
    // The same request again gets the stored event, and routes it: the append that took its routing claim was
    // answered as failed. (Also what lets the proxy be armed again: the routing claim's COMMIT is behind.)
    expect(await raw.request('publish', { event: { id: 'unknown-1', domain: 'orders', name: 'placed', pid: 'p1', data: {} } })).toMatchObject({ type: 'result', result: { id: 'unknown-1' } });
    await eventually(() => seen.some((event) => event.id === 'unknown-1'), 5_000, 'the event at the subscriber');

    // Through the client: the same happens, the client sends it again with the same id, and gets the stored event.
    proxy.arm({ call: '"unknown-2"' });
    const id = await client.publish({ id: 'unknown-2', domain: 'orders', name: 'placed', pid: 'p2', data: { n: 2 } });
    expect(proxy.cut).toBe(2);
    expect(id).toBe('unknown-2');
    expect(await db.query('SELECT id FROM event WHERE id = ?', ['unknown-2'])).toHaveLength(1);
    await eventually(() => seen.some((event) => event.id === 'unknown-2'), 5_000, 'the event at the subscriber');
    expect(seen.map((event) => event.id)).toEqual([seen[0]?.id, 'unknown-1', 'unknown-2']);
    const failures = Number(
      (await (await fetch(`${gateway.httpUrl}metrics`)).text()).split('\n').find((line) => line.startsWith('eventflow_errors_total{code="E_EVENTFLOW_STORE_FAILED"}'))?.split(' ')[1],
    );
    expect(failures).toBe(2);
  });
  it("a settle's COMMIT whose answer is lost: the client's retry is answered as recorded, and the metrics count the outcome the store holds", async () => {
    const { db, proxy, gateway } = await behindProxy();
    const errors: unknown[] = [];
    const client = createClient(gateway.url, { onError: (error) => void errors.push(error) });
    databases.onCleanup(() => client.close());
    const outcomes = async (): Promise<Record<string, number>> => {
      const text = await (await fetch(`${gateway.httpUrl}metrics`)).text();
      return Object.fromEntries([...text.matchAll(/^eventflow_consume_outcomes_total\{outcome="(\w+)"\} (\d+)/gm)].map((match) => [match[1], Number(match[2])]));
    };
    // One member, credit 1: while its delivery is open the group claims nothing, so the next COMMIT is its settle's.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    await client.consume(
      'jobs',
      'run',
      async (event) => {
        started += 1;
        await gate;
        if (event.pid === 'throws') throw new Error('the handler failed');
      },
      { group: 'workers', concurrency: 1 },
    );
    const routines = (await db.query(`SELECT 1 FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'eventflow_settle_v1'`)).length === 1;
    for (const [n, pid] of ['succeeds', 'throws'].entries()) {
      await client.publish({ domain: 'jobs', name: 'run', pid });
      await eventually(() => started === n + 1, 5_000, `the delivery of ${pid}`);
      // A success settles through the settle routine's CALL on MariaDB (store/mysql/settle-routine.ts), which commits;
      // a failure with its error through the statements, and their COMMIT.
      proxy.arm(n === 0 && routines ? { call: '["success"]' } : {});
      if (n === 0) release();
      await eventually(() => proxy.cut === n + 1, 5_000, "the settle's COMMIT");
      const outcome = n === 0 ? 'success' : 'failed';
      // The store holds the outcome; the client's retry of the settle finds it recorded under its delivery, and says so.
      await eventually(async () => (await db.query(`SELECT outcome FROM eventflow_delivery WHERE pid = ? AND outcome = ?`, [pid, outcome])).length === 1, 5_000, `the ${outcome} in the store`);
      await eventually(async () => (await outcomes())[outcome] === 1, 5_000, `the ${outcome} counted`);
    }
    expect(await outcomes()).toMatchObject({ success: 1, failed: 1, revoked: 0 });
    expect(errors).toEqual([]);
  });
  it("a claim's COMMIT whose answer is lost: the events it leased go out at once, not after their lease, and with no attempt lost", async () => {
    const lease = 5_000;
    const { db, proxy, gateway } = await behindProxy({ EVENTFLOW_CONSUME_LEASE_MS: lease });
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close());
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const handled: Array<{ pid: string; attempt: number; at: number }> = [];
    await client.consume(
      'jobs',
      'run',
      async (event, { attempt }) => {
        if (event.pid === 'first') await gate;
        handled.push({ pid: event.pid, attempt, at: Date.now() });
      },
      { group: 'workers', concurrency: 1 },
    );
    // 'first' is leased as it is appended and held; 'second' waits for the credit, which its settle gives back.
    await client.publish({ domain: 'jobs', name: 'run', pid: 'first' });
    await eventually(async () => (await db.query(`SELECT 1 FROM eventflow_delivery WHERE pid = 'first' AND deadline IS NOT NULL`)).length === 1, 5_000, "'first' leased");
    await client.publish({ domain: 'jobs', name: 'run', pid: 'second' });
    // The settle's COMMIT passes; the next is the claim of 'second', whose answer is lost.
    proxy.arm({ skip: 1 });
    release();
    await eventually(() => proxy.cut === 1, 5_000, "the claim's COMMIT");
    const cut = Date.now();
    const second = await eventually(() => handled.find((one) => one.pid === 'second'), 2 * lease, "'second' handled");
    expect(second.attempt).toBe(1);
    expect(second.at - cut).toBeLessThan(lease / 2);
  });
});
