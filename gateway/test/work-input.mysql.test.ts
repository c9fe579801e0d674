/**
 * The work half's input on the MariaDB store, whose ledger columns are ASCII (delivery ids) and
 * utf8mb4 (errors): what a client may send there that the store cannot compare or hold is answered
 * at the boundary, not by a failed statement. SQLite would take the same input without a word
 * (bad-input.test.ts has its side), so these cases need the MariaDB store to be seen.
 */
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createClient, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { connect, type Conn } from '@eventflow/test-support/raw-socket';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';

describe.skipIf(mysqlUnavailable !== undefined)('work input the MariaDB store cannot hold', () => {
  const { fresh } = useTestDatabases();
  const sockets: WebSocket[] = [];
  let gateway: Gateway | undefined;
  let client: EventflowClient | undefined;
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.terminate();
    await client?.close({ drainTimeout: 0 });
    client = undefined;
    await gateway?.close();
    gateway = undefined;
  });

  async function start(): Promise<{ db: TestDatabase; url: string }> {
    const db = await fresh();
    gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0, ...mysqlGatewayEnv(db.options) });
    return { db, url: gateway.url };
  }

  async function open(url: string): Promise<Conn> {
    const conn = await connect(url, { client: 'work-input-test' });
    sockets.push(conn.ws);
    return conn;
  }

  it('settle, settleMany and extend of a delivery id with non-ASCII characters → E_EVENTFLOW_UNKNOWN_DELIVERY, not a store failure', async () => {
    const { url } = await start();
    const conn = await open(url);
    for (const delivery of ['é', '📦', `${'0'.repeat(43)}é`]) {
      expect(await conn.request('settle', { delivery, outcome: 'success' }), delivery).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNKNOWN_DELIVERY' });
      expect(await conn.request('extend', { delivery, ms: 1_000 }), delivery).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNKNOWN_DELIVERY' });
      expect(await conn.request('settleMany', { settles: [{ delivery, outcome: 'failed', error: { message: 'x' } }] }), delivery).toMatchObject({
        type: 'result',
        result: { refused: [{ index: 0, code: 'E_EVENTFLOW_UNKNOWN_DELIVERY' }] },
      });
    }
    await conn.ping();
  });

  it('a settle whose error holds a lone surrogate → E_EVENTFLOW_INVALID_INPUT; a settle batched beside it on another connection is recorded', async () => {
    const { db, url } = await start();
    const [bad, innocent, publisher] = await Promise.all([open(url), open(url), open(url)]);
    expect(await bad.request('consume', { consumer: 'c', domain: 'jobs', name: 'a' })).toMatchObject({ type: 'result' });
    expect(await innocent.request('consume', { consumer: 'c', domain: 'jobs', name: 'b' })).toMatchObject({ type: 'result' });
    for (const name of ['a', 'b']) expect(await publisher.request('publish', { event: { id: `job-${name}`, domain: 'jobs', name, pid: 'p', data: {} } })).toMatchObject({ type: 'result' });
    const [first, second] = await Promise.all([bad.next((frame) => frame.type === 'delivery'), innocent.next((frame) => frame.type === 'delivery')]);
    // Sent in one turn, so that the gateway writes them in one ledger batch.
    const refused = bad.sendRequest('settle', { delivery: first!.delivery, outcome: 'failed', error: { message: 'boom \ud83d' } });
    const recorded = innocent.sendRequest('settle', { delivery: second!.delivery, outcome: 'failed', error: { message: 'boom 📦' } });
    expect(await bad.answer(refused)).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('params.error.message') });
    expect(await innocent.answer(recorded)).toMatchObject({ type: 'result' });
    expect(await bad.request('settle', { delivery: first!.delivery, outcome: 'failed', error: { message: 'boom', code: '\udce6' } })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('params.error.code') });
    // The refused settle left its delivery open: a well-formed one is recorded.
    expect(await bad.request('settle', { delivery: first!.delivery, outcome: 'failed', error: { message: 'boom 📦' } })).toMatchObject({ type: 'result' });
    const rows = await db.query<{ event_id: string; outcome: string; last_error: string }>('SELECT event_id, outcome, last_error FROM eventflow_delivery ORDER BY event_id');
    expect(rows).toEqual([
      { event_id: 'job-a', outcome: 'failed', last_error: 'boom 📦' },
      { event_id: 'job-b', outcome: 'failed', last_error: 'boom 📦' },
    ]);
  });

  it('a handler error cut at 4096 characters in the middle of a surrogate pair is reported well-formed and recorded', async () => {
    const { db, url } = await start();
    client = createClient(url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
    const long = `${'x'.repeat(4095)}📦`;
    await client.consume('jobs', 'run', () => {
      throw new Error(long);
    });
    await client.consume('jobs', 'lone', () => {
      throw new Error('half \udce6 a pair');
    });
    await client.publish({ id: 'job-long', domain: 'jobs', name: 'run', pid: 'p' });
    await client.publish({ id: 'job-lone', domain: 'jobs', name: 'lone', pid: 'p' });
    const settled = async () => db.query<{ event_id: string; outcome: string | null; last_error: string | null }>('SELECT event_id, outcome, last_error FROM eventflow_delivery ORDER BY event_id');
    await eventually(async () => (await settled()).every((row) => row.outcome === 'failed') && (await settled()).length === 2, 10_000, 'both failures recorded');
    expect(await settled()).toEqual([
      { event_id: 'job-lone', outcome: 'failed', last_error: 'half \ufffd a pair' },
      { event_id: 'job-long', outcome: 'failed', last_error: 'x'.repeat(4095) },
    ]);
  });
});
