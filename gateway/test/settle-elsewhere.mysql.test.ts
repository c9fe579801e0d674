/**
 * A settle that reaches a gateway other than the one holding its delivery (the worker reconnected
 * there while the first had not yet noticed it gone): recorded by the store's current delivery, and
 * decided by the retry policy of the worker's member of the group on that gateway. The client
 * registers its consumers anew first and sends the lost settles right behind; the gateway must not
 * decide before that registration is done.
 */
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { consuming, EventflowClient, webSocketConnector, type Transport, type TransportListener } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { connect, type Conn } from '@eventflow/test-support/raw-socket';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';

describe.skipIf(mysqlUnavailable !== undefined)('a settle sent again on another gateway after a reconnect', () => {
  const { fresh } = useTestDatabases();
  const sockets: WebSocket[] = [];
  const gateways: Gateway[] = [];
  const clients: EventflowClient[] = [];
  const partitioned: Transport[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close({ drainTimeout: 0 });
    for (const transport of partitioned.splice(0)) transport.close();
    for (const socket of sockets.splice(0)) socket.terminate();
    for (const gateway of gateways.splice(0)) await gateway.close();
  });

  async function open(url: string): Promise<Conn> {
    const conn = await connect(url, { client: 'settle-elsewhere-test' });
    sockets.push(conn.ws);
    return conn;
  }

  /** Two gateways on one database, and a worker on the first with one delivery open. */
  async function workerWithDelivery(retry: Record<string, unknown>): Promise<{ db: TestDatabase; second: string; consume: Record<string, unknown>; delivery: string }> {
    const db = await fresh();
    const env = { EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0, ...mysqlGatewayEnv(db.options) } as const;
    for (let i = 0; i < 2; i++) gateways.push(await startGateway(env));
    const worker = await open(gateways[0]!.url);
    const consume = { consumer: 'c1', domain: 'jobs', name: 'run', group: 'billing', concurrency: 1, retry };
    expect(await worker.request('consume', consume)).toMatchObject({ type: 'result' });
    await worker.request('publish', { event: { domain: 'jobs', name: 'run', pid: 'p1', data: {} } });
    const { delivery } = await worker.next((frame) => frame.type === 'delivery');
    return { db, second: gateways[1]!.url, consume, delivery: delivery as string };
  }

  async function ledger(db: TestDatabase): Promise<unknown[]> {
    const conn = await db.connect();
    try {
      const [rows] = await conn.query(`SELECT attempts, outcome, available_at IS NOT NULL AS due, last_error AS lastError FROM eventflow_delivery`);
      return rows as unknown[];
    } finally {
      await conn.end();
    }
  }

  it("a throw is retried by the worker's policy, not failed for good: the settle waits for the consumer registered right before it", async () => {
    const { db, second, consume, delivery } = await workerWithDelivery({ attempts: 3, backoff: 'fixed', delayMs: 60_000 });
    const back = await open(second);
    const registered = back.sendRequest('consume', consume);
    const settled = back.sendRequest('settle', { delivery, outcome: 'failed', error: { message: 'payment service down' } });
    expect(await back.answer(settled)).toMatchObject({ type: 'result' });
    expect(await back.answer(registered)).toMatchObject({ type: 'result' });
    // Attempt 1 of 3: due again in a minute, with its error; before, `failed` for good.
    expect(await ledger(db)).toEqual([{ attempts: 1, outcome: null, due: 1, lastError: 'payment service down' }]);
  });

  it("a hand-back on the worker's last attempt is a dead letter by its policy (the gateway's 5 attempts applied before)", async () => {
    const { db, second, consume, delivery } = await workerWithDelivery({ attempts: 1 });
    const back = await open(second);
    back.sendRequest('consume', consume);
    expect(await back.request('settle', { delivery, outcome: 'release' })).toMatchObject({ type: 'result' });
    expect(await ledger(db)).toEqual([{ attempts: 1, outcome: 'dead', due: 0, lastError: 'released' }]);
  });

  /**
   * A client on the first gateway whose link goes silent as its first settle is sent (the frame is
   * lost; that gateway notices nothing, as in a partition), and which reconnects to the second.
   */
  function partitionedClient(first: string, second: string): EventflowClient {
    let connections = 0;
    const connect = async (signal: AbortSignal): Promise<Transport> => {
      const real = await webSocketConnector(++connections === 1 ? first : second)(signal);
      if (connections > 1) return real;
      partitioned.push(real);
      let listener: TransportListener | undefined;
      let silent = false;
      return {
        send(frame) {
          if (silent) return;
          if (!/"op":"settle/.test(frame)) return real.send(frame);
          silent = true;
          listener?.close(1006, 'partition');
        },
        close() {},
        listen(attached) {
          listener = attached;
          real.listen({ message: (frame) => void (silent || attached.message(frame)), close: (code, reason) => void (silent || attached.close(code, reason)) });
        },
      };
    };
    const client = new EventflowClient(connect, { features: [consuming], reconnect: { minDelay: 20, maxDelay: 100 }, onError: () => undefined });
    clients.push(client);
    return client;
  }

  it("a worker's throw whose settle was cut off is retried by its policy after it reconnects to another gateway (the client registers its consumer before it sends the settle again)", async () => {
    const db = await fresh();
    const env = { EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0, ...mysqlGatewayEnv(db.options) } as const;
    for (let i = 0; i < 2; i++) gateways.push(await startGateway(env));
    const worker = partitionedClient(gateways[0]!.url, gateways[1]!.url);
    await worker.consume('jobs', 'run', () => Promise.reject(new Error('payment service down')), { group: 'billing', retry: { attempts: 3, backoff: 'fixed', delayMs: 60_000 } });
    const publisher = await open(gateways[1]!.url);
    await publisher.request('publish', { event: { domain: 'jobs', name: 'run', pid: 'p1', data: {} } });
    await eventually(async () => (await ledger(db)).some((row) => (row as { lastError: unknown }).lastError !== null), 10_000, 'the settle recorded through the second gateway');
    expect(await ledger(db)).toEqual([{ attempts: 1, outcome: null, due: 1, lastError: 'payment service down' }]);
  });

  it("an extend through another gateway holds there too: the first gateway's lease timer leaves the event alone, and the settle through the second is recorded", async () => {
    const LEASE = 1_000;
    const db = await fresh();
    const env = { EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0, EVENTFLOW_CONSUME_LEASE_MS: LEASE, ...mysqlGatewayEnv(db.options) } as const;
    for (let i = 0; i < 2; i++) gateways.push(await startGateway(env));
    // Two members on the first gateway: a lease handed back there would go to the other at once.
    const members = [await open(gateways[0]!.url), await open(gateways[0]!.url)];
    for (const [i, member] of members.entries()) await member.request('consume', { consumer: `c${i}`, domain: 'jobs', name: 'run', group: 'billing', concurrency: 1 });
    await members[0]!.request('publish', { event: { domain: 'jobs', name: 'run', pid: 'p1', data: {} } });
    const { delivery } = await Promise.race(members.map((member) => member.next((frame) => frame.type === 'delivery')));
    const back = await open(gateways[1]!.url);
    expect(await back.request('extend', { delivery, ms: 10 * LEASE })).toMatchObject({ type: 'result', result: { ms: 10 * LEASE } });
    // Past the lease the first gateway counted (its timer), well within the one granted.
    await new Promise((resolve) => setTimeout(resolve, 2 * LEASE));
    expect(await back.request('settle', { delivery, outcome: 'success' })).toMatchObject({ type: 'result' });
    expect(await ledger(db)).toEqual([{ attempts: 1, outcome: 'success', due: 0, lastError: null }]);
    for (const member of members) expect(member.frames.filter((frame) => frame.type === 'delivery' || frame.type === 'revoked')).toHaveLength(member.frames.some((frame) => frame.delivery === delivery) ? 1 : 0);
  });
});
