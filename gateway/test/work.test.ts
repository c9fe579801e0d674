/** The work engine's promises (work-suite.ts) on the embedded store: one gateway, its SQLite file. */
import Database from 'better-sqlite3';
import { afterEach } from 'vitest';
import { SignJWT } from 'jose';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { describeWork } from './work-suite.js';

const SECRET = 'work-suite-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const harnesses: Harness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((harness) => harness.stop()));
});

describeWork('SQLite', async ({ jwt = false } = {}) => {
  const harness = await startHarness(jwt ? { EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET } : {});
  harnesses.push(harness);
  return {
    client: (_gateway = 0, token) => harness.client(token === undefined ? {} : { token }),
    url: () => harness.gateway.url,
    gateways: 1,
    async outcome(eventId, group = '') {
      const db = new Database(harness.dbPath, { readonly: true, timeout: 5_000 });
      try {
        const row = db.prepare(`SELECT outcome FROM eventflow_delivery WHERE event_id = ? AND grp = ?`).get(eventId, group) as { outcome: string | null } | undefined;
        return row?.outcome ?? undefined;
      } finally {
        db.close();
      }
    },
    token: (rights) => new SignJWT({ eventflow: rights }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(SECRET)),
  };
});
