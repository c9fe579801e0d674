/**
 * Consume leases against a real gateway with a short lease: an unsettled delivery is revoked and
 * goes to another consumer with attempt + 1, `extend` keeps it, and after the last attempt the
 * event is failed and recorded as a dead letter. The key scenario also runs on
 * MariaDB (leases.mysql.test.ts).
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, isEventflowError, type ConsumeContext, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import type { Peer } from '../src/delivery/dispatcher.js';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { LEASE, stuck } from './lease-support.js';

// The sleeps below are kept: lease expiry is time, and time is what these tests prove.

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

async function harness(config: Record<string, string | number> = {}): Promise<Harness> {
  h = await startHarness({ EVENTFLOW_CONSUME_LEASE_MS: LEASE, ...config });
  return h;
}

/** The v4 delivery columns of an event, read straight from the SQLite file. (`eventually` takes null as done: use `?? undefined`.) */
function published(dbPath: string, id: string): Record<string, string | null> | undefined {
  const db = new Database(dbPath, { readonly: true });
  try {
    return db.prepare('SELECT * FROM event_published WHERE event_id = ?').get(id) as Record<string, string | null> | undefined;
  } finally {
    db.close();
  }
}


describe('consume leases (SQLite)', () => {
  it('an unsettled delivery goes to the other consumer after the lease; the first one is revoked and its late settle refused', async () => {
    const t = await harness();
    const slow = t.client();
    const { seen, handler } = stuck();
    await slow.consume('jobs', 'run', handler);
    const id = await slow.publish({ domain: 'jobs', name: 'run', pid: 'p' });
    await eventually(() => seen.length === 1, 5_000, 'first delivery');

    const steady = t.client();
    let finish!: () => void;
    const handled: number[] = [];
    await steady.consume('jobs', 'run', async (_event, { attempt }) => {
      handled.push(attempt);
      await new Promise<void>((resolve) => (finish = resolve));
    });
    const first = seen[0]!;
    expect(first.attempt).toBe(1);
    expect(first.signal.aborted).toBe(false);

    await eventually(() => handled.length === 1, 5_000, 'redelivery to the other consumer');
    expect(handled).toEqual([2]);
    expect(first.signal.aborted).toBe(true); // the `revoked` frame aborted the first handler
    expect(seen).toHaveLength(1); // not delivered to the first consumer again
    expect(published(t.dbPath, id)).toMatchObject({ success: null, failed: null });

    // The revoked delivery is no longer open: the gateway refuses its outcome.
    const late = await slow.call('settle', { delivery: 'd1', outcome: 'failed' }).catch((error: unknown) => error);
    expect(isEventflowError(late, 'E_EVENTFLOW_UNKNOWN_DELIVERY')).toBe(true);
    expect(published(t.dbPath, id)).toMatchObject({ success: null, failed: null });

    finish();
    await eventually(() => published(t.dbPath, id)?.success ?? undefined, 5_000, 'success by the second consumer');
    expect(published(t.dbPath, id)?.failed).toBeNull();
    expect(t.gateway.dispatcher.stats.deliveries).toBe(0);
    expect(await t.gateway.store.deadLetters()).toEqual([]);
  });

  it('extend keeps the delivery open past its lease: no redelivery while the consumer extends', async () => {
    const t = await harness();
    const client = t.client();
    const other = t.client();
    const attempts: number[] = [];
    const granted: number[] = [];
    const handler = async (_event: StoredEvent, { attempt, extend }: ConsumeContext): Promise<void> => {
      attempts.push(attempt);
      // Works for about four leases, extending every half lease.
      for (let i = 0; i < 8; i++) {
        await sleep(LEASE / 2);
        granted.push((await extend()).ms);
      }
    };
    await client.consume('jobs', 'run', handler);
    await other.consume('jobs', 'run', handler);
    const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'p' });
    await eventually(() => published(t.dbPath, id)?.success ?? undefined, 5_000, 'success');
    expect(attempts).toEqual([1]);
    expect(granted).toEqual(Array(8).fill(LEASE));
  });

  it('extend(ms) is capped at ten leases; an unknown delivery is refused', async () => {
    const t = await harness();
    const client = t.client();
    const results: unknown[] = [];
    let done = false;
    await client.consume('jobs', 'run', async (_event, { extend }) => {
      results.push((await extend(LEASE * 2)).ms, (await extend(LEASE * 100)).ms);
      done = true;
    });
    await client.publish({ domain: 'jobs', name: 'run', pid: 'p' });
    await eventually(() => done, 5_000, 'handler');
    expect(results).toEqual([LEASE * 2, LEASE * 10]);
    const error = await client.call('extend', { delivery: 'nope' }).catch((caught: unknown) => caught);
    expect(isEventflowError(error, 'E_EVENTFLOW_UNKNOWN_DELIVERY')).toBe(true);
  });

  it('after the last attempt the event is failed and a dead letter, and is not delivered again', async () => {
    const t = await harness({ EVENTFLOW_CONSUME_MAX_ATTEMPTS: 3 });
    const client = t.client();
    const { seen, handler } = stuck();
    await client.consume('jobs', 'run', handler);
    const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'p', data: { n: 1 } });
    await eventually(() => published(t.dbPath, id)?.failed ?? undefined, 5_000, 'failed');
    expect(seen.map((s) => s.attempt)).toEqual([1, 2, 3]);
    expect(seen.every((s) => s.id === id)).toBe(true);
    // Also the last delivery is revoked (its frame may still be on its way).
    await eventually(() => seen.every((s) => s.signal.aborted), 5_000, 'every delivery revoked');
    expect(published(t.dbPath, id)).toMatchObject({ success: null, consumer: t.gateway.id });
    const letters = await t.gateway.store.deadLetters();
    expect(letters).toEqual([{ eventId: id, domain: 'jobs', name: 'run', pid: 'p', attempts: 3, reason: 'lease expired', at: expect.any(String) }]);

    await sleep(LEASE * 3);
    expect(seen).toHaveLength(3);
    expect(t.gateway.dispatcher.stats.deliveries).toBe(0);
    // Deleting the event deletes its dead letter.
    await client.delete(id);
    expect(await t.gateway.store.deadLetters()).toEqual([]);
  });

  it('attempts follow the event across hand-backs: a disconnect counts like an expired lease', async () => {
    const t = await harness({ EVENTFLOW_CONSUME_MAX_ATTEMPTS: 2 });
    const { client: doomed, kill } = t.killableClient();
    const first = stuck();
    await doomed.consume('jobs', 'run', first.handler);
    const id = await doomed.publish({ domain: 'jobs', name: 'run', pid: 'p' });
    await eventually(() => first.seen.length === 1, 5_000, 'first delivery');
    const steady = t.client();
    const second = stuck();
    await steady.consume('jobs', 'run', second.handler);
    kill();
    await eventually(() => second.seen.length === 1, 5_000, 'handed back');
    expect(second.seen[0]?.attempt).toBe(2);
    await eventually(() => published(t.dbPath, id)?.failed ?? undefined, 5_000, 'failed after the second lease');
    expect(await t.gateway.store.deadLetters()).toMatchObject([{ eventId: id, attempts: 2, reason: 'lease expired' }]);
  });

  it('a handler that throws fails the event at once: no further attempts, no dead letter', async () => {
    const t = await harness();
    const client = t.client();
    const attempts: number[] = [];
    await client.consume('jobs', 'run', (_event, { attempt }) => {
      attempts.push(attempt);
      throw new Error('boom');
    });
    const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'p' });
    await eventually(() => published(t.dbPath, id)?.failed ?? undefined, 5_000, 'failed');
    await sleep(LEASE * 2);
    expect(attempts).toEqual([1]);
    expect(await t.gateway.store.deadLetters()).toEqual([]);
  });

  it('the lease timers are cleared when deliveries close: nothing is left behind', async () => {
    const t = await harness();
    const revoked: string[] = [];
    const delivered: string[] = [];
    const peer: Peer = {
      id: 'test-peer',
      sendEvent: () => undefined,
      sendDelivery: (_consumer, delivery) => void delivered.push(delivery),
      sendWaited: () => undefined,
      sendDeleted: () => undefined,
      sendRevoked: (delivery) => void revoked.push(delivery),
    };
    const { dispatcher } = t.gateway;
    await dispatcher.addConsumer(peer, 'c1', 'jobs', 'run', { group: '', concurrency: 16, retry: undefined });
    await t.client().publish({ domain: 'jobs', name: 'run', pid: 'p' });
    await eventually(() => delivered.length === 1, 5_000, 'delivery');
    expect(await dispatcher.extend(peer, delivered[0]!, undefined)).toBe(LEASE);
    expect(await dispatcher.settle(peer, delivered[0]!, { outcome: 'success' })).toBe(true);
    await sleep(LEASE * 2);
    expect(revoked).toEqual([]);
    expect(await dispatcher.extend(peer, delivered[0]!, undefined)).toBeUndefined();
    expect(delivered).toHaveLength(1);
    await dispatcher.removePeer(peer);
  });
});
