/**
 * Bad input over a real WebSocket: every malformed, invalid or unknown frame gets exactly one
 * coded error frame (carrying the request id when one was readable), the connection stays open,
 * and nothing is stored. Talks to the gateway with `ws` directly, not through the client.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { mulberry32 } from './fuzz-support.js';
import { eventually, fence } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { connect, type Conn, type Frame } from '@eventflow/test-support/raw-socket';

const errorFrame = (frame: Frame): boolean => frame.type === 'error';

const event = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  domain: 'orders',
  name: 'placed',
  pid: 'p1',
  data: { amount: 1 },
  ...overrides,
});

let h: Harness;
let conn: Conn;
const sockets: WebSocket[] = [];

async function open(options?: { hello?: boolean }, harness = h): Promise<Conn> {
  const opened = await connect(harness.gateway.url, { client: 'bad-input-test', ...options });
  sockets.push(opened.ws);
  return opened;
}

async function expectNothingStored(): Promise<void> {
  expect(await h.gateway.store.head()).toBe(0);
  expect(await h.gateway.store.readEventlog('orders', 'p1')).toEqual([]);
}

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
});

describe('bad input over a real WebSocket', () => {
  beforeEach(async () => {
    // Unthrottled: the burst below sends ~8 MiB at once, which EVENTFLOW_MAX_RECEIVE_RATE would spread over seconds.
    h = await startHarness({ EVENTFLOW_MAX_RECEIVE_RATE: 0 });
    conn = await open();
  });
  afterEach(async () => h.stop());

  describe('frames that are not a protocol frame → E_EVENTFLOW_INVALID_FRAME without id', () => {
    it.each([
      ['malformed JSON', '{nope'],
      ['empty frame', ''],
      ['a JSON array', '[1,2,3]'],
      ['a JSON string', '"hello"'],
      ['null', 'null'],
      ['a number', '42'],
      ['true', 'true'],
      ['unknown frame type', JSON.stringify({ type: 'bogus' })],
      ['type missing', JSON.stringify({ op: 'ping', params: {} })],
      ['type not a string', JSON.stringify({ type: 7 })],
      ['hello with a non-numeric protocol', JSON.stringify({ type: 'hello', protocol: 'one' })],
    ])('%s', async (_label, raw) => {
      conn.sendRaw(raw);
      const error = await conn.next(errorFrame);
      expect(error.code).toBe('E_EVENTFLOW_INVALID_FRAME');
      expect(error).not.toHaveProperty('id');
      expect(error.message).toEqual(expect.any(String));
      await conn.ping();
      await expectNothingStored();
    });

    it('a binary frame', async () => {
      conn.sendRaw(Buffer.from(JSON.stringify({ type: 'request', id: 1, op: 'ping', params: {} })));
      const error = await conn.next(errorFrame);
      expect(error).toMatchObject({ code: 'E_EVENTFLOW_INVALID_FRAME' });
      expect(error).not.toHaveProperty('id');
      await conn.ping();
      await expectNothingStored();
    });
  });

  describe('request envelope violations → E_EVENTFLOW_INVALID_FRAME', () => {
    it.each([
      ['negative id', { type: 'request', id: -1, op: 'ping', params: {} }, undefined],
      ['non-integer id', { type: 'request', id: 1.5, op: 'ping', params: {} }, undefined],
      ['string id', { type: 'request', id: '7', op: 'ping', params: {} }, undefined],
      ['id beyond the safe integer range', { type: 'request', id: 2 ** 53, op: 'ping', params: {} }, undefined],
      ['missing id', { type: 'request', op: 'ping', params: {} }, undefined],
      ['op not a string', { type: 'request', id: 11, op: 42, params: {} }, 11],
      ['missing op', { type: 'request', id: 12, params: {} }, 12],
      ['op longer than 64 characters', { type: 'request', id: 13, op: 'p'.repeat(65), params: {} }, 13],
      ['extra envelope key', { type: 'request', id: 14, op: 'ping', params: {}, extra: true }, 14],
      ['type missing, id still readable', { id: 15, op: 'ping', params: {} }, 15],
    ])('%s', async (_label, frame, id) => {
      conn.send(frame);
      const error = await conn.next(errorFrame);
      expect(error.code).toBe('E_EVENTFLOW_INVALID_FRAME');
      if (id === undefined) expect(error).not.toHaveProperty('id');
      else expect(error.id).toBe(id);
      await conn.ping();
      await expectNothingStored();
    });
  });

  it('unknown operation → E_EVENTFLOW_UNKNOWN_OPERATION with the request id', async () => {
    for (const op of ['explode', '__proto__', 'constructor', 'toString']) {
      conn.send({ type: 'request', id: 7, op, params: {} });
      const error = await conn.next(errorFrame);
      expect(error).toMatchObject({ id: 7, code: 'E_EVENTFLOW_UNKNOWN_OPERATION' });
      expect(error.message).toContain(op);
    }
    await conn.ping();
    await expectNothingStored();
  });

  describe('publish schema violations → E_EVENTFLOW_INVALID_INPUT naming the field', () => {
    it.each([
      ['missing domain', { event: event({ domain: undefined }) }, 'params.event.domain'],
      ['missing event', {}, 'params.event'],
      ['data is an array', { event: event({ data: [1, 2] }) }, 'params.event.data'],
      ['data is a string', { event: event({ data: 'text' }) }, 'params.event.data'],
      ['data is null', { event: event({ data: null }) }, 'params.event.data'],
      ['extra unknown key in event', { event: event({ colour: 'red' }) }, 'colour'],
      ['extra unknown param', { event: event(), colour: 'red' }, 'colour'],
      ['name of the wrong type', { event: event({ name: 42 }) }, 'params.event.name'],
      ['pid of the wrong type', { event: event({ pid: { a: 1 } }) }, 'params.event.pid'],
      ['event is an array', { event: [event()] }, 'params.event'],
    ])('%s', async (_label, params, field) => {
      const error = await conn.request('publish', params);
      expect(error).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT' });
      expect(error.message).toContain(field);
      await conn.ping();
      await expectNothingStored();
    });

    it('data nested 10,000 deep → E_EVENTFLOW_INVALID_INPUT (validation must not overflow the stack)', async () => {
      const deep = '['.repeat(10_000) + ']'.repeat(10_000);
      conn.sendRaw(`{"type":"request","id":21,"op":"publish","params":{"event":{"domain":"orders","name":"placed","pid":"p1","data":{"deep":${deep}}}}}`);
      expect(await conn.next((frame) => frame.id === 21)).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT' });
      await conn.ping();
      await expectNothingStored();
    });

    it('a number too large for a double (1e999, read as Infinity) → E_EVENTFLOW_INVALID_INPUT naming where and what to send instead', async () => {
      for (const [id, op, number] of [[22, 'publish', '1e999'], [23, 'persist', '-1e400'], [24, 'schedule', '1e309']] as const) {
        const at = op === 'schedule' ? '"at":"2030-01-01T00:00:00Z",' : '';
        conn.sendRaw(`{"type":"request","id":${id},"op":"${op}","params":{${at}"event":{"domain":"orders","name":"placed","pid":"p1","data":{"a":[1,{"b":${number}}]}}}}`);
        const error = await conn.next((frame) => frame.id === id);
        expect(error).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT', details: { path: 'params.event.data.a[1].b' } });
        expect(error.message).toContain('as a string');
      }
      await conn.ping();
      await expectNothingStored();
    });

    it('params that are not an object', async () => {
      for (const params of [[], 'x', 5, true]) {
        const error = await conn.request('publish', params);
        expect(error).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT' });
      }
      await conn.ping();
      await expectNothingStored();
    });
  });

  describe('invalid identifiers (v4 limits) → E_EVENTFLOW_INVALID_INPUT naming the field', () => {
    const fields = ['domain', 'name', 'pid', 'id', 'rid'] as const;
    const badValues: [string, string][] = [
      ['empty', ''],
      ['65 characters', 'a'.repeat(65)],
      ['non-ASCII letter', 'ordér'],
      ['emoji', 'order-📦'],
      ['record separator \\u001e', 'a\u001eb'],
      ['unit separator \\u001f', 'a\u001fb'],
      ['newline', 'a\nb'],
      ['tab', 'a\tb'],
      ['NUL', 'a\u0000b'],
      ['DEL', 'a\u007fb'],
      ['trailing space', 'order '],
    ];
    const cases = fields.flatMap((field) => badValues.map(([label, value]) => [field, label, value] as const));

    it.each(cases)('%s: %s', async (field, _label, value) => {
      const error = await conn.request('publish', { event: event({ [field]: value }) });
      expect(error).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT' });
      expect(error.message).toContain(`params.event.${field}`);
      await conn.ping();
      expect(await h.gateway.store.head()).toBe(0);
    });

    it('identifiers are checked in other operations too', async () => {
      const attempts: [string, Record<string, unknown>, string][] = [
        ['read', { id: 'a\u001fb' }, 'params.id'],
        ['readEventlog', { domain: 'orders', pid: 'x'.repeat(65) }, 'params.pid'],
        ['subscribe', { domain: 'ordér', name: 'placed' }, 'params.domain'],
        ['wait', { wait: 'w1', domain: 'orders', pid: 'p1', names: ['ok', 'bad '] }, 'params.names.1'],
        ['persistEntityAssociation', { eventId: 'e1', eid: '' }, 'params.eid'],
      ];
      for (const [op, params, field] of attempts) {
        const error = await conn.request(op, params);
        expect(error, op).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT' });
        expect(error.message, op).toContain(field);
      }
      await conn.ping();
      await expectNothingStored();
    });

    it('64 printable ASCII characters (inner space included) are accepted for every identifier', async () => {
      // 0x21..0x60 is 64 printable characters; each field gets its own variant.
      const printable = (offset: number): string => {
        const chars = Array.from({ length: 64 }, (_, i) => String.fromCharCode(0x21 + ((i + offset) % 94)));
        chars[10] = ' ';
        return chars.join('');
      };
      const first = { id: printable(0), domain: printable(1), name: printable(2), pid: printable(3), data: { ok: true } };
      for (const value of Object.values(first).filter((v) => typeof v === 'string')) {
        expect(value).toHaveLength(64);
        expect(value).toMatch(/^[\x20-\x7e]+$/);
        expect(value.endsWith(' ')).toBe(false);
      }
      const published = await conn.request('publish', { event: first });
      expect(published).toMatchObject({ type: 'result', result: { id: first.id, position: 1 } });

      const second = { ...first, id: printable(4), rid: first.id };
      expect(await conn.request('publish', { event: second })).toMatchObject({ type: 'result', result: { id: second.id } });

      const read = await conn.request('read', { id: second.id });
      expect(read).toMatchObject({ type: 'result', result: { event: { id: second.id, domain: first.domain, name: first.name, pid: first.pid, rid: first.id } } });
      expect(await h.gateway.store.readEventlog(first.domain, first.pid)).toHaveLength(2);
    });
  });

  describe('references to things that do not exist', () => {
    it.each([
      ['read', 'read', { id: 'missing' }, 'E_EVENTFLOW_EVENT_NOT_FOUND'],
      ['wait after an unknown id', 'wait', { wait: 'w1', domain: 'orders', pid: 'p1', names: ['done'], afterId: 'missing' }, 'E_EVENTFLOW_EVENT_NOT_FOUND'],
      ['persistEntityAssociation', 'persistEntityAssociation', { eventId: 'missing', eid: 'e1' }, 'E_EVENTFLOW_EVENT_NOT_FOUND'],
      ['persistChildProcessAssociation', 'persistChildProcessAssociation', { eventId: 'missing', domain: 'orders', cpid: 'c1' }, 'E_EVENTFLOW_EVENT_NOT_FOUND'],
      ['settle an unknown delivery', 'settle', { delivery: 'd-missing', outcome: 'success' }, 'E_EVENTFLOW_UNKNOWN_DELIVERY'],
      ['publish with rid naming no event', 'publish', { event: event({ id: 'e1', rid: 'missing' }) }, 'E_EVENTFLOW_REFERENCE_NOT_FOUND'],
      ['persist with rid naming no event', 'persist', { event: event({ id: 'e1', rid: 'missing' }) }, 'E_EVENTFLOW_REFERENCE_NOT_FOUND'],
    ])('%s', async (_label, op, params, code) => {
      const error = await conn.request(op, params);
      expect(error).toMatchObject({ type: 'error', code });
      await conn.ping();
      await expectNothingStored();
      expect(await h.gateway.store.readEventlogByEid('e1')).toEqual([]);
      expect(await h.gateway.store.readEventlogByChildProcess('orders', 'c1')).toEqual([]);
    });

    it('publishing the same id with different content → E_EVENTFLOW_DUPLICATE_ID, the original kept', async () => {
      const original = event({ id: 'dup-1', data: { amount: 1 } });
      expect(await conn.request('publish', { event: original })).toMatchObject({ type: 'result', result: { id: 'dup-1' } });
      // The identical retry is idempotent.
      expect(await conn.request('publish', { event: original })).toMatchObject({ type: 'result', result: { id: 'dup-1', position: 1 } });

      for (const changed of [{ data: { amount: 2 } }, { name: 'cancelled' }, { pid: 'p2' }, { domain: 'billing' }]) {
        const error = await conn.request('publish', { event: { ...original, ...changed } });
        expect(error, JSON.stringify(changed)).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_DUPLICATE_ID' });
      }
      await conn.ping();
      expect(await h.gateway.store.head()).toBe(1);
      const stored = await h.gateway.store.readEventlog('orders', 'p1');
      expect(stored).toHaveLength(1);
      expect(stored[0]).toMatchObject({ id: 'dup-1', name: 'placed', data: { amount: 1 } });
    });
  });

  describe('handshake', () => {
    it('a request before hello → E_EVENTFLOW_HANDSHAKE_REQUIRED, then hello still works', async () => {
      const fresh = await open({ hello: false });
      fresh.send({ type: 'request', id: 5, op: 'publish', params: { event: event() } });
      const error = await fresh.next(errorFrame);
      expect(error).toMatchObject({ id: 5, code: 'E_EVENTFLOW_HANDSHAKE_REQUIRED' });
      expect(fresh.ws.readyState).toBe(WebSocket.OPEN);
      await expectNothingStored();

      fresh.send({ type: 'hello', protocol: 1 });
      expect(await fresh.next((frame) => frame.type === 'welcome')).toMatchObject({ protocol: 1, head: 0 });
      await fresh.ping();
    });

    it('hello with protocol 999 → E_EVENTFLOW_PROTOCOL_VERSION, then close 1002', async () => {
      const fresh = await open({ hello: false });
      fresh.send({ type: 'hello', protocol: 999 });
      const error = await fresh.next(errorFrame);
      expect(error.code).toBe('E_EVENTFLOW_PROTOCOL_VERSION');
      expect(error).not.toHaveProperty('id');
      expect((await fresh.closed).code).toBe(1002);
      expect(fresh.frames.some((frame) => frame.type === 'welcome')).toBe(false);
      // Other connections are unaffected.
      await conn.ping();
    });
  });

  it('a burst of 2,000 garbage frames gets exactly one error frame each; the gateway stays up', async () => {
    const random = mulberry32(0xbad1);
    const int = (max: number): number => Math.floor(random() * max);
    const validFrames = [
      JSON.stringify({ type: 'request', id: 1, op: 'publish', params: { event: event({ id: 'burst-1' }) } }),
      JSON.stringify({ type: 'request', id: 2, op: 'ping', params: {} }),
      JSON.stringify({ type: 'hello', protocol: 1, client: 'x' }),
      JSON.stringify({ type: 'request', id: 3, op: 'subscribe', params: { domain: 'orders', name: '*' } }),
    ];
    const deepArray = '['.repeat(10_000) + ']'.repeat(10_000);
    const deepObject = '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000);
    const deepData = `{"type":"request","id":9,"op":"publish","params":{"event":{"domain":"orders","name":"placed","pid":"p1","data":{"deep":${deepArray}}}}}`;
    const wrongTypes: unknown[] = [
      { type: 'bogus' },
      { type: 42 },
      { type: 'hello', protocol: 'one' },
      { type: 'hello' },
      { type: 'request', id: 'x', op: 'ping', params: {} },
      { type: 'request', id: -3, op: 'ping', params: {} },
      { type: 'request', id: 4, op: 17, params: {} },
      { type: 'request', id: 5, op: 'explode', params: {} },
      { type: 'request', id: 6, op: 'publish', params: { event: { domain: 1 } } },
      { type: 'request', id: 7, op: 'publish', params: { event: event({ data: [] }) } },
      { type: 'request', id: 8, op: 'read', params: { id: '' } },
      [],
      {},
      null,
      'request',
      3.14,
    ];
    const garbage = Array.from({ length: 2_000 }, (_, i): string => {
      switch (i % 5) {
        case 0:
          return Array.from({ length: 1 + int(200) }, () => String.fromCharCode(int(0xd800))).join('');
        case 1: {
          const valid = validFrames[int(validFrames.length)]!;
          return valid.slice(0, 1 + int(valid.length - 1));
        }
        case 2:
          return JSON.stringify(wrongTypes[int(wrongTypes.length)]);
        case 3:
          return [deepArray, deepObject, deepData][int(3)]!;
        default:
          return String.fromCharCode(...Array.from({ length: 1 + int(64) }, () => int(0x80)));
      }
    });

    for (const frame of garbage) conn.sendRaw(frame);
    await conn.ping();
    const errors = await eventually(() => {
      const received = conn.frames.filter(errorFrame);
      return received.length >= garbage.length && received;
    }, 5_000, `${garbage.length} error frames (got ${conn.frames.filter(errorFrame).length})`);
    // A round trip: an answer to any frame sent before the ping would have come before its result.
    await fence(() => conn.request('ping', {}));
    expect(conn.frames.filter(errorFrame)).toHaveLength(garbage.length);
    expect(errors).toHaveLength(garbage.length);
    expect(new Set(errors.map((error) => error.code))).toEqual(
      new Set(['E_EVENTFLOW_INVALID_FRAME', 'E_EVENTFLOW_INVALID_INPUT', 'E_EVENTFLOW_UNKNOWN_OPERATION']),
    );
    expect(conn.frames.filter((frame) => frame.type !== 'error' && frame.type !== 'result' && frame.type !== 'welcome')).toEqual([]);

    await conn.ping();
    const health = await fetch(`${h.gateway.httpUrl}healthz`);
    expect(health.status).toBe(200);
    await expectNothingStored();
    // A new connection is served too.
    await (await open()).ping();
  });
});

describe('gateway limits', () => {
  afterEach(async () => h.stop());

  it('a frame over EVENTFLOW_MAX_FRAME_BYTES closes the socket with 1009 and stores nothing', async () => {
    h = await startHarness({ EVENTFLOW_MAX_FRAME_BYTES: 4096 });
    const big = await open();
    const frame = JSON.stringify({ type: 'request', id: 1, op: 'publish', params: { event: event({ data: { blob: 'x'.repeat(5_000) } }) } });
    expect(Buffer.byteLength(frame)).toBeGreaterThan(4096);
    big.sendRaw(frame);
    expect((await big.closed).code).toBe(1009);
    expect(big.frames.filter((f) => f.type === 'result')).toEqual([]);
    await expectNothingStored();

    // The gateway still accepts and serves a new connection, and a frame under the limit is fine.
    const next = await open();
    await next.ping();
    const fine = JSON.stringify({ type: 'request', id: 2, op: 'publish', params: { event: event({ data: { blob: 'x'.repeat(2_850) } }) } });
    expect(Buffer.byteLength(fine)).toBeGreaterThan(2_900);
    expect(Buffer.byteLength(fine)).toBeLessThan(4096);
    next.sendRaw(fine);
    expect(await next.next((f) => f.id === 2)).toMatchObject({ type: 'result', result: { position: 1 } });
    expect(await h.gateway.store.readEventlog('orders', 'p1')).toHaveLength(1);
  });

  it('no hello within EVENTFLOW_HANDSHAKE_TIMEOUT_MS closes the socket with 4000', async () => {
    h = await startHarness({ EVENTFLOW_HANDSHAKE_TIMEOUT_MS: 200 });
    const started = Date.now();
    const silent = await open({ hello: false });
    expect((await silent.closed).code).toBe(4000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(silent.frames).toEqual([]);

    // A client that says hello in time keeps its connection past the timeout.
    const polite = await open();
    // Time is what is tested: the connection outlives the handshake timeout.
    await new Promise((resolve) => setTimeout(resolve, 400));
    await polite.ping();
  });
});
