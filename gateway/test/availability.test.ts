/**
 * Limits that keep one client from taking the gateway from the others, over real WebSockets to a
 * real gateway: the bytes a connection may send per second (EVENTFLOW_MAX_RECEIVE_RATE), the
 * values and depth of an event's data (EVENTFLOW_MAX_DATA_KEYS / _DEPTH, checked before parsing
 * and validation), the number of connections (EVENTFLOW_MAX_CONNECTIONS) and, with JWT auth, of
 * connections without a token (EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS), which also time out
 * (EVENTFLOW_AUTH_TIMEOUT_MS). And the point of them: a well-behaved client's round trips stay
 * fast while another connection sends the heaviest frames the defaults allow.
 */
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ByteBudget } from '../src/server/receive-budget.js';
import { dataShapeBreach, scanFrame } from '../src/connection/data-shape.js';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';
import { connect as connectRaw, type Conn, type ConnectOptions } from '@eventflow/test-support/raw-socket';

const SECRET = 'availability-secret-0123456789-abcdefghijklmnop';
const token = (claims: Record<string, string[]>): Promise<string> =>
  new SignJWT({ eventflow: claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));

const sockets: WebSocket[] = [];
async function connect(url: string, options: ConnectOptions = {}): Promise<Conn> {
  const conn = await connectRaw(url, { client: 'availability-test', ...options });
  sockets.push(conn.ws);
  return conn;
}

/** Attempts a WebSocket upgrade: 101 and the socket when it opened, else the HTTP status and body. */
async function upgrade(url: string): Promise<{ status: number; body: string; ws: WebSocket }> {
  const ws = new WebSocket(url);
  sockets.push(ws);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ status: 101, body: '', ws }));
    ws.once('unexpected-response', (_request, response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => {
        resolve({ status: response.statusCode ?? 0, body, ws });
        ws.terminate();
      });
    });
    ws.once('error', reject);
  });
}

const closed = (ws: WebSocket): Promise<number> =>
  ws.readyState === WebSocket.CLOSED ? Promise.resolve(-1) : new Promise((resolve) => ws.once('close', (code) => resolve(code)));

const event = (data: unknown, overrides: Record<string, unknown> = {}): Record<string, unknown> => ({ domain: 'orders', name: 'placed', pid: 'p1', data, ...overrides });

/** An object of `keys` members, each a string of `valueBytes`. */
const wide = (keys: number, valueBytes = 1): Record<string, string> => Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, 'x'.repeat(valueBytes)]));
const deep = (levels: number): unknown => {
  let value: unknown = 1;
  for (let i = 1; i < levels; i++) value = { a: value };
  return { a: value };
};

let h: Harness | undefined;
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  await h?.stop();
  h = undefined;
});

describe('EVENTFLOW_MAX_DATA_KEYS / EVENTFLOW_MAX_DATA_DEPTH: the shape of an event\'s data', () => {
  it('at the limits is stored; one value or level more → E_EVENTFLOW_INVALID_INPUT naming the path and the limit, nothing stored', async () => {
    h = await startHarness({ EVENTFLOW_MAX_DATA_KEYS: 100, EVENTFLOW_MAX_DATA_DEPTH: 5, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const conn = await connect(h.gateway.url);
    expect(await conn.request('publish', { event: event(wide(100), { pid: 'keys-ok' }) })).toMatchObject({ type: 'result' });
    expect(await conn.request('publish', { event: event(deep(5), { pid: 'depth-ok' }) })).toMatchObject({ type: 'result' });

    for (const op of ['publish', 'persist']) {
      const id = conn.sendRequest(op, { event: event({ list: Array.from({ length: 100 }, (_, i) => i) }, { pid: 'keys-bad' }) });
      expect(await conn.answer(id)).toMatchObject({
        type: 'error',
        id,
        code: 'E_EVENTFLOW_INVALID_INPUT',
        details: { limit: 'EVENTFLOW_MAX_DATA_KEYS', value: 100, path: 'params.event.data.list[99]' },
      });
    }
    const tooDeep = await conn.request('publish', { event: event({ x: [deep(4)] }, { pid: 'depth-bad' }) });
    expect(tooDeep).toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', details: { limit: 'EVENTFLOW_MAX_DATA_DEPTH', value: 5, path: 'params.event.data.x[0].a.a.a' } });
    expect(tooDeep.message).toContain('EVENTFLOW_MAX_DATA_DEPTH=5');
    const scheduled = await conn.request('schedule', { at: new Date(Date.now() + 60_000).toISOString(), event: event(deep(6), { pid: 'depth-bad' }) });
    expect(scheduled).toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', details: { limit: 'EVENTFLOW_MAX_DATA_DEPTH' } });

    expect((await conn.request('readEventlog', { domain: 'orders', pid: 'keys-bad' })).result).toMatchObject({ events: [] });
    expect((await conn.request('readEventlog', { domain: 'orders', pid: 'depth-bad' })).result).toMatchObject({ events: [] });
    await conn.ping();
  });

  it('a frame with more values than any valid request is refused before it is parsed, with its request id', async () => {
    h = await startHarness({ EVENTFLOW_MAX_DATA_KEYS: 100, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const conn = await connect(h.gateway.url);
    const id = conn.sendRequest('ping', { junk: Array.from({ length: 5_000 }, () => 0) });
    expect(await conn.answer(id)).toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', details: { limit: 'EVENTFLOW_MAX_DATA_KEYS', path: 'frame' } });
    await conn.ping();
  });

  it('the checks: one walk with its own stack, stopping at the first breach; the scan counts values outside strings only', () => {
    const limits = { maxDataKeys: 10_000, maxDataDepth: 32 };
    // 100,000 levels would overflow a recursive walk; this one stops at level 33.
    let nested: unknown = {};
    for (let i = 0; i < 100_000; i++) nested = [nested];
    expect(dataShapeBreach(nested, limits)).toMatchObject({ limit: 'EVENTFLOW_MAX_DATA_DEPTH' });
    expect(dataShapeBreach({ ['__proto__']: 1, 'a b': { c: [1] } }, limits)).toBeUndefined();
    expect(dataShapeBreach({ 'a b': wide(10_001) }, limits)).toMatchObject({ limit: 'EVENTFLOW_MAX_DATA_KEYS', path: 'data["a b"].k9999' });
    expect(scanFrame(JSON.stringify({ type: 'request', id: 42, s: ',,,,[[[{{'.repeat(10_000) }), limits)).toBeUndefined();
    expect(scanFrame(JSON.stringify({ type: 'request', id: 42, s: '\\",'.repeat(10_000) }), limits)).toBeUndefined();
    expect(scanFrame(JSON.stringify({ type: 'request', id: 42, params: wide(11_000) }), limits)).toMatchObject({ limit: 'EVENTFLOW_MAX_DATA_KEYS', id: 42 });
  });
});

describe('EVENTFLOW_MAX_RECEIVE_RATE: bytes per second and connection', () => {
  it('the budget: a frame larger than what is left is taken, and the debt is paid back at the rate', () => {
    let now = 0;
    const budget = new ByteBudget(1000, () => now);
    expect(budget.spend(600)).toBe(0);
    expect(budget.spend(900)).toBe(500); // 500 bytes in debt at 1000 B/s
    now = 500;
    expect(budget.spend(0)).toBe(0);
    now = 10_000;
    expect(budget.spend(1000)).toBe(0); // refilled to one second's worth, not more
    expect(budget.spend(1)).toBe(1);
  });

  it('a connection sending faster is read at the rate: every frame is answered, none refused, and another connection is not slowed', async () => {
    const RATE = 256 * 1024;
    h = await startHarness({ EVENTFLOW_MAX_RECEIVE_RATE: RATE, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const heavy = await connect(h.gateway.url);
    const other = await connect(h.gateway.url);
    const frames = 12;
    const bytes = 64 * 1024;
    const started = performance.now();
    const ids = Array.from({ length: frames }, (_, i) => heavy.sendRequest('publish', { event: event({ blob: 'x'.repeat(bytes) }, { pid: `heavy-${i}` }) }));
    // Meanwhile the other connection is served at once.
    const otherStarted = performance.now();
    await other.ping();
    const otherMs = performance.now() - otherStarted;
    for (const id of ids) expect(await heavy.answer(id), `request ${id}`).toMatchObject({ type: 'result' });
    const elapsed = performance.now() - started;
    // 768 KiB at 256 KiB/s with one second's burst: at least ~2 s to take them all.
    expect(elapsed).toBeGreaterThan(((frames * bytes - RATE) / RATE) * 1000 * 0.8);
    expect(otherMs).toBeLessThan(elapsed / 2);
    await heavy.ping();
  }, 30_000);
});

describe('EVENTFLOW_MAX_CONNECTIONS', () => {
  it('one upgrade beyond the limit → HTTP 503 with E_EVENTFLOW_LIMIT_EXCEEDED as JSON; a freed slot is used again', async () => {
    h = await startHarness({ EVENTFLOW_MAX_CONNECTIONS: 3 });
    const open = [await connect(h.gateway.url), await connect(h.gateway.url), await connect(h.gateway.url, { hello: false })];
    const refused = await upgrade(h.gateway.url);
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'E_EVENTFLOW_LIMIT_EXCEEDED', details: { limit: 'EVENTFLOW_MAX_CONNECTIONS', value: 3 } });
    for (const conn of open.slice(0, 2)) await conn.ping();

    open[0]?.ws.close();
    const reopened = await eventually(async () => {
      const attempt = await upgrade(h!.gateway.url);
      return attempt.status === 101 && attempt;
    }, 5_000, 'a freed connection slot');
    reopened.ws.close();
  });
});

describe('EVENTFLOW_AUTH=jwt: unauthenticated connections', () => {
  const jwt = { EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET };

  it('beyond EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS the oldest one is closed with 1013; connections with a token do not count', async () => {
    h = await startHarness({ ...jwt, EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS: 2 });
    const authenticated: Conn[] = [];
    for (let i = 0; i < 3; i++) {
      const conn = await connect(h.gateway.url, { hello: false });
      conn.send({ type: 'hello', protocol: 1, client: 'with-token', token: await token({ read: ['*'] }) });
      await conn.next((frame) => frame.type === 'welcome');
      authenticated.push(conn);
    }
    const first = await connect(h.gateway.url, { hello: false });
    const second = await connect(h.gateway.url); // anonymous after its hello: still unauthenticated
    const firstClosed = closed(first.ws);
    const third = await connect(h.gateway.url, { hello: false });
    expect(await firstClosed).toBe(1013);
    // The newest two stay; a client that authenticates right after connecting gets in.
    await second.ping();
    third.send({ type: 'hello', protocol: 1, client: 'late-token', token: await token({ read: ['*'] }) });
    await third.next((frame) => frame.type === 'welcome');
    for (const conn of authenticated) await conn.ping();
  });

  it('a connection without a valid token is closed with 4408 after EVENTFLOW_AUTH_TIMEOUT_MS, unless it authenticates', async () => {
    h = await startHarness({ ...jwt, EVENTFLOW_AUTH_TIMEOUT_MS: 300 });
    const anonymous = await connect(h.gateway.url);
    const silent = await connect(h.gateway.url, { hello: false });
    const later = await connect(h.gateway.url);
    expect(await later.request('authenticate', { token: await token({ read: ['*'] }) })).toMatchObject({ type: 'result' });
    expect(await anonymous.closed).toMatchObject({ code: 4408, reason: 'authentication timeout' });
    expect((await silent.closed).code).toBe(4408);
    // The one that authenticated stays past the timeout: a ping after both closes proves it.
    await later.ping();
    expect(later.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('with EVENTFLOW_AUTH_ANONYMOUS rights, anonymous connections are intended and do not time out', async () => {
    h = await startHarness({ ...jwt, EVENTFLOW_AUTH_TIMEOUT_MS: 200, EVENTFLOW_AUTH_ANONYMOUS: 'read', EVENTFLOW_HANDSHAKE_TIMEOUT_MS: 200 });
    const anonymous = await connect(h.gateway.url);
    const silent = await connect(h.gateway.url, { hello: false });
    // The silent one is closed by the handshake timeout (4000); the anonymous one is still served after that.
    expect((await silent.closed).code).toBe(4000);
    await anonymous.ping();
  });
});

describe('a well-behaved client while another connection sends the heaviest frames the defaults allow', () => {
  /** Pings from a well-behaved connection for `ms` while another sends ~1 MiB frames as fast as the gateway reads them. */
  async function underLoad(config: Record<string, string | number>, ms: number): Promise<{ p50: number; p90: number; max: number; sent: number; answered: number }> {
    h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0, ...config });
    const heavy = await connect(h.gateway.url, { onFrame: () => void answered++ });
    const client = await connect(h.gateway.url);
    // The heaviest frames under EVENTFLOW_MAX_FRAME_BYTES (1 MiB): one of the most values that fit
    // (refused unparsed by default: too many values) and a valid one of 10,000 (EVENTFLOW_MAX_DATA_KEYS).
    const dense = JSON.stringify({ type: 'request', id: 1, op: 'publish', params: { event: event(wide(75_000)) } });
    const valid = JSON.stringify({ type: 'request', id: 2, op: 'publish', params: { event: event(wide(10_000, 90), { pid: 'heavy' }) } });
    expect(dense.length).toBeLessThan(1024 * 1024);
    expect(valid.length).toBeLessThan(1024 * 1024);
    let answered = 0;
    let sending = true;
    let sent = 0;
    const flood = (async () => {
      while (sending) {
        if (heavy.ws.bufferedAmount < 2 * 1024 * 1024) heavy.sendRaw(sent++ % 2 === 0 ? dense : valid);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const latencies: number[] = [];
    const until = performance.now() + ms;
    while (performance.now() < until) {
      const started = performance.now();
      await client.ping();
      latencies.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    sending = false;
    await flood;
    await h.stop();
    h = undefined;
    latencies.sort((a, b) => a - b);
    const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] ?? 0;
    return { p50: at(0.5), p90: at(0.9), max: latencies.at(-1) ?? 0, sent, answered };
  }

  it('its round trips stay fast (measured against the same load with these limits off)', async () => {
    const format = (r: { p50: number; p90: number; max: number; sent: number; answered: number }): string =>
      `heavy frames sent ${r.sent}, answered ${r.answered}; pings p50 ${r.p50.toFixed(1)} ms, p90 ${r.p90.toFixed(1)} ms, max ${r.max.toFixed(1)} ms`;
    const off = await underLoad({ EVENTFLOW_MAX_RECEIVE_RATE: 0, EVENTFLOW_MAX_DATA_KEYS: 1_000_000 }, 3_000);
    const defaults = await underLoad({}, 3_000);
    console.log(`limits off (as before): ${format(off)}\ndefaults: ${format(defaults)}`);
    // At 1 MiB/s the heavy connection gets about one frame a second; the dense ones cost a ~3 ms scan.
    expect(defaults.p50).toBeLessThan(50);
    expect(defaults.p50).toBeLessThan(off.p50);
    expect(defaults.answered).toBeLessThan(defaults.sent);
  }, 60_000);
});
