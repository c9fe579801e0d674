/**
 * Group commit end to end: pipelined publishes from two clients share store transactions, yet each
 * is answered on its own (a version conflict or a duplicate id fails only itself), and a
 * subscriber sees every stored event once, in position order.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateEventId, isEventflowError, type StoredEvent } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let harness: Harness;
beforeEach(async () => {
  harness = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
});
afterEach(async () => {
  await harness.stop();
});

describe('group commit through the gateway', () => {
  it('answers each pipelined publish alone and delivers every stored event once, in position order', async () => {
    const [a, b, watcher] = [harness.client(), harness.client(), harness.client()];
    await Promise.all([a.ready(), b.ready(), watcher.ready()]);
    const seen: StoredEvent[] = [];
    await watcher.subscribe('orders', '*', (event: StoredEvent) => void seen.push(event));
    await a.publish({ domain: 'orders', name: 'opened', pid: 'versioned' });
    const taken = generateEventId();
    await a.publish({ id: taken, domain: 'orders', name: 'placed', pid: 'o0', data: { n: 0 } });

    const publishes = Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).publish({ domain: 'orders', name: 'placed', pid: `o${i % 7}`, data: { i } }));
    // Among them: a stale expectedVersion, the same id with other content, and a plain retry.
    const failure = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (error: unknown) => error);
    const conflict = failure(b.publish({ domain: 'orders', name: 'closed', pid: 'versioned' }, { expectedVersion: 0 }));
    const duplicate = failure(a.publish({ id: taken, domain: 'orders', name: 'placed', pid: 'o0', data: { n: 1 } }));
    const retry = b.publish({ id: taken, domain: 'orders', name: 'placed', pid: 'o0', data: { n: 0 } });
    const ok = b.publish({ domain: 'orders', name: 'closed', pid: 'versioned' }, { expectedVersion: 1 });

    const ids = await Promise.all(publishes);
    const errors = await Promise.all([conflict, duplicate]);
    expect(isEventflowError(errors[0], 'E_EVENTFLOW_VERSION_CONFLICT'), String(errors[0])).toBe(true);
    expect(isEventflowError(errors[1], 'E_EVENTFLOW_DUPLICATE_ID'), String(errors[1])).toBe(true);
    expect(await retry).toBe(taken);
    await ok;
    expect(new Set(ids).size).toBe(ids.length);

    const stored = 2 + ids.length + 1;
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(stored);
    const positions = seen.map((event) => event.position);
    expect(positions).toEqual([...positions].sort((x, y) => x - y));
    expect(new Set(seen.map((event) => event.id)).size).toBe(stored);
    expect(seen.filter((event) => event.id === taken)).toHaveLength(1);
    expect(await harness.gateway.store.countEventlog('orders', 'versioned')).toBe(2);
  });
});
