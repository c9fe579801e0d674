/**
 * The work half's input on the MariaDB store, whose ledger columns are ASCII (delivery ids) and
 * utf8mb4 (errors): what a client may send there that the store cannot compare or hold is answered
 * at the boundary, not by a failed statement. SQLite would take the same input without a word
 * (bad-input.test.ts has its side), so these cases need the MariaDB store to be seen.
 */
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startGateway, type Gateway } from '../src/index.js';
import { connect, type Conn } from '@eventflow/test-support/raw-socket';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';

describe.skipIf(mysqlUnavailable !== undefined)('work input the MariaDB store cannot hold', () => {
  const { fresh } = useTestDatabases();
  const sockets: WebSocket[] = [];
  let gateway: Gateway | undefined;
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.terminate();
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
});
