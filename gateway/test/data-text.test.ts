/**
 * Event data that one store takes and the other cannot hold is refused at the boundary, alike on
 * both: MariaDB's JSON_VALID (the check on v4's `event.data`) refuses a document nested deeper than
 * 31 levels or holding a lone UTF-16 surrogate (JSON carries one as `\ud83d`), and such a publish
 * failed there as E_EVENTFLOW_STORE_FAILED (named after an unrelated MySQL error), which a client
 * retries in vain; SQLite stored both. Real gateways on a SQLite file and on MariaDB, raw frames.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startGateway, type Gateway } from '../src/index.js';
import { parseConfig } from '../src/config.js';
import { connect, type Conn } from '@eventflow/test-support/raw-socket';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-data-text-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `levels` nested objects, the innermost holding `leaf`. */
function nested(levels: number): Record<string, unknown> {
  let data: Record<string, unknown> = { leaf: 1 };
  for (let i = 1; i < levels; i++) data = { a: data };
  return data;
}

const stores = [
  { store: 'SQLite', skip: undefined },
  { store: 'MariaDB', skip: mysqlUnavailable },
] as const;

describe.each(stores)('event data both stores hold: $store', ({ store, skip }) => {
  const { fresh } = useTestDatabases();
  const sockets: WebSocket[] = [];
  let gateway: Gateway | undefined;
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.terminate();
    await gateway?.close();
    gateway = undefined;
  });

  async function open(): Promise<Conn> {
    const env = store === 'SQLite' ? { EVENTFLOW_SQLITE_PATH: join(dir, `${Date.now()}-${Math.random()}.db`) } : mysqlGatewayEnv((await fresh()).options);
    gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0, ...env });
    const conn = await connect(gateway.url, { client: 'data-text-test' });
    sockets.push(conn.ws);
    return conn;
  }

  const publish = (conn: Conn, pid: string, data: unknown) => conn.request('publish', { event: { domain: 'text', name: 'made', pid, data } });

  it.skipIf(skip !== undefined)('data nested as deep as the default limit (31) is stored and read back; one level more is E_EVENTFLOW_INVALID_INPUT', async () => {
    const conn = await open();
    expect(await publish(conn, 'deep', nested(31))).toMatchObject({ type: 'result' });
    expect(await conn.request('readEventlog', { domain: 'text', pid: 'deep' })).toMatchObject({ type: 'result', result: { events: [{ data: nested(31) }] } });
    expect(await publish(conn, 'deeper', nested(32))).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT', details: { limit: 'EVENTFLOW_MAX_DATA_DEPTH', value: 31 } });
  });

  it.skipIf(skip !== undefined)('a key or string with a lone surrogate is E_EVENTFLOW_INVALID_INPUT naming where; whole characters are stored as sent; the connection goes on', async () => {
    const conn = await open();
    const refusals = [
      [{ message: 'boom \ud83d' }, 'params.event.data.message'],
      // The path spells such a key with JSON's escapes: the message itself stays well-formed.
      [{ ['k\udc00']: 1 }, String.raw`params.event.data["k\udc00"]`],
      [{ list: [1, { deep: ['x', '\udc00y'] }] }, 'params.event.data.list[1].deep[1]'],
      [{ ['\ud83d']: { fine: true } }, String.raw`params.event.data["\ud83d"]`],
    ] as const;
    for (const [data, path] of refusals) {
      const answer = await publish(conn, 'bad', data);
      expect(answer, path).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT', details: { path } });
      expect((answer as { message: string }).message).toContain('not well-formed Unicode');
    }
    const whole = { message: 'packed \ud83d\udce6, shipped 🚚', ['clé 🔑']: ['é', '\u0000', '\uffff'] };
    expect(await publish(conn, 'good', whole)).toMatchObject({ type: 'result' });
    expect(await conn.request('readEventlog', { domain: 'text', pid: 'good' })).toMatchObject({ type: 'result', result: { events: [{ data: whole }] } });
    expect(await conn.request('readEventlog', { domain: 'text', pid: 'bad' })).toMatchObject({ type: 'result', result: { events: [] } });
  });
});

describe('EVENTFLOW_MAX_DATA_DEPTH with the MySQL store', () => {
  it('is at most 31 (what MariaDB holds): a deeper setting is E_EVENTFLOW_CONFIG at start, saying why; SQLite takes any', () => {
    expect(() => parseConfig({ EVENTFLOW_STORE: 'mysql', EVENTFLOW_MAX_DATA_DEPTH: '40' })).toThrow(/EVENTFLOW_MAX_DATA_DEPTH is at most 31 with EVENTFLOW_STORE=mysql: MariaDB/);
    expect(parseConfig({ EVENTFLOW_STORE: 'mysql', EVENTFLOW_MAX_DATA_DEPTH: '31' }).EVENTFLOW_MAX_DATA_DEPTH).toBe(31);
    expect(parseConfig({ EVENTFLOW_STORE: 'mysql' }).EVENTFLOW_MAX_DATA_DEPTH).toBe(31);
    expect(parseConfig({ EVENTFLOW_MAX_DATA_DEPTH: '40' }).EVENTFLOW_MAX_DATA_DEPTH).toBe(40);
  });
});
