/**
 * What a connection holds is made when it is used, not before (bench/README.md › idle-memory: the
 * target is ≤ 10 kB a connection): a connection that subscribes and is answered, or refreshes its
 * token, holds no request()-wait state; one that makes a request() does. Counted exactly, as live
 * objects of the class in this process (the inspector's Runtime.queryObjects, which collects
 * garbage first), not by heap size, which is too noisy to decide.
 */
import { Session } from 'node:inspector/promises';
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { connect, type Conn } from '@eventflow/test-support/raw-socket';
import { RequestWaits } from '../src/connection/request-waits.js';
import { Registrations } from '../src/connection/registrations.js';

const sockets: Conn[] = [];
let h: Harness | undefined;
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.ws.terminate();
  await h?.stop();
  h = undefined;
});

/** Live instances of `type` in this process. */
async function live(type: { prototype: object }): Promise<number> {
  const session = new Session();
  session.connect();
  try {
    const key = `__liveCount${Math.random().toString(36).slice(2)}`;
    (globalThis as Record<string, unknown>)[key] = type.prototype;
    const { result: prototype } = await session.post('Runtime.evaluate', { expression: `globalThis.${key}` });
    delete (globalThis as Record<string, unknown>)[key];
    const { objects } = await session.post('Runtime.queryObjects', { prototypeObjectId: prototype.objectId as string });
    const { result } = await session.post('Runtime.callFunctionOn', { objectId: objects.objectId as string, functionDeclaration: 'function () { return this.length; }', returnByValue: true });
    return result.value as number;
  } finally {
    session.disconnect();
  }
}

describe('connection state made on use', () => {
  it("connections that subscribe hold no request()-wait state; a request()'s connection does", async () => {
    h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const before = { waits: await live(RequestWaits), registrations: await live(Registrations) };
    for (let i = 0; i < 20; i++) {
      const conn = await connect(h.gateway.url, { client: 'subscriber' });
      sockets.push(conn);
      expect(await conn.request('subscribe', { domain: 'orders', name: 'created' })).toMatchObject({ type: 'result' });
      expect(await conn.request('publish', { event: { domain: 'orders', name: 'created', pid: `p${i}`, data: {} } })).toMatchObject({ type: 'result' });
    }
    // Every one of them holds its subscription, and nothing for waits it never made.
    expect((await live(Registrations)) - before.registrations).toBe(20);
    expect((await live(RequestWaits)) - before.waits).toBe(0);

    // A wait made as a request() makes it (the control: the count sees it).
    const requester = await connect(h.gateway.url, { client: 'requester' });
    sockets.push(requester);
    expect(await requester.request('wait', { wait: 'w1', domain: 'orders', pid: 'r1', names: ['done'], request: 'e-r1' })).toMatchObject({ type: 'result' });
    expect((await live(RequestWaits)) - before.waits).toBe(1);
  });

  it('a token refresh on a connection without registrations makes none', async () => {
    const secret = 'connection-state-secret-0123456789-abcdefghijklmnop';
    h = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: secret, EVENTFLOW_AUTH_ANONYMOUS: 'read' });
    const token = await new SignJWT({ eventflow: { read: ['*'], subscribe: ['*'] } }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(secret));
    const before = await live(Registrations);
    for (let i = 0; i < 10; i++) {
      const conn = await connect(h.gateway.url, { client: 'refresher' });
      sockets.push(conn);
      expect(await conn.request('authenticate', { token })).toMatchObject({ type: 'result' });
    }
    expect((await live(Registrations)) - before).toBe(0);
  });
});
