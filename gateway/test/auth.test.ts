/**
 * Token authentication and per-action authorization, against real gateways (EVENTFLOW_AUTH=jwt)
 * over real WebSockets: an authorization matrix of action × domain × token state, asserting the
 * exact error code and that no event data reaches a connection that may not see it; an ES256
 * gateway; token refresh through the client's callback on reconnect; and expiry (close 4401).
 */
import { exportSPKI, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createClient, isEventflowError, type EventflowClient } from '@eventflow/core';
import { parseConfig } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

const SECRET = 'test-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const OTHER_SECRET = 'forged-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const ACTIONS = ['read', 'subscribe', 'publish', 'consume', 'schedule', 'delete'] as const;
type Action = (typeof ACTIONS)[number];
type Claims = { [A in Action]?: string[] };

async function hs256(claims: Claims | undefined, { secret = SECRET, expiresIn = '1h' }: { secret?: string; expiresIn?: string | number } = {}): Promise<string> {
  return new SignJWT(claims === undefined ? {} : { eventflow: claims })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime(expiresIn)
    .sign(new TextEncoder().encode(secret));
}

interface Frame {
  type: string;
  id?: number;
  code?: string;
  result?: Record<string, unknown>;
  [key: string]: unknown;
}

interface Raw {
  readonly frames: Frame[];
  readonly closed: Promise<{ code: number; reason: string }>;
  request(op: string, params: unknown): Promise<Frame>;
  close(): void;
}

let nextId = 1;

/** A raw connection that sends hello (with `token` when given) and resolves once welcomed or refused. */
async function raw(url: string, token: string | undefined): Promise<{ conn: Raw; welcome: Frame }> {
  const ws = new WebSocket(url);
  const frames: Frame[] = [];
  const wakers = new Set<() => void>();
  ws.on('message', (data) => {
    frames.push(JSON.parse(data.toString()) as Frame);
    for (const wake of wakers) wake();
  });
  ws.on('error', () => undefined);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const next = (predicate: (frame: Frame) => boolean): Promise<Frame> =>
    new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = frames.find(predicate);
        if (found) {
          wakers.delete(wake);
          clearTimeout(timer);
          resolve(found);
        }
        return Boolean(found);
      };
      const wake = (): void => void check();
      const timer = setTimeout(() => {
        wakers.delete(wake);
        reject(new Error(`no matching frame; got ${JSON.stringify(frames).slice(0, 1000)}`));
      }, 3_000);
      wakers.add(wake);
      check();
    });
  ws.send(JSON.stringify({ type: 'hello', protocol: 1, ...(token === undefined ? {} : { token }) }));
  const welcome = await next((frame) => frame.type === 'welcome' || (frame.type === 'error' && frame.id === undefined));
  return {
    welcome,
    conn: {
      frames,
      closed,
      request(op, params) {
        const id = nextId++;
        ws.send(JSON.stringify({ type: 'request', id, op, params }));
        return next((frame) => frame.id === id);
      },
      close: () => ws.close(),
    },
  };
}

const sockets: Raw[] = [];
async function open(url: string, token: string | undefined): Promise<Raw> {
  const { conn, welcome } = await raw(url, token);
  sockets.push(conn);
  expect(welcome.type).toBe('welcome');
  return conn;
}

/** One request per action, on `domain`; `seed` are the ids of events stored there. */
function requestFor(action: Action, domain: string, seed: { id: string; pid: string }): [string, unknown] {
  const event = { domain, name: 'placed', pid: `p-${nextId++}`, data: { n: 1 } };
  switch (action) {
    case 'read':
      return ['read', { id: seed.id }];
    case 'subscribe':
      return ['subscribe', { domain, name: '*', after: 0 }];
    case 'publish':
      return ['publish', { event }];
    case 'consume':
      return ['consume', { consumer: `c-${nextId++}`, domain, name: 'placed' }];
    case 'schedule':
      return ['schedule', { at: new Date(Date.now() + 3_600_000).toISOString(), event }];
    case 'delete':
      return ['deleteEventlog', { domain, pid: `nothing-${nextId++}` }];
  }
}

describe('authorization (EVENTFLOW_AUTH=jwt, HS256)', () => {
  let harness: Harness;
  /** Per domain, an event whose data holds a marker that must never reach an unauthorized connection. */
  const seeded: Record<string, { id: string; pid: string; marker: string }> = {};

  beforeAll(async () => {
    harness = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET });
    const admin = await open(harness.gateway.url, await hs256({ publish: ['*'] }));
    for (const domain of ['orders', 'billing']) {
      const marker = `SECRET-${domain}-${Math.random()}`;
      const answer = await admin.request('publish', { event: { domain, name: 'placed', pid: `seed-${domain}`, data: { marker } } });
      expect(answer.type).toBe('result');
      seeded[domain] = { id: answer.result!['id'] as string, pid: `seed-${domain}`, marker };
    }
  });

  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await harness.stop();
  });

  const noMarkers = (conn: Raw, domain: string): void => {
    expect(JSON.stringify(conn.frames)).not.toContain(seeded[domain]!.marker);
  };

  for (const action of ACTIONS) {
    describe(action, () => {
      it('valid token: allowed on a matching domain, E_EVENTFLOW_FORBIDDEN elsewhere (a foreign id: not found) with no data', async () => {
        const conn = await open(harness.gateway.url, await hs256({ [action]: ['ord*'] }));
        const [op, params] = requestFor(action, 'orders', seeded['orders']!);
        const ok = await conn.request(op, params);
        expect(ok.type, JSON.stringify(ok)).toBe('result');
        const [deniedOp, deniedParams] = requestFor(action, 'billing', seeded['billing']!);
        const refused = await conn.request(deniedOp, deniedParams);
        // `read` names an event by id: one of a domain the token cannot see is answered as an unknown id.
        expect(refused).toMatchObject({ type: 'error', code: action === 'read' ? 'E_EVENTFLOW_EVENT_NOT_FOUND' : 'E_EVENTFLOW_FORBIDDEN' });
        if (action === 'read') expect(ok.result!['event']).toMatchObject({ data: { marker: seeded['orders']!.marker } });
        // Kept: a replay is sent asynchronously after a result, and a refused domain has no
        // stream to send a marker down; a fence would prove less than this wait.
        await new Promise((resolve) => setTimeout(resolve, 50)); // a replay would have arrived by now
        noMarkers(conn, 'billing');
      });

      it('valid token without this action: E_EVENTFLOW_FORBIDDEN on every domain', async () => {
        const other = ACTIONS.filter((candidate) => candidate !== action);
        const conn = await open(harness.gateway.url, await hs256(Object.fromEntries(other.map((name) => [name, ['*']]))));
        for (const domain of ['orders', 'billing']) {
          const [op, params] = requestFor(action, domain, seeded[domain]!);
          expect(await conn.request(op, params)).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_FORBIDDEN' });
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
        noMarkers(conn, 'orders');
        noMarkers(conn, 'billing');
      });

      it('no token (anonymous, nothing allowed by default): E_EVENTFLOW_UNAUTHORIZED', async () => {
        const conn = await open(harness.gateway.url, undefined);
        for (const domain of ['orders', 'billing']) {
          const [op, params] = requestFor(action, domain, seeded[domain]!);
          expect(await conn.request(op, params)).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNAUTHORIZED' });
        }
        expect(await conn.request('ping', {})).toMatchObject({ type: 'result' });
        noMarkers(conn, 'orders');
        noMarkers(conn, 'billing');
      });
    });
  }

  const refusedTokens: Array<[string, () => Promise<string>]> = [
    ['expired', () => hs256({ read: ['*'] }, { expiresIn: Math.floor(Date.now() / 1000) - 60 })],
    ['forged (wrong key)', () => hs256({ read: ['*'] }, { secret: OTHER_SECRET })],
    ['tampered claims', async () => {
      const [header, , signature] = (await hs256({ read: ['orders'] })).split('.');
      const payload = Buffer.from(JSON.stringify({ eventflow: { read: ['*'] }, exp: Math.floor(Date.now() / 1000) + 3600 })).toString('base64url');
      return `${header}.${payload}.${signature}`;
    }],
    ['unsigned (alg none)', async () => `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ eventflow: { read: ['*'] } })).toString('base64url')}.`],
    ['garbage', async () => 'not-a-jwt'],
    ['malformed eventflow claim', () => hs256({ read: 'orders' } as unknown as Claims)],
  ];
  for (const [state, make] of refusedTokens) {
    it(`${state} token: hello refused with E_EVENTFLOW_UNAUTHORIZED, close 4401, no data`, async () => {
      const { conn, welcome } = await raw(harness.gateway.url, await make());
      expect(welcome).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNAUTHORIZED' });
      expect(await conn.closed).toEqual({ code: 4401, reason: 'unauthorized' });
      expect(conn.frames.map((frame) => frame.type)).toEqual(['error']);
    });
  }

  const malformedClaims: Array<[string, unknown, string]> = [
    ['a string for an array', { consume: 'orders' }, 'eventflow.consume'],
    ['an empty pattern', { read: ['orders'], consume: ['orders', ''] }, 'eventflow.consume.1'],
    ['a pattern of 257 characters', { manage: ['x'.repeat(257)] }, 'eventflow.manage.0'],
    ['1,001 patterns', { subscribe: Array.from({ length: 1001 }, () => 'a') }, 'eventflow.subscribe'],
    ['not an object', ['consume'], 'eventflow'],
  ];
  it.each(malformedClaims)('a claim with %s is refused saying where and what a valid one looks like', async (_what, claims, at) => {
    const { conn, welcome } = await raw(harness.gateway.url, await hs256(claims as Claims));
    // Before: 'the token's "eventflow" claim is malformed: it must map actions to arrays of domain patterns', for each.
    expect(welcome).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNAUTHORIZED' });
    expect(welcome['message']).toBe(
      `the token's "eventflow" claim is malformed at ${at}: it must map actions to arrays of at most 1000 domain patterns of 1 to 256 characters, e.g. { "consume": ["billing-*"] }; get a token with such a claim and reconnect`,
    );
    expect(await conn.closed).toEqual({ code: 4401, reason: 'unauthorized' });
  });

  it('a token longer than 8192 characters is refused as unauthorized, saying so: in hello with close 4401, in authenticate keeping the old rights', async () => {
    const long = await hs256({ consume: Array.from({ length: 900 }, (_, i) => `tenant-${i}`) });
    expect(long.length).toBeGreaterThan(8192);
    const expected = `the token has ${long.length} characters, more than the 8192 a gateway accepts: give it fewer or shorter grants (a pattern with * covers many domains) and reconnect`;
    const { conn, welcome } = await raw(harness.gateway.url, long);
    // Before: E_EVENTFLOW_INVALID_FRAME "token: Too big: expected string to have <=8192 characters", and the
    // connection stayed open until its handshake timeout (4000), so the client reconnected with the same token.
    expect(welcome).toEqual({ type: 'error', code: 'E_EVENTFLOW_UNAUTHORIZED', message: expected });
    expect(await conn.closed).toEqual({ code: 4401, reason: 'unauthorized' });
    const live = await open(harness.gateway.url, await hs256({ read: ['orders'] }));
    expect(await live.request('authenticate', { token: long })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNAUTHORIZED', message: expected });
    expect(await live.request('readEventlog', { domain: 'orders', pid: 'nobody' })).toMatchObject({ type: 'result' });
  });

  it('read by id and delete by id check the event’s own domain first; nothing is deleted', async () => {
    const conn = await open(harness.gateway.url, await hs256({ read: ['orders'], delete: ['orders'] }));
    // Answered exactly as an id that names no event (isolation.test.ts compares the frames).
    expect(await conn.request('read', { id: seeded['billing']!.id })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_EVENT_NOT_FOUND' });
    expect(await conn.request('delete', { id: seeded['billing']!.id })).toMatchObject({ type: 'result', result: { deleted: false } });
    expect(await harness.gateway.store.read(seeded['billing']!.id)).toBeDefined();
    expect(await conn.request('readEventlog', { domain: 'billing', pid: seeded['billing']!.pid })).toMatchObject({ code: 'E_EVENTFLOW_FORBIDDEN' });
    // readEventlogByEid spans domains: any read grant may ask, and gets the events of its domains only.
    expect(await conn.request('readEventlogByEid', { eid: 'e1' })).toMatchObject({ type: 'result', result: { events: [] } });
    noMarkers(conn, 'billing');
    const all = await open(harness.gateway.url, await hs256({ read: ['*'] }));
    expect(await all.request('readEventlogByEid', { eid: 'e1' })).toMatchObject({ type: 'result', result: { events: [] } });
  });

  it('a subscription only gets events of the domains it was allowed', async () => {
    const conn = await open(harness.gateway.url, await hs256({ subscribe: ['orders'] }));
    expect(await conn.request('subscribe', { domain: 'orders', name: '*' })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribe', { domain: 'billing', name: '*' })).toMatchObject({ code: 'E_EVENTFLOW_FORBIDDEN' });
    const writer = await open(harness.gateway.url, await hs256({ publish: ['*'] }));
    await writer.request('publish', { event: { domain: 'billing', name: 'placed', pid: 'live', data: { marker: 'LIVE-BILLING' } } });
    await writer.request('publish', { event: { domain: 'orders', name: 'placed', pid: 'live', data: { marker: 'LIVE-ORDERS' } } });
    await eventually(() => conn.frames.some((frame) => frame.type === 'event'));
    expect(JSON.stringify(conn.frames)).toContain('LIVE-ORDERS');
    expect(JSON.stringify(conn.frames)).not.toContain('LIVE-BILLING');
  });

  it('authenticate replaces the rights on a live connection; a bad token keeps the old ones', async () => {
    const conn = await open(harness.gateway.url, await hs256({ read: ['orders'] }));
    expect(await conn.request('authenticate', { token: 'bad' })).toMatchObject({ code: 'E_EVENTFLOW_UNAUTHORIZED' });
    expect(await conn.request('read', { id: seeded['orders']!.id })).toMatchObject({ type: 'result' });
    expect(await conn.request('authenticate', { token: await hs256({ read: ['billing'] }) })).toMatchObject({ type: 'result' });
    expect(await conn.request('read', { id: seeded['orders']!.id })).toMatchObject({ code: 'E_EVENTFLOW_EVENT_NOT_FOUND' });
    expect(await conn.request('read', { id: seeded['billing']!.id })).toMatchObject({ type: 'result' });
  });

  it('authenticate with narrower rights drops the subscriptions they no longer cover', async () => {
    const conn = await open(harness.gateway.url, await hs256({ subscribe: ['*'] }));
    expect(await conn.request('subscribe', { domain: 'billing', name: '*' })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribe', { domain: 'orders', name: '*' })).toMatchObject({ type: 'result' });
    expect(await conn.request('authenticate', { token: await hs256({ subscribe: ['orders'] }) })).toMatchObject({ type: 'result' });
    const writer = await open(harness.gateway.url, await hs256({ publish: ['*'] }));
    await writer.request('publish', { event: { domain: 'billing', name: 'placed', pid: 'narrow', data: { marker: 'NARROW-BILLING' } } });
    await writer.request('publish', { event: { domain: 'orders', name: 'placed', pid: 'narrow', data: { marker: 'NARROW-ORDERS' } } });
    await eventually(() => JSON.stringify(conn.frames).includes('NARROW-ORDERS'));
    expect(JSON.stringify(conn.frames)).not.toContain('NARROW-BILLING');
  });

  it('closes with 4401 when the token expires', async () => {
    // Valid for 1–2 s whatever the fraction of the current second (floor + 1 could expire before the welcome).
    const conn = await open(harness.gateway.url, await hs256({ read: ['*'] }, { expiresIn: Math.ceil(Date.now() / 1000) + 1 }));
    expect(await conn.closed).toEqual({ code: 4401, reason: 'token expired' });
  });

  it('the client asks its token callback again on every reconnect', async () => {
    const issued: string[] = [];
    const client: EventflowClient = harness.client({
      token: async () => {
        const token = await hs256({ publish: ['orders'], read: ['orders'] }, { expiresIn: `${3600 + issued.length}s` });
        issued.push(token);
        return token;
      },
    });
    const id = await client.publish({ domain: 'orders', name: 'placed', pid: 'refresh' });
    expect(issued).toHaveLength(1);
    await expect(client.publish({ domain: 'billing', name: 'placed', pid: 'refresh' })).rejects.toMatchObject({ code: 'E_EVENTFLOW_FORBIDDEN' });
    await harness.restart();
    await eventually(() => issued.length >= 2 && client.state === 'open', 10_000, 'reconnect with a new token');
    expect((await client.read(id)).id).toBe(id);
    expect(new Set(issued).size).toBe(issued.length);
  });

  it('the client reconnects with a fresh token when its token expires', async () => {
    let calls = 0;
    const client = harness.client({
      token: () => {
        calls++;
        return hs256({ publish: ['*'] }, { expiresIn: Math.ceil(Date.now() / 1000) + 1 });
      },
    });
    await client.publish({ domain: 'orders', name: 'placed', pid: 'expiry' });
    await eventually(() => calls >= 2 && client.state === 'open', 10_000, 'a reconnect after expiry');
    await client.publish({ domain: 'orders', name: 'placed', pid: 'expiry' });
  });

  it('a static bad token is reported as E_EVENTFLOW_UNAUTHORIZED through onError', async () => {
    const errors: unknown[] = [];
    const client = createClient(harness.gateway.url, { token: await hs256({}, { secret: OTHER_SECRET }), reconnect: { minDelay: 50, maxDelay: 100 }, onError: (error) => errors.push(error) });
    try {
      await eventually(() => errors.some((error) => isEventflowError(error, 'E_EVENTFLOW_UNAUTHORIZED')));
      expect(client.state).toBe('offline');
    } finally {
      await client.close();
    }
  });

  it('a refused handshake rejects the waiting calls, ready() and later calls at once with its own code and cause', async () => {
    const noExp = await new SignJWT({ eventflow: { publish: ['*'] } }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().sign(new TextEncoder().encode(SECRET));
    for (const [token, cause] of [[noExp, /exp/], [await hs256({ publish: ['*'] }, { secret: OTHER_SECRET }), /signature|verif/i]] as const) {
      const started = Date.now();
      const client = createClient(harness.gateway.url, { token, requestTimeout: 10_000, reconnect: { minDelay: 50, maxDelay: 100 }, onError: () => undefined });
      try {
        // Made before the refusal: it was waiting for the connection.
        const waiting = client.publish({ domain: 'orders', name: 'placed', pid: 'refused' }).catch((error: unknown) => error);
        const ready = client.ready().catch((error: unknown) => error);
        for (const error of [await waiting, await ready]) {
          expect(error).toMatchObject({ code: 'E_EVENTFLOW_UNAUTHORIZED', message: expect.stringMatching(cause) });
        }
        expect(await waiting).toMatchObject({ message: expect.stringMatching(/^publish: handshake refused by the gateway: E_EVENTFLOW_UNAUTHORIZED/) });
        // Made after it: at once, while the client keeps retrying in the background.
        await expect(client.readEventlog('orders', 'refused')).rejects.toMatchObject({ code: 'E_EVENTFLOW_UNAUTHORIZED' });
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(client.state).toBe('offline');
      } finally {
        await client.close();
      }
    }
  });
});

describe('anonymous access and other keys', () => {
  it('EVENTFLOW_AUTH_ANONYMOUS grants the listed actions to connections without a token', async () => {
    const harness = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_AUTH_ANONYMOUS: 'read, subscribe' });
    try {
      const conn = await open(harness.gateway.url, undefined);
      expect(await conn.request('readEventlog', { domain: 'any', pid: 'p' })).toMatchObject({ type: 'result' });
      expect(await conn.request('subscribe', { domain: 'any', name: '*' })).toMatchObject({ type: 'result' });
      expect(await conn.request('publish', { event: { domain: 'any', name: 'x', pid: 'p' } })).toMatchObject({ code: 'E_EVENTFLOW_UNAUTHORIZED' });
      conn.close();
    } finally {
      await harness.stop();
    }
  });

  it('EVENTFLOW_AUTH=none (default) keeps anonymous full access, and tokens are ignored', async () => {
    const harness = await startHarness();
    try {
      const conn = await open(harness.gateway.url, 'whatever');
      expect(await conn.request('publish', { event: { domain: 'any', name: 'x', pid: 'p' } })).toMatchObject({ type: 'result' });
      conn.close();
    } finally {
      await harness.stop();
    }
  });

  it('ES256: accepts tokens of its key only, and refuses HS256 tokens (no algorithm confusion)', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const other = await generateKeyPair('ES256');
    const pem = await exportSPKI(publicKey);
    const harness = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_PUBLIC_KEY: pem.replace(/\n/g, '\\n'), EVENTFLOW_JWT_ISSUER: 'issuer-1' });
    const es256 = (key: CryptoKey, issuer = 'issuer-1'): Promise<string> =>
      new SignJWT({ eventflow: { publish: ['orders'] } }).setProtectedHeader({ alg: 'ES256' }).setIssuer(issuer).setExpirationTime('1h').sign(key);
    try {
      const conn = await open(harness.gateway.url, await es256(privateKey));
      expect(await conn.request('publish', { event: { domain: 'orders', name: 'x', pid: 'p' } })).toMatchObject({ type: 'result' });
      expect(await conn.request('publish', { event: { domain: 'billing', name: 'x', pid: 'p' } })).toMatchObject({ code: 'E_EVENTFLOW_FORBIDDEN' });
      conn.close();
      for (const token of [await es256(other.privateKey), await es256(privateKey, 'someone-else'), await hs256({ publish: ['*'] }, { secret: pem })]) {
        const { conn: refused, welcome } = await raw(harness.gateway.url, token);
        expect(welcome).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNAUTHORIZED' });
        expect((await refused.closed).code).toBe(4401);
      }
    } finally {
      await harness.stop();
    }
  });

  it('config: jwt needs exactly one key, and anonymous actions are checked', () => {
    expect(() => parseConfig({ EVENTFLOW_AUTH: 'jwt' })).toThrow(/EVENTFLOW_AUTH/);
    expect(() => parseConfig({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: 'short' })).toThrow(/EVENTFLOW_JWT_SECRET/);
    expect(() => parseConfig({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_AUTH_ANONYMOUS: 'read,fly' })).toThrow(/EVENTFLOW_AUTH_ANONYMOUS="read,fly": unknown action/);
    expect(parseConfig({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_AUTH_ANONYMOUS: 'read' }).EVENTFLOW_AUTH_ANONYMOUS).toEqual(['read']);
  });
});
