/**
 * A routing claim that fails after its event was stored (LocalRouter: v4's consumed_hub, written in a
 * transaction of its own after a scheduled event fired, or for a publish retried after its commit was
 * reported failed): the event still reaches this gateway's subscribers and waits, not only once
 * another event of its domain comes along. The claim's write meeting a store that cannot write for a
 * moment (another process's write lock, a full disk) between the two transactions is a matter of
 * timing, so the store here refuses it once (the only fault not made real).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, expect, it } from 'vitest';
import { createClient, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { SqliteStore, startGateway, type Gateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-route-claim-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let gateway: Gateway | undefined;
let client: EventflowClient | undefined;
afterEach(async () => {
  await client?.close({ drainTimeout: 100 });
  await gateway?.close();
  client = gateway = undefined;
});

/** A SQLite store whose next routing claim fails as SQLite's does when another process holds the write lock. */
class RefusingStore extends SqliteStore {
  refuse = 0;
  override async claimAllForRouting(eventIds: readonly string[], hub: string): Promise<string[]> {
    if (this.refuse > 0) {
      this.refuse -= 1;
      throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    }
    return super.claimAllForRouting(eventIds, hub);
  }
}

it('a scheduled event whose routing claim fails reaches the subscribers at once, with no other event to carry it', async () => {
  const store = new RefusingStore({ path: join(dir, 'scheduled.db') });
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' }, { store });
  client = createClient(gateway.url, { onError: () => undefined });
  const seen: StoredEvent[] = [];
  await client.subscribe('reminders', 'due', (event) => void seen.push(event));
  store.refuse = 1;
  const id = await client.schedule(Date.now() + 300, { domain: 'reminders', name: 'due', pid: 'r1' });
  // Before: the event fired, its claim failed, and it was never routed: the subscriber got it only
  // with the next event of the domain.
  await eventually(() => seen.some((event) => event.id === id), 5_000, 'the subscriber to get the scheduled event');
  expect(store.refuse).toBe(0);
  // Settled as routed, which it was: not `failed`.
  const db = new Database(join(dir, 'scheduled.db'), { readonly: true });
  try {
    await eventually(() => (db.prepare(`SELECT success FROM event_scheduled WHERE event_id = ?`).get(id) as { success: string | null } | undefined)?.success, 5_000, 'the scheduled row settled success');
  } finally {
    db.close();
  }
}, 30_000);
