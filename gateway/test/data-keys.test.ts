/**
 * Event data whose keys look like prototype machinery, end to end on both stores: an own
 * `__proto__` key (which every copy by assignment would silently drop) is refused with
 * E_EVENTFLOW_INVALID_INPUT naming its path, at the client and at the gateway, and nothing is
 * stored; `constructor`, `prototype` and the like are plain data, kept exactly through the store,
 * the wire and the state fold, and no prototype is ever touched.
 */
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { EventflowError, type JsonObject } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { connect } from '@eventflow/test-support/raw-socket';

const sockets: WebSocket[] = [];
let h: Harness | undefined;
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  await h?.stop();
  h = undefined;
});

/** Sends `data` as raw JSON text, so that `__proto__` arrives as an own key, as any hand-written frame can. */
const publishFrame = (id: number, op: string, data: string, pid: string): string =>
  `{"type":"request","id":${id},"op":"${op}","params":{"event":{"domain":"keys","name":"set","pid":"${pid}","data":${data}}}}`;

const refused: Array<[data: string, path: string]> = [
  ['{"__proto__":{"polluted":true}}', 'params.event.data.__proto__'],
  ['{"a":{"b":{"__proto__":{"polluted":true}}}}', 'params.event.data.a.b.__proto__'],
  ['{"list":[1,{"ok":1},{"__proto__":{"polluted":true}}]}', 'params.event.data.list.2.__proto__'],
  ['{"ok":1,"__proto__":1}', 'params.event.data.__proto__'],
];

const plain = JSON.parse('{"constructor":{"prototype":{"polluted":1}},"prototype":{"polluted":2},"hasOwnProperty":3,"toString":"x","list":[{"constructor":{"name":"y"}}]}') as JsonObject;

function suite(name: string, config: () => Promise<Record<string, string | number>>): void {
  describe(`event data keys (${name})`, () => {
    it('refuses an own __proto__ key anywhere in data with E_EVENTFLOW_INVALID_INPUT naming its path, and stores nothing', async () => {
      h = await startHarness(await config());
      const conn = await connect(h.gateway.url, { client: 'data-keys-test' });
      sockets.push(conn.ws);
      let id = 1;
      for (const op of ['publish', 'persist']) {
        for (const [data, path] of refused) {
          const request = id++;
          conn.sendRaw(publishFrame(request, op, data, 'refused'));
          const answer = await conn.answer(request);
          expect(answer, `${op} ${data}`).toMatchObject({ type: 'error', id: request, code: 'E_EVENTFLOW_INVALID_INPUT' });
          expect(answer.message).toContain(`${path}: "__proto__" cannot be a key of event data`);
        }
      }
      const log = await conn.request('readEventlog', { domain: 'keys', pid: 'refused' });
      expect(log).toMatchObject({ type: 'result', result: { events: [], count: 0 } });
      expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();
    });

    it('the client refuses it before sending, with the same path', async () => {
      h = await startHarness(await config());
      const client = h.client();
      for (const [data, path] of refused) {
        const error = await client.publish({ domain: 'keys', name: 'set', pid: 'client', data: JSON.parse(data) as JsonObject }).catch((caught: unknown) => caught);
        expect(error).toBeInstanceOf(EventflowError);
        expect((error as EventflowError).code).toBe('E_EVENTFLOW_INVALID_INPUT');
        expect((error as EventflowError).message).toContain(`${path.replace('params.', '')}: "__proto__" cannot be a key of event data`);
      }
      expect(await client.readEventlog('keys', 'client')).toEqual([]);
    });

    it('keeps constructor, prototype and other Object.prototype names as plain data through the store, the wire and the state fold', async () => {
      h = await startHarness(await config());
      const client = h.client();
      await client.publish({ domain: 'keys', name: 'set', pid: 'plain', data: plain });
      await client.publish({ domain: 'keys', name: 'set', pid: 'plain', data: { constructor: { prototype: { more: 1 } }, list: [{ constructor: 'z' }] } });
      const [first] = await client.readEventlog('keys', 'plain');
      expect(JSON.stringify(first?.data)).toBe(JSON.stringify(plain));
      const state = (await client.readEventlogState('keys', 'plain')) as Record<string, unknown>;
      expect(Object.keys(state).sort()).toEqual(['constructor', 'hasOwnProperty', 'list', 'prototype', 'toString']);
      expect(state.constructor).toEqual({ prototype: { polluted: 1, more: 1 } });
      expect(state.prototype).toEqual({ polluted: 2 });
      expect(state.hasOwnProperty).toBe(3);
      expect(state.list).toEqual([{ constructor: { name: 'y' } }, { constructor: 'z' }]);
      expect(Object.getPrototypeOf(state)).toBe(Object.prototype);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect((Object.prototype as Record<string, unknown>).more).toBeUndefined();
    });
  });
}

suite('sqlite', async () => ({}));

describe.skipIf(mysqlUnavailable !== undefined)('on MySQL', () => {
  const databases = useTestDatabases();
  suite('mysql', async () => {
    const db = await databases.fresh();
    const { host, port, user, password, database } = db.options;
    return {
      EVENTFLOW_STORE: 'mysql',
      EVENTFLOW_MYSQL_HOST: host ?? '127.0.0.1',
      EVENTFLOW_MYSQL_PORT: port ?? 3306,
      EVENTFLOW_MYSQL_USER: user ?? 'root',
      EVENTFLOW_MYSQL_PASSWORD: password ?? '',
      EVENTFLOW_MYSQL_DATABASE: database ?? '',
    };
  });
});
