/** Shared set-up for the browser tests: a real gateway, unique IndexedDB names, clean-up after each test. */
import { commands } from 'vitest/browser';
import { onTestFinished, vi } from 'vitest';
import { deleteDB, openDB, type DBSchema } from 'idb';
import { eventually } from '@eventflow/test-support/wait';
import { createClient, type EventflowClient, type JsonObject, type StoredEvent } from '@eventflow/core';
import type { StreamRecord, UsageRecord } from '../src/cache.js';
import { createBrowserClient, type BrowserClient, type BrowserClientOptions, type EventlogSnapshot } from '../src/index.js';

/** The cache's IndexedDB layout (cache.ts), typed for reading it directly through `idb`. */
export interface CacheSchema extends DBSchema {
  streams: { key: string; value: StreamRecord };
  events: { key: [string, number]; value: string };
  usage: { key: string; value: UsageRecord; indexes: { used: number } };
}

/** A real gateway for the test (with `env`, EVENTFLOW_* settings, if given), disposed of after it. */
export async function gateway(env?: Record<string, string | number>): Promise<{ handle: string; url: string }> {
  const started = await commands.gatewayStart(env);
  onTestFinished(() => commands.gatewayDispose(started.handle));
  return started;
}

/** A unique IndexedDB name, deleted after the test. */
export function cacheName(): string {
  const name = `test-${crypto.randomUUID()}`;
  onTestFinished(() => deleteDB(name));
  return name;
}

export function browserClient(url: string, name: string, options: BrowserClientOptions = {}): BrowserClient {
  const client = createBrowserClient(url, { reconnect: { minDelay: 50, maxDelay: 200 }, cache: { name }, ...options });
  onTestFinished(() => client.close());
  return client;
}

/** A plain core client, as another user of the gateway. */
export function otherClient(url: string, options: Parameters<typeof createClient>[1] = {}): EventflowClient {
  const client = createClient(url, { reconnect: { minDelay: 50, maxDelay: 200 }, ...options });
  onTestFinished(() => client.close());
  return client;
}

export async function publishAll(client: EventflowClient, domain: string, pid: string, data: JsonObject[]): Promise<void> {
  for (const item of data) await client.publish({ domain, name: 'changed', pid, data: item });
}

/** Records every snapshot a watch emits. */
export function record(client: BrowserClient, domain: string, pid: string): { snapshots: EventlogSnapshot[]; last(): EventlogSnapshot | undefined; stop(): void } {
  const snapshots: EventlogSnapshot[] = [];
  const stop = client.watchEventlogState(domain, pid, (snapshot) => snapshots.push(snapshot));
  onTestFinished(stop);
  return { snapshots, last: () => snapshots.at(-1), stop };
}

/** The `readEventlog` requests a client sent (its `call` spied on). */
export function spyReads(client: BrowserClient): () => Array<{ domain: string; pid: string; after?: number }> {
  const spy = vi.spyOn(client, 'call');
  return () =>
    spy.mock.calls.filter(([op]) => op === 'readEventlog').map(([, params]) => params as { domain: string; pid: string; after?: number });
}

export const ids = (events: readonly StoredEvent[]): string[] => events.map((event) => event.id);

/** The eventlog record as stored in IndexedDB (read directly, not through a client). */
export async function stored(name: string, domain: string, pid: string): Promise<StreamRecord | undefined> {
  const db = await openDB<CacheSchema>(name);
  try {
    return db.objectStoreNames.contains('streams') ? await db.get('streams', `${domain}\u001f${pid}`) : undefined;
  } finally {
    db.close();
  }
}

/** Waits until IndexedDB holds the eventlog at `position` (reads do not wait for their writes). */
export async function storedAt(name: string, domain: string, pid: string, position: number | undefined): Promise<void> {
  let last: number | undefined;
  await eventually(
    async () => {
      last = (await stored(name, domain, pid))?.position;
      return last === position;
    },
    5_000,
    `${domain}/${pid} stored at ${position}`,
  ).catch(() => {
    throw new Error(`${domain}/${pid} stored at ${last}, expected ${position}`);
  });
}
