/**
 * The client keeps within the gateway's limits, against a real gateway: requests beyond the
 * announced in-flight limit wait in the client, writes are paced within the publish rate, a
 * `settle` is never dropped, and requests made while disconnected wait for the connection (and
 * fail with E_EVENTFLOW_OFFLINE when it does not come back in time).
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { isEventflowError, type StoredEvent } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** Events of `domain` whose v4 ledger says `success`, read straight from the SQLite file. */
function succeeded(dbPath: string, domain: string): number {
  const db = new Database(dbPath, { readonly: true });
  try {
    const row = db.prepare('SELECT COUNT(*) AS n FROM event_published p JOIN event e ON e.id = p.event_id WHERE e.domain = ? AND p.success IS NOT NULL').get(domain) as { n: number };
    return row.n;
  } finally {
    db.close();
  }
}

/** Errors that a client's own burst caused, wherever they surface. */
const isLimit = (error: unknown): boolean => isEventflowError(error, 'E_EVENTFLOW_LIMIT_EXCEEDED') || isEventflowError(error, 'E_EVENTFLOW_RATE_LIMITED');

describe('the client within the gateway limits', () => {
  it('a 2,000-event burst to one consumer: every handler runs exactly once, no limit error reaches the application', async () => {
    const N = 2_000;
    // A short lease, so that a dropped settle shows as a redelivery within the test.
    h = await startHarness({ EVENTFLOW_CONSUME_LEASE_MS: 3_000 });
    const errors: unknown[] = [];
    const consumer = h.client({ onError: (error) => errors.push(error) });
    const publisher = h.client({ onError: (error) => errors.push(error), requestTimeout: 60_000 });
    const runs = new Map<string, number>();
    await consumer.consume('burst', 'job', (event: StoredEvent) => void runs.set(event.id, (runs.get(event.id) ?? 0) + 1));

    const published = await Promise.allSettled(Array.from({ length: N }, (_, i) => publisher.publish({ domain: 'burst', name: 'job', pid: `p${i % 50}`, data: { i } })));
    const rejected = published.filter((result) => result.status === 'rejected').map((result) => (result as PromiseRejectedResult).reason as unknown);
    expect(rejected.filter(isLimit)).toEqual([]);
    expect(rejected).toEqual([]);

    // Every event settled in the store: nothing can be redelivered after this.
    await eventually(() => succeeded(h!.dbPath, 'burst') === N, 60_000, `${N} successes in the ledger`, { every: 100 });
    expect(runs.size).toBe(N);
    expect([...runs.values()].filter((count) => count !== 1)).toEqual([]);
    expect(errors.filter(isLimit)).toEqual([]);
  }, 120_000);

  it('settles of 2,000 deliveries at once are never dropped: no event runs twice (publishes unlimited, in chunks)', async () => {
    const N = 2_000;
    // A lease longer than delivering all 2,000 takes on a loaded machine (each is a claim transaction in the
    // store's ledger), so that only a dropped settle could make an event run twice.
    h = await startHarness({ EVENTFLOW_CONSUME_LEASE_MS: 15_000, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const errors: unknown[] = [];
    const consumer = h.client({ onError: (error) => errors.push(error) });
    const publisher = h.client();
    const runs = new Map<string, number>();
    // The handlers finish together, so that all their settles are due at once.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    // Two consumers with the largest credit, so that all 2,000 are open at once.
    const handler = async (event: StoredEvent): Promise<void> => {
      runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
      await gate;
    };
    await consumer.consume('settles', 'job', handler, { concurrency: 1000 });
    await consumer.consume('settles', 'job', async (event: StoredEvent) => handler(event), { concurrency: 1000 });
    // Publishing stays within the in-flight limit even on a client that does not keep to it.
    for (let i = 0; i < N; i += 200) await Promise.all(Array.from({ length: 200 }, (_, j) => publisher.publish({ domain: 'settles', name: 'job', pid: `p${(i + j) % 50}` })));
    await eventually(() => runs.size === N, 30_000, `${N} deliveries`, { every: 50 });
    release();
    await eventually(() => succeeded(h!.dbPath, 'settles') === N, 60_000, `${N} successes in the ledger`, { every: 100 });
    expect([...runs.values()].filter((count) => count !== 1)).toEqual([]);
    expect(errors.filter(isLimit)).toEqual([]);
  }, 120_000);

  it('a publish while the gateway is stopped fails with E_EVENTFLOW_OFFLINE after its timeout', async () => {
    h = await startHarness();
    const client = h.client();
    await client.ready();
    await h.stopGateway();
    await eventually(() => client.state === 'offline', 5_000, 'the client to notice');
    const started = Date.now();
    const error = await client.publish({ domain: 'offline', name: 'x', pid: 'p' }, { timeout: 500 }).catch((cause: unknown) => cause);
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    expect(isEventflowError(error, 'E_EVENTFLOW_OFFLINE')).toBe(true);
    expect((error as Error).message).toMatch(/not connected to the gateway during the whole 500 ms/);
  });

  it('a publish while the gateway is stopped resolves once it is back within the timeout, stored once', async () => {
    h = await startHarness();
    const client = h.client();
    await client.ready();
    await h.stopGateway();
    await eventually(() => client.state === 'offline', 5_000, 'the client to notice');
    const publishing = client.publish({ id: 'offline-1', domain: 'offline', name: 'x', pid: 'p' }, { timeout: 30_000 });
    await h.startGateway();
    await expect(publishing).resolves.toBe('offline-1');
    const log = await client.readEventlog('offline', 'p');
    expect(log.map((event) => event.id)).toEqual(['offline-1']);
  });

  it('a publish sent just before the connection dropped is re-sent after the reconnect and stored once', async () => {
    h = await startHarness();
    const client = h.client();
    await client.ready();
    // Sent, then the gateway goes away before (or after) storing it: either way one event.
    const publishing = client.publish({ id: 'dropped-1', domain: 'offline', name: 'y', pid: 'q' }, { timeout: 30_000 });
    await h.restart();
    await expect(publishing).resolves.toBe('dropped-1');
    expect((await client.readEventlog('offline', 'q')).map((event) => event.id)).toEqual(['dropped-1']);
  });
});
