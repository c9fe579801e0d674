/**
 * The gateway's per-connection limits and the Origin check, over real WebSockets to a real
 * gateway: every breach is answered with a coded error frame carrying the request id, the
 * connection keeps serving, and nothing beyond what was allowed is stored. Talks to the gateway
 * with `ws` directly, not through the client.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { EventflowError } from '@eventflow/core';
import { createLogger, parseConfig, startGateway } from '../src/index.js';
import { TokenBucket } from '../src/connection/limits.js';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { connect as connectRaw, type Conn } from '@eventflow/test-support/raw-socket';

const sockets: WebSocket[] = [];

async function connect(url: string, options: WebSocket.ClientOptions = {}): Promise<Conn> {
  const conn = await connectRaw(url, { client: 'limits-test', ...options });
  sockets.push(conn.ws);
  return conn;
}

/** Attempts a WebSocket upgrade; resolves with 101 when it opened, else the HTTP status it got. */
async function upgradeStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  const ws = new WebSocket(url, { headers });
  sockets.push(ws);
  return new Promise<number>((resolve, reject) => {
    ws.once('open', () => resolve(101));
    ws.once('unexpected-response', (_request, response) => {
      resolve(response.statusCode ?? 0);
      response.resume();
      ws.terminate();
    });
    ws.once('error', reject);
  });
}

const event = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({ domain: 'orders', name: 'placed', pid: 'p1', data: { amount: 1 }, ...overrides });

let h: Harness | undefined;
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  await h?.stop();
  h = undefined;
  vi.restoreAllMocks();
});

async function harness(config: Record<string, string | number>): Promise<Harness> {
  return (h = await startHarness(config));
}

describe('EVENTFLOW_MAX_SUBSCRIPTIONS: subscriptions + consumers + waits per connection', () => {
  it('one registration beyond the limit → E_EVENTFLOW_LIMIT_EXCEEDED with the request id; re-registering an existing one is free', async () => {
    const { gateway } = await harness({ EVENTFLOW_MAX_SUBSCRIPTIONS: 3 });
    const conn = await connect(gateway.url);
    expect(await conn.request('subscribe', { domain: 'orders', name: 'placed' })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribe', { domain: 'orders', name: '*' })).toMatchObject({ type: 'result' });
    expect(await conn.request('consume', { consumer: 'c1', domain: 'orders', name: 'placed' })).toMatchObject({ type: 'result' });
    // Idempotent repeats of existing registrations do not count again.
    expect(await conn.request('subscribe', { domain: 'orders', name: 'placed' })).toMatchObject({ type: 'result' });
    expect(await conn.request('consume', { consumer: 'c1', domain: 'orders', name: 'placed' })).toMatchObject({ type: 'result' });

    const attempts: [string, Record<string, unknown>][] = [
      ['subscribe', { domain: 'billing', name: 'paid' }],
      ['consume', { consumer: 'c2', domain: 'billing', name: 'paid' }],
      ['wait', { wait: 'w1', domain: 'orders', pid: 'p1', names: ['done'] }],
    ];
    for (const [op, params] of attempts) {
      const id = conn.sendRequest(op, params);
      const error = await conn.answer(id);
      expect(error, op).toMatchObject({
        type: 'error',
        id,
        code: 'E_EVENTFLOW_LIMIT_EXCEEDED',
        details: { limit: 'EVENTFLOW_MAX_SUBSCRIPTIONS', value: 3 },
      });
      expect(error.message).toContain('EVENTFLOW_MAX_SUBSCRIPTIONS');
    }
    await conn.ping();
    expect(gateway.dispatcher.stats).toMatchObject({ subscriptions: 2, consumers: 1, waits: 0 });
    expect(await gateway.store.head()).toBe(0);

    // Removing one makes room for another.
    expect(await conn.request('unsubscribe', { domain: 'orders', name: '*' })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribe', { domain: 'billing', name: 'paid' })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribe', { domain: 'billing', name: 'refunded' })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });

    // The limit is per connection.
    const other = await connect(gateway.url);
    for (const name of ['a', 'b', 'c']) expect(await other.request('subscribe', { domain: 'billing', name })).toMatchObject({ type: 'result' });
    await conn.ping();
  });

  it('waits count until they are waited or cancelled', async () => {
    const { gateway } = await harness({ EVENTFLOW_MAX_SUBSCRIPTIONS: 2 });
    const conn = await connect(gateway.url);
    expect(await conn.request('wait', { wait: 'w1', domain: 'orders', pid: 'p1', names: ['done'] })).toMatchObject({ type: 'result' });
    expect(await conn.request('wait', { wait: 'w2', domain: 'orders', pid: 'p2', names: ['done'] })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribe', { domain: 'orders', name: 'done' })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });

    expect(await conn.request('cancelWait', { wait: 'w1' })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribe', { domain: 'orders', name: 'done' })).toMatchObject({ type: 'result' });
    expect(await conn.request('wait', { wait: 'w3', domain: 'orders', pid: 'p3', names: ['done'] })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });

    // w2 is answered: its slot is free again.
    expect(await conn.request('publish', { event: event({ name: 'done', pid: 'p2' }) })).toMatchObject({ type: 'result' });
    await conn.next((frame) => frame.type === 'waited' && frame.wait === 'w2');
    expect(await conn.request('wait', { wait: 'w3', domain: 'orders', pid: 'p3', names: ['done'] })).toMatchObject({ type: 'result' });
    await eventually(() => gateway.dispatcher.stats.waits === 1, 2_000, 'one wait left');
  });

  it('registrations sent all at once cannot together pass the limit', async () => {
    const { gateway } = await harness({ EVENTFLOW_MAX_SUBSCRIPTIONS: 3 });
    const conn = await connect(gateway.url);
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'].map((name) => conn.sendRequest('subscribe', { domain: 'orders', name, after: 0 }));
    const answers = await Promise.all(ids.map((id) => conn.answer(id)));
    expect(answers.filter((frame) => frame.type === 'result')).toHaveLength(3);
    expect(answers.filter((frame) => frame.code === 'E_EVENTFLOW_LIMIT_EXCEEDED')).toHaveLength(3);
    expect(gateway.dispatcher.stats.subscriptions).toBe(3);
    await conn.ping();
  });
});

describe('EVENTFLOW_MAX_IN_FLIGHT: unanswered requests per connection', () => {
  it('a request beyond the limit is refused at once; the pending ones are answered; the connection stays usable', async () => {
    const { gateway } = await harness({ EVENTFLOW_MAX_IN_FLIGHT: 2 });
    const conn = await connect(gateway.url);
    expect(await conn.request('publish', { event: event({ id: 'e1' }) })).toMatchObject({ type: 'result' });

    // A slow store keeps two reads unanswered.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const read = gateway.store.read.bind(gateway.store);
    const slowRead = vi.spyOn(gateway.store, 'read').mockImplementation(async (id) => {
      await gate;
      return read(id);
    });
    const pending = [conn.sendRequest('read', { id: 'e1' }), conn.sendRequest('read', { id: 'e1' })];
    await eventually(() => slowRead.mock.calls.length === 2, 2_000, 'two reads in the store');

    for (const [op, params] of [
      ['ping', {}],
      ['publish', { event: event({ id: 'e2' }) }],
      ['subscribe', { domain: 'orders', name: 'placed' }],
    ] as const) {
      const id = conn.sendRequest(op, params);
      expect(await conn.answer(id), op).toMatchObject({
        type: 'error',
        id,
        code: 'E_EVENTFLOW_LIMIT_EXCEEDED',
        details: { limit: 'EVENTFLOW_MAX_IN_FLIGHT', value: 2 },
      });
    }
    // Refused without waiting for the pending ones.
    expect(conn.frames.filter((frame) => pending.includes(frame.id ?? -1))).toEqual([]);

    open();
    for (const id of pending) expect(await conn.answer(id)).toMatchObject({ type: 'result', result: { event: { id: 'e1' } } });
    await conn.ping();
    expect(await gateway.store.head()).toBe(1);
    expect(gateway.dispatcher.stats.subscriptions).toBe(0);
    expect(await conn.request('publish', { event: event({ id: 'e3' }) })).toMatchObject({ type: 'result', result: { position: 2 } });
  });
});

describe('EVENTFLOW_MAX_PUBLISH_RATE: events per second per connection', () => {
  it('a burst above the rate → E_EVENTFLOW_RATE_LIMITED with retryAfterMs; the bucket refills over time', async () => {
    const { gateway } = await harness({ EVENTFLOW_MAX_PUBLISH_RATE: 5 });
    const conn = await connect(gateway.url);
    const ids = Array.from({ length: 8 }, (_, i) => conn.sendRequest('publish', { event: event({ id: `e${i}` }) }));
    ids.push(conn.sendRequest('persist', { event: event({ id: 'persisted' }) }));
    ids.push(conn.sendRequest('schedule', { at: new Date(Date.now() + 60_000).toISOString(), event: event({ id: 'scheduled' }) }));
    const answers = await Promise.all(ids.map((id) => conn.answer(id)));
    expect(answers.slice(0, 5).map((frame) => frame.type)).toEqual(['result', 'result', 'result', 'result', 'result']);
    const limited = answers.slice(5);
    for (const [index, frame] of limited.entries()) {
      expect(frame).toMatchObject({ type: 'error', id: ids[5 + index], code: 'E_EVENTFLOW_RATE_LIMITED', details: { limit: 'EVENTFLOW_MAX_PUBLISH_RATE', value: 5 } });
      expect(frame.details?.retryAfterMs).toBeGreaterThan(0);
      expect(frame.details?.retryAfterMs).toBeLessThanOrEqual(200); // one token at 5 per second
    }
    await conn.ping();
    expect(await gateway.store.head()).toBe(5);
    expect(await gateway.store.read('persisted')).toBeUndefined();
    expect(await gateway.store.read('scheduled')).toBeUndefined();

    // Other operations are not rate limited.
    expect(await conn.request('read', { id: 'e0' })).toMatchObject({ type: 'result' });

    // After retryAfterMs one more write goes through.
    const retryAfterMs = limited.at(-1)?.details?.retryAfterMs as number;
    // Time is what is tested here and below: the rate window reopens.
    await new Promise((resolve) => setTimeout(resolve, retryAfterMs + 20));
    expect(await conn.request('publish', { event: event({ id: 'e5' }) })).toMatchObject({ type: 'result', result: { position: 6 } });
    expect(await conn.request('publish', { event: event({ id: 'e6' }) })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_RATE_LIMITED' });

    // After a second the full burst is available again; another connection has its own bucket.
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    const again = Array.from({ length: 5 }, (_, i) => conn.sendRequest('publish', { event: event({ id: `f${i}` }) }));
    for (const id of again) expect(await conn.answer(id)).toMatchObject({ type: 'result' });
    const other = await connect(gateway.url);
    expect(await other.request('persist', { event: event({ id: 'other' }) })).toMatchObject({ type: 'result' });
    expect(await gateway.store.head()).toBe(12);
  });

  it('0 means unlimited', async () => {
    const { gateway } = await harness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const conn = await connect(gateway.url);
    const ids = Array.from({ length: 100 }, (_, i) => conn.sendRequest('publish', { event: event({ id: `e${i}` }) }));
    for (const id of ids) expect(await conn.answer(id)).toMatchObject({ type: 'result' });
    expect(await gateway.store.head()).toBe(100);
  });

  it('the token bucket: burst = rate, continuous refill, retry time of the next token', () => {
    let now = 0;
    const bucket = new TokenBucket(4, () => now);
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([0, 0, 0, 0]);
    expect(bucket.take()).toBe(250);
    now = 100;
    expect(bucket.take()).toBe(150);
    now = 250;
    expect(bucket.take()).toBe(0);
    now = 60_000; // never more than the burst
    expect([0, 1, 2, 3, 4].map(() => bucket.take())).toEqual([0, 0, 0, 0, 250]);
  });
});

describe('EVENTFLOW_ALLOWED_ORIGINS: the Origin check of WebSocket upgrades', () => {
  it('default: no Origin (non-browser clients) and loopback pages connect; other origins get 403', async () => {
    const { gateway } = await harness({});
    await (await connect(gateway.url)).ping();
    for (const origin of ['http://localhost', 'http://localhost:5173', 'https://localhost:8443', 'http://127.0.0.1:8080', 'http://[::1]:3000']) {
      expect(await upgradeStatus(gateway.url, { Origin: origin }), origin).toBe(101);
    }
    await (await connect(gateway.url, { origin: 'http://localhost:5173' })).ping();
    for (const origin of ['https://evil.example', 'http://localhost.evil.example', 'http://127.0.0.2', 'null', 'file://', 'http://localhost:5173/path', '']) {
      expect(await upgradeStatus(gateway.url, { Origin: origin }), origin).toBe(403);
    }
  });

  it('a list: exactly its origins (loopback no longer implied); requests without Origin still connect', async () => {
    const { gateway } = await harness({ EVENTFLOW_ALLOWED_ORIGINS: 'https://app.example.com, http://localhost:3000' });
    expect(await upgradeStatus(gateway.url, { Origin: 'https://app.example.com' })).toBe(101);
    expect(await upgradeStatus(gateway.url, { Origin: 'http://localhost:3000' })).toBe(101);
    await (await connect(gateway.url, { origin: 'https://app.example.com' })).ping();
    for (const origin of ['https://other.example.com', 'http://app.example.com', 'https://app.example.com:8443', 'http://localhost:4000', 'http://127.0.0.1:3000']) {
      expect(await upgradeStatus(gateway.url, { Origin: origin }), origin).toBe(403);
    }
    await (await connect(gateway.url)).ping();
  });

  it("pages the gateway served itself connect: an Origin that is the upgrade's own Host, a name EVENTFLOW_ALLOWED_HOSTS takes", async () => {
    // As with EVENTFLOW_HOST=0.0.0.0 (gateway/README.md's own example): the dashboard opened at http://0.0.0.0:<port>/, or at the
    // machine's address from another host. Before: the console and the demo dashboard it served were refused 403.
    const { gateway } = await harness({});
    const { port } = gateway;
    for (const host of [`0.0.0.0:${port}`, `192.0.2.2:${port}`, `[::1]:${port}`]) {
      expect(await upgradeStatus(gateway.url, { Host: host, Origin: `http://${host}` }), host).toBe(101);
    }
    // A page of another site (its name rebound to the gateway's address), another address, another port, a scheme not a page's.
    for (const [host, origin] of [
      [`evil.example:${port}`, `http://evil.example:${port}`],
      [`192.0.2.2:${port}`, `http://192.0.2.9:${port}`],
      [`192.0.2.2:${port}`, `http://192.0.2.2:${port + 1}`],
      [`192.0.2.2:${port}`, `ftp://192.0.2.2:${port}`],
    ]) {
      expect(await upgradeStatus(gateway.url, { Host: host!, Origin: origin! }), `${origin} to ${host}`).toBe(403);
    }
    // A name EVENTFLOW_ALLOWED_HOSTS lists is the gateway's, behind a proxy that ends TLS say.
    const named = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: ':memory:', EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_ALLOWED_HOSTS: 'gw.example.com' });
    try {
      expect(await upgradeStatus(named.url, { Host: 'gw.example.com', Origin: 'https://gw.example.com' })).toBe(101);
    } finally {
      await named.close();
    }
  });

  it('* allows any origin', async () => {
    const { gateway } = await harness({ EVENTFLOW_ALLOWED_ORIGINS: '*' });
    for (const origin of ['https://evil.example', 'null', 'http://localhost:1']) expect(await upgradeStatus(gateway.url, { Origin: origin }), origin).toBe(101);
    await (await connect(gateway.url, { origin: 'https://anything.example' })).ping();
  });

  it('a refused upgrade opens no connection and is logged', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'eventflow-limits-'));
    const lines: string[] = [];
    const gateway = await startGateway(
      { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: join(dir, 'eventflow.db') },
      { logger: createLogger('warn', {}, (line) => lines.push(line)) },
    );
    try {
      const connected = vi.fn();
      const ws = new WebSocket(gateway.url, { origin: 'https://evil.example' });
      sockets.push(ws);
      ws.on('error', () => undefined);
      ws.on('open', connected);
      const status = await new Promise<number>((resolve) => ws.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0)));
      expect(status).toBe(403);
      // No wait needed: the 403 was the handshake's one answer, and 'open' only follows a 101.
      expect(connected).not.toHaveBeenCalled();
      const refused = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => String(entry.msg).includes('origin not allowed'));
      expect(refused).toHaveLength(1);
      expect(refused[0]).toMatchObject({ level: 'warn', origin: 'https://evil.example' });
      // The gateway serves others as before.
      await (await connect(gateway.url)).ping();
    } finally {
      for (const socket of sockets.splice(0)) socket.terminate();
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('configuration', () => {
  it('documented defaults', () => {
    const config = parseConfig({});
    expect(config).toMatchObject({ EVENTFLOW_MAX_SUBSCRIPTIONS: 1000, EVENTFLOW_MAX_IN_FLIGHT: 256, EVENTFLOW_MAX_PUBLISH_RATE: 1000 });
    expect(config.EVENTFLOW_ALLOWED_ORIGINS).toBeUndefined();
    expect(parseConfig({ EVENTFLOW_ALLOWED_ORIGINS: '' }).EVENTFLOW_ALLOWED_ORIGINS).toBeUndefined();
    expect(parseConfig({ EVENTFLOW_ALLOWED_ORIGINS: ' https://a.example ,http://localhost:3000,' }).EVENTFLOW_ALLOWED_ORIGINS).toEqual(['https://a.example', 'http://localhost:3000']);
    expect(parseConfig({ EVENTFLOW_MAX_PUBLISH_RATE: '0', EVENTFLOW_MAX_IN_FLIGHT: '1', EVENTFLOW_MAX_SUBSCRIPTIONS: '1' })).toMatchObject({
      EVENTFLOW_MAX_PUBLISH_RATE: 0,
      EVENTFLOW_MAX_IN_FLIGHT: 1,
      EVENTFLOW_MAX_SUBSCRIPTIONS: 1,
    });
  });

  it.each([
    ['EVENTFLOW_MAX_SUBSCRIPTIONS', '0'],
    ['EVENTFLOW_MAX_SUBSCRIPTIONS', 'many'],
    ['EVENTFLOW_MAX_IN_FLIGHT', '-1'],
    ['EVENTFLOW_MAX_IN_FLIGHT', '2.5'],
    ['EVENTFLOW_MAX_PUBLISH_RATE', '-1'],
    ['EVENTFLOW_MAX_PUBLISH_RATE', 'fast'],
    ['EVENTFLOW_ALLOWED_ORIGINS', 'https://app.example.com/'],
    ['EVENTFLOW_ALLOWED_ORIGINS', 'app.example.com'],
    ['EVENTFLOW_ALLOWED_ORIGINS', 'HTTPS://APP.EXAMPLE.COM'],
    ['EVENTFLOW_ALLOWED_ORIGINS', 'https://app.example.com:443'],
    ['EVENTFLOW_ALLOWED_ORIGINS', ' , '],
  ])('%s=%j is refused, naming the variable', async (variable, value) => {
    const refused = (() => {
      try {
        parseConfig({ [variable]: value });
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(EventflowError);
    expect(refused).toMatchObject({ code: 'E_EVENTFLOW_CONFIG' });
    expect((refused as Error).message).toContain(variable);
    await expect(startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: ':memory:', EVENTFLOW_LOG_LEVEL: 'silent', [variable]: value })).rejects.toMatchObject({
      code: 'E_EVENTFLOW_CONFIG',
      message: expect.stringContaining(variable),
    });
  });
});
