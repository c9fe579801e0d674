/**
 * A read is answered under the rights the connection holds when the answer leaves, not those it
 * held when the request came in. `authenticate` can narrow them while a read waits for its turn
 * (read-turns.ts) or for the store (MySQL answers asynchronously): the events of such an answer
 * were already filtered at send time (keepReadable), but not the rest of it (a domain's pids, a
 * process's composed state, the console's process list), which left for a domain the token no
 * longer allowed. Now such a read is refused as it would be if sent after the `authenticate`.
 */
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { connect, type Conn } from '@eventflow/test-support/raw-socket';

const SECRET = 'read-rights-secret-0123456789-abcdefghijklmnopqrstuvwxyz';

function token(claims: Record<string, string[]>): Promise<string> {
  return new SignJWT({ eventflow: claims })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + 3600)
    .sign(new TextEncoder().encode(SECRET));
}

async function open(h: Harness, claims: Record<string, string[]>): Promise<Conn> {
  const conn = await connect(h.gateway.url, { hello: false });
  conn.send({ type: 'hello', protocol: 1, token: await token(claims) });
  await conn.next((frame) => frame.type === 'welcome');
  return conn;
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

describe('rights narrowed while a read runs', () => {
  it('a read admitted before an authenticate that took its domain away is refused, not answered', async () => {
    h = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const admin = await open(h, { publish: ['*'] });
    await admin.request('publish', { event: { domain: 'tenant', name: 'opened', pid: 'secret-pid', data: { secret: 'S3CR3T' } } });
    await Promise.all(Array.from({ length: 50 }, (_, n) => admin.request('publish', { event: { domain: 'tenant', name: 'n', pid: 'busy', data: { n } } })));

    const conn = await open(h, { read: ['tenant'] });
    const narrower = await token({ read: ['elsewhere'] });
    // Reads of its own queue first, so that the ones after them come to their turn after the authenticate is done.
    const queued = Array.from({ length: 30 }, () => conn.sendRequest('readEventlog', { domain: 'tenant', pid: 'busy' }));
    const authenticate = conn.sendRequest('authenticate', { token: narrower });
    const reads = [
      conn.sendRequest('readDistinctPidByDomain', { domain: 'tenant' }),
      conn.sendRequest('readEventlogState', { domain: 'tenant', pid: 'secret-pid' }),
      conn.sendRequest('listProcesses', { domain: 'tenant' }),
      conn.sendRequest('readTimeline', { domain: 'tenant', pid: 'secret-pid' }),
      conn.sendRequest('readEventlog', { domain: 'tenant', pid: 'secret-pid' }),
    ];
    expect((await conn.answer(authenticate)).type).toBe('result');
    for (const id of queued) await conn.answer(id);
    for (const id of reads) {
      const answer = await conn.answer(id);
      // The premise: the read was answered after the rights were narrowed.
      expect(conn.frames.indexOf(answer)).toBeGreaterThan(conn.frames.findIndex((frame) => frame.id === authenticate));
      expect(answer).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_FORBIDDEN', details: { action: 'read', domain: 'tenant' } });
    }
    expect(JSON.stringify(conn.frames)).not.toContain('secret-pid');
    expect(JSON.stringify(conn.frames)).not.toContain('S3CR3T');
    admin.ws.close();
    conn.ws.close();
  }, 60_000);
});
