/**
 * Tenant isolation with EVENTFLOW_AUTH=jwt, tried as an attacker holding a token for one domain
 * would: reads that span domains return only readable events; an id of another domain is
 * answered exactly like an id that names nothing; pushes follow the rights as they are at send
 * time (a replay stops when `authenticate` takes its right away); a connection being closed
 * executes nothing; and token rights end at EVENTFLOW_JWT_MAX_LIFETIME_S.
 */
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, type Gateway } from '../src/index.js';
import { generateEventId, type ServerTransport, type TransportListener } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';
import { connect, type Conn, type Frame } from '@eventflow/test-support/raw-socket';
import { silentSocket } from './silent-socket.js';

const SECRET = 'isolation-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
type Claims = Record<string, string[]>;

interface TokenTimes {
  /** Seconds since the epoch; omitted: no `exp`. Default: in an hour. */
  exp?: number | null;
  /** Seconds since the epoch; default now. */
  iat?: number;
}

async function token(claims: Claims, { exp = Math.floor(Date.now() / 1000) + 3600, iat = Math.floor(Date.now() / 1000) }: TokenTimes = {}): Promise<string> {
  const jwt = new SignJWT({ eventflow: claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt(iat);
  if (exp !== null) jwt.setExpirationTime(exp);
  return jwt.sign(new TextEncoder().encode(SECRET));
}

const conns: Conn[] = [];
async function open(gateway: Gateway, claims: Claims, times?: TokenTimes): Promise<Conn> {
  const conn = await connect(gateway.url, { hello: false });
  conns.push(conn);
  conn.send({ type: 'hello', protocol: 1, token: await token(claims, times) });
  await conn.next((frame) => frame.type === 'welcome');
  return conn;
}

/** The frame with the request id and the given ids replaced, so that two answers can be compared whole. */
function shape(frame: Frame, ids: Record<string, string>): string {
  let text = JSON.stringify({ ...frame, id: 0 });
  for (const [id, placeholder] of Object.entries(ids)) text = text.replaceAll(id, placeholder);
  return text;
}

describe('isolation (EVENTFLOW_AUTH=jwt)', () => {
  let harness: Harness;
  let admin: Conn;
  /** A billing event linked to an orders child process and to an entity: what an orders token must never see. */
  let foreign: { id: string; marker: string };
  let own: { id: string };

  beforeAll(async () => {
    harness = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    admin = await open(harness.gateway, { publish: ['*'], read: ['*'], subscribe: ['*'] });
    const marker = `BILLING-SECRET-${Math.random()}`;
    const billing = await admin.request('publish', { event: { id: 'ev-7q2', domain: 'billing', name: 'charged', pid: 'b1', data: { marker } } });
    const orders = await admin.request('publish', { event: { id: 'ev-3k9', domain: 'orders', name: 'placed', pid: 'o1', data: { n: 1 } } });
    expect([billing.type, orders.type]).toEqual(['result', 'result']);
    foreign = { id: 'ev-7q2', marker };
    own = { id: 'ev-3k9' };
    for (const eventId of [foreign.id, own.id]) {
      expect(await admin.request('persistChildProcessAssociation', { eventId, domain: 'orders', cpid: 'c1' })).toMatchObject({ type: 'result' });
      expect(await admin.request('persistEntityAssociation', { eventId, eid: 'e1' })).toMatchObject({ type: 'result' });
    }
  });

  afterAll(async () => {
    for (const conn of conns) conn.ws.terminate();
    await harness.stop();
  });

  const noForeignData = (conn: Conn): void => expect(JSON.stringify(conn.frames)).not.toContain(foreign.marker);

  it('reads that span domains return only events whose own domain the token may read', async () => {
    const conn = await open(harness.gateway, { read: ['orders'] });
    const ids = (frame: Frame): string[] => ((frame.result as { events: Array<{ id: string }> }).events ?? []).map((event) => event.id);
    // The child process is of orders; one event linked to it is of billing.
    const byCpid = await conn.request('readEventlogByChildProcess', { domain: 'orders', cpid: 'c1' });
    expect(byCpid.type).toBe('result');
    expect(ids(byCpid)).toEqual([own.id]);
    const byEid = await conn.request('readEventlogByEid', { eid: 'e1' });
    expect(byEid.type).toBe('result');
    expect(ids(byEid)).toEqual([own.id]);
    expect(ids(await conn.request('readEventlogByDomainAndEid', { domain: 'orders', eid: 'e1' }))).toEqual([own.id]);
    expect(await conn.request('readEventlogByDomainAndEid', { domain: 'billing', eid: 'e1' })).toMatchObject({ code: 'E_EVENTFLOW_FORBIDDEN' });
    // Whoever may read both gets both.
    expect(ids(await admin.request('readEventlogByEid', { eid: 'e1' })).sort()).toEqual([foreign.id, own.id].sort());
    noForeignData(conn);
  });

  it('an id of a domain the token cannot see is answered exactly like an id that names no event, and nothing changes', async () => {
    const conn = await open(harness.gateway, { read: ['orders'], delete: ['orders'], publish: ['orders'], schedule: ['orders'], subscribe: ['orders'] });
    const unknown = 'no-such-event';
    let n = 0;
    const cases: Array<[string, (id: string) => [string, unknown]]> = [
      ['read', (id) => ['read', { id }]],
      ['delete', (id) => ['delete', { id }]],
      ['persistEntityAssociation', (id) => ['persistEntityAssociation', { eventId: id, eid: 'probe-eid' }]],
      ['persistChildProcessAssociation', (id) => ['persistChildProcessAssociation', { eventId: id, domain: 'orders', cpid: 'probe-cpid' }]],
      ['wait after', (id) => ['wait', { wait: `w${n++}`, domain: 'orders', pid: 'probe', names: ['done'], afterId: id }]],
      ['publish rid', (id) => ['publish', { event: { id: `new-${n++}`, domain: 'orders', name: 'x', pid: 'probe', rid: id } }]],
      ['persist rid', (id) => ['persist', { event: { id: `new-${n++}`, domain: 'orders', name: 'x', pid: 'probe', rid: id } }]],
      ['schedule rid', (id) => ['schedule', { at: new Date(Date.now() + 3_600_000).toISOString(), event: { id: `new-${n++}`, domain: 'orders', name: 'x', pid: 'probe', rid: id } }]],
    ];
    for (const [what, make] of cases) {
      const [op, foreignParams] = make(foreign.id);
      const [, unknownParams] = make(unknown);
      const toForeign = await conn.request(op, foreignParams);
      const toUnknown = await conn.request(op, unknownParams);
      const newIds = (params: unknown): Record<string, string> => {
        const id = (params as { event?: { id: string }; wait?: string }).event?.id ?? (params as { wait?: string }).wait;
        return id === undefined ? {} : { [id]: 'NEW' };
      };
      const answer = shape(toForeign, { ...newIds(foreignParams), [foreign.id]: 'ID' });
      expect(answer, what).toBe(shape(toUnknown, { ...newIds(unknownParams), [unknown]: 'ID' }));
      expect(answer, what).not.toContain('billing');
    }
    noForeignData(conn);
    // Nothing was deleted, linked or stored.
    expect(await harness.gateway.store.read(foreign.id)).toMatchObject({ id: foreign.id });
    expect(await harness.gateway.store.readEventlogByEid('probe-eid')).toEqual([]);
    expect(await harness.gateway.store.readEventlogByChildProcess('orders', 'probe-cpid')).toEqual([]);
    expect(await harness.gateway.store.readEventlog('orders', 'probe')).toEqual([]);
  });

  it('a publish whose id is taken in a domain the token cannot see gets the answer of any taken id, naming no domain', async () => {
    const conn = await open(harness.gateway, { read: ['orders'], publish: ['orders'] });
    const event = (id: string): unknown => ({ event: { id, domain: 'orders', name: 'x', pid: 'dup', data: { other: true } } });
    const toForeign = await conn.request('publish', event(foreign.id));
    const toOwn = await conn.request('publish', event(own.id));
    expect(toForeign).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_DUPLICATE_ID' });
    expect(shape(toForeign, { [foreign.id]: 'ID' })).toBe(shape(toOwn, { [own.id]: 'ID' }));
    expect(shape(toForeign, { [foreign.id]: 'ID' })).not.toContain('billing');
    expect(await harness.gateway.store.read(foreign.id)).toMatchObject({ domain: 'billing', data: { marker: foreign.marker } });
  });

  it('a replay stops when authenticate takes its right away, mid-replay', async () => {
    // A transport whose unsent bytes the test sets: the replay waits for the client at a known point.
    let listener: TransportListener | undefined;
    let buffered = 0;
    let replayedCount = 0;
    const received: Array<Record<string, unknown>> = [];
    const transport: ServerTransport = {
      send(frame) {
        const parsed = JSON.parse(frame) as Record<string, unknown>;
        received.push(parsed);
        // After 100 replayed events the client "takes nothing": the replay waits before its next one.
        if (parsed.type === 'event' && (parsed.event as { domain: string }).domain === 'replayed' && ++replayedCount === 100) buffered = 5 * 1024 * 1024;
      },
      close: () => listener?.close(1000, ''),
      listen(attached) {
        listener = attached;
      },
      get bufferedAmount() {
        return buffered;
      },
    };
    const next = (predicate: (frame: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> =>
      eventually(() => received.find(predicate), 10_000, 'a frame');
    harness.gateway.accept(transport);
    const say = (frame: unknown): void => listener?.message(JSON.stringify(frame));
    say({ type: 'hello', protocol: 1, token: await token({ subscribe: ['*'] }) });
    await next((frame) => frame.type === 'welcome');

    const store = harness.gateway.store;
    const seeded = Array.from({ length: 1_200 }, (_, index) => ({
      event: { id: `replay-${index}`, domain: 'replayed', name: 'tick', pid: 'r', data: { index } },
      options: { publisher: 'test' },
    }));
    await store.appendBatch(seeded);
    const replayed = (): number => received.filter((frame) => frame.type === 'event' && (frame.event as { domain: string }).domain === 'replayed').length;

    say({ type: 'request', id: 1, op: 'subscribe', params: { domain: 'replayed', name: 'tick', after: 0 } });
    say({ type: 'request', id: 2, op: 'subscribe', params: { domain: 'fence', name: '*' } });
    await next((frame) => frame.id === 1 && frame.type === 'result');
    await next((frame) => frame.id === 2 && frame.type === 'result');
    await eventually(() => buffered > 0, 10_000, 'the replay to send 100 events');
    const before = replayed();
    say({ type: 'request', id: 3, op: 'authenticate', params: { token: await token({ subscribe: ['fence'] }) } });
    await next((frame) => frame.id === 3);
    expect(received.find((frame) => frame.id === 3)).toMatchObject({ type: 'result' });
    buffered = 0;
    // Fence: an event published after the client caught up arrives after anything the replay still sends.
    expect(await admin.request('publish', { event: { domain: 'fence', name: 'mark', pid: 'f' } })).toMatchObject({ type: 'result' });
    await next((frame) => frame.type === 'event' && (frame.event as { domain: string }).domain === 'fence');
    expect(before).toBe(100);
    expect(replayed()).toBe(before);
    listener?.close(1000, '');
  });

  it('authenticate with narrower rights drops the waits they no longer cover', async () => {
    const conn = await open(harness.gateway, { subscribe: ['*'] });
    expect(await conn.request('wait', { wait: 'w-billing', domain: 'billing', pid: 'wait-1', names: ['done'] })).toMatchObject({ type: 'result' });
    expect(await conn.request('wait', { wait: 'w-orders', domain: 'orders', pid: 'wait-1', names: ['done'] })).toMatchObject({ type: 'result' });
    expect(await conn.request('authenticate', { token: await token({ subscribe: ['orders'] }) })).toMatchObject({ type: 'result' });
    expect(await admin.request('publish', { event: { domain: 'billing', name: 'done', pid: 'wait-1', data: { marker: foreign.marker } } })).toMatchObject({ type: 'result' });
    expect(await admin.request('publish', { event: { domain: 'orders', name: 'done', pid: 'wait-1' } })).toMatchObject({ type: 'result' });
    await conn.next((frame) => frame.type === 'waited' && frame['wait'] === 'w-orders');
    expect(conn.frames.filter((frame) => frame.type === 'waited').map((frame) => frame['wait'])).toEqual(['w-orders']);
    noForeignData(conn);
  });

  it("a wait naming another tenant's event as its request does not hear its consumer's failure (the handler's error text); the requester does", async () => {
    const worker = harness.client({ token: await token({ consume: ['payroll', 'tenant'] }) });
    await worker.consume('payroll', 'run', (event) => {
      throw new Error(`${event.domain} salary of ${event.pid} is 9000`);
    });
    await worker.consume('tenant', 'run', () => {
      throw new Error('tenant job failed');
    });
    const payrollId = generateEventId();
    const tenantId = generateEventId();
    const attacker = await open(harness.gateway, { subscribe: ['tenant'], publish: ['tenant'] });
    const requester = await open(harness.gateway, { subscribe: ['payroll'], publish: ['payroll'] });
    expect(await attacker.request('wait', { wait: 'w-foreign', domain: 'tenant', pid: 'x', names: ['done'], request: payrollId })).toMatchObject({ type: 'result' });
    expect(await attacker.request('wait', { wait: 'w-own', domain: 'tenant', pid: 'y', names: ['done'], request: tenantId })).toMatchObject({ type: 'result' });
    expect(await requester.request('wait', { wait: 'w-payroll', domain: 'payroll', pid: 'p1', names: ['paid'], request: payrollId })).toMatchObject({ type: 'result' });
    expect(await requester.request('publish', { event: { id: payrollId, domain: 'payroll', name: 'run', pid: 'p1' } })).toMatchObject({ type: 'result' });
    // The requester that may publish there hears the failure, text and all.
    expect(await requester.next((frame) => frame.type === 'waitFailed')).toMatchObject({ wait: 'w-payroll', code: 'E_EVENTFLOW_CONSUMER_FAILED', details: { error: 'payroll salary of p1 is 9000' } });
    // The fence: the attacker's own request fails after the payroll one did.
    expect(await attacker.request('publish', { event: { id: tenantId, domain: 'tenant', name: 'run', pid: 'y' } })).toMatchObject({ type: 'result' });
    expect(await attacker.next((frame) => frame.type === 'waitFailed')).toMatchObject({ wait: 'w-own', details: { error: 'tenant job failed' } });
    // Before: w-foreign got "the consumer of event … failed: payroll salary of p1 is 9000".
    expect(attacker.frames.filter((frame) => frame.type === 'waitFailed').map((frame) => frame['wait'])).toEqual(['w-own']);
    expect(JSON.stringify(attacker.frames)).not.toContain('9000');
    await worker.close();
  });

  it('a connection being closed executes nothing, and a client that never answers the close is dropped after the grace', async () => {
    const socket = await silentSocket(harness.gateway.port);
    // Valid for 1–2 s whatever the fraction of the current second (floor + 1 left as little as 1 ms: no welcome on a slow machine).
    socket.send({ type: 'hello', protocol: 1, token: await token({ publish: ['orders'] }, { exp: Math.ceil(Date.now() / 1000) + 1 }) });
    await eventually(() => socket.frames.some((frame) => frame['type'] === 'welcome'), 5_000, 'welcome');
    expect(await socket.closeFrame).toBe(4401);
    const closedAt = Date.now();
    socket.send({ type: 'request', id: 1, op: 'publish', params: { event: { id: 'after-close', domain: 'orders', name: 'x', pid: 'late' } } });
    // ws alone would wait 30 s for the client's close frame.
    await socket.ended;
    expect(Date.now() - closedAt).toBeLessThan(10_000);
    expect(socket.frames.filter((frame) => frame['id'] === 1)).toEqual([]);
    expect(await harness.gateway.store.read('after-close')).toBeUndefined();
  }, 20_000);
});

describe('token lifetime (EVENTFLOW_JWT_MAX_LIFETIME_S)', () => {
  it('defaults to 24 h', () => {
    expect(parseConfig({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET }).EVENTFLOW_JWT_MAX_LIFETIME_S).toBe(86_400);
  });

  it('refuses tokens without exp or issued longer ago than the lifetime; authenticate cannot remove an expiry', async () => {
    const harness = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_JWT_MAX_LIFETIME_S: 3600 });
    try {
      const now = Math.floor(Date.now() / 1000);
      for (const times of [{ exp: null }, { iat: now - 7200 }]) {
        const conn = await connect(harness.gateway.url, { hello: false });
        conn.send({ type: 'hello', protocol: 1, token: await token({ read: ['*'] }, times) });
        expect(await conn.next()).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNAUTHORIZED' });
        expect((await conn.closed).code).toBe(4401);
      }
      // 2–3 s: the open and the refused authenticate come first, on any machine.
      const conn = await open(harness.gateway, { read: ['*'] }, { exp: now + 3 });
      expect(await conn.request('authenticate', { token: await token({ read: ['*'] }, { exp: null }) })).toMatchObject({ code: 'E_EVENTFLOW_UNAUTHORIZED' });
      // The first token's expiry still holds.
      expect(await conn.closed).toEqual({ code: 4401, reason: 'token expired' });
    } finally {
      await harness.stop();
    }
  });

  it('ends the rights of a token at iat + the lifetime: the connection is closed with 4401 then', async () => {
    const harness = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_JWT_MAX_LIFETIME_S: 60 });
    try {
      // Issued 59 s ago, valid for another hour by its exp: its rights end in about a second.
      const conn = await open(harness.gateway, { read: ['*'] }, { iat: Math.floor(Date.now() / 1000) - 59 });
      expect(await conn.closed).toEqual({ code: 4401, reason: 'token expired' });
    } finally {
      await harness.stop();
    }
  });

  it('a connection holds token rights at most the lifetime after it opened, whatever authenticate brings', async () => {
    const harness = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_JWT_MAX_LIFETIME_S: 2 });
    try {
      const conn = await open(harness.gateway, { read: ['*'] });
      const opened = Date.now();
      let closed: { code: number; reason: string } | undefined;
      void conn.closed.then((value) => (closed = value));
      // Fresh tokens, each good for two more seconds from its iat (and an hour by its exp): were
      // the cap per token only, the rights would keep moving forward.
      while (closed === undefined && Date.now() - opened < 8_000) {
        conn.sendRequest('authenticate', { token: await token({ read: ['*'] }) });
        await Promise.race([conn.closed, new Promise((resolve) => setTimeout(resolve, 250))]);
      }
      expect(closed).toEqual({ code: 4401, reason: 'token expired' });
      expect(conn.frames.filter((frame) => frame.type === 'error')).toEqual([]);
    } finally {
      await harness.stop();
    }
  });
});
