/**
 * The orphan marks of a routed page (v4's bookkeeping of events no one here took) failing with the
 * store (another process's SQLite write lock, a full disk) while the next event of the domain waits
 * for the same pump: that event still reaches its subscribers and waits, not only once another event
 * of the domain comes along. The marks' write meeting such a moment between two commits is a matter
 * of timing, so the store here refuses it once (the only fault not made real).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, expect, it } from 'vitest';
import { createClient, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { SqliteStore, startGateway, type Gateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-orphan-marks-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let gateway: Gateway | undefined;
let client: EventflowClient | undefined;
afterEach(async () => {
  await client?.close({ drainTimeout: 100 });
  await gateway?.close();
  client = gateway = undefined;
});

/** A SQLite store whose next orphan marks fail as SQLite's writes do when another process holds the write lock, once `fail` lets them. */
class RefusingStore extends SqliteStore {
  refuse: Promise<void> | undefined;
  override async markOrphans(eventIds: readonly string[]): Promise<void> {
    const refuse = this.refuse;
    if (refuse === undefined) return super.markOrphans(eventIds);
    this.refuse = undefined;
    await refuse;
    throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
  }
}

it('an event routed while the page before it failed to mark its orphans reaches its subscriber', async () => {
  const store = new RefusingStore({ path: join(dir, 'orphans.db') });
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' }, { store });
  client = createClient(gateway.url, { onError: () => undefined });
  const seen: StoredEvent[] = [];
  await client.subscribe('orders', 'placed', (event) => void seen.push(event));
  let release!: () => void;
  store.refuse = new Promise<void>((resolve) => (release = resolve));
  // Nobody takes `audited`: its page's orphan marks are held, then fail.
  await client.publish({ domain: 'orders', name: 'audited', pid: 'o1' });
  // Meanwhile the subscriber's event is stored, its routing waiting behind that page.
  const placed = await client.publish({ domain: 'orders', name: 'placed', pid: 'o1' });
  release();
  // Before: the pump gave up with the marks, and the event waited for the domain's next publish.
  await eventually(() => seen.some((event) => event.id === placed), 5_000, 'the subscriber to get the event');
  expect(store.refuse).toBeUndefined();
}, 30_000);
