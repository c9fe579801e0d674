/**
 * What one connection's replays may read without sending (EVENTFLOW_MAX_SCAN_RATE): a pattern
 * subscription replaying over events of other domains goes on at the budget's rate and completes;
 * the rows it sends cost no budget. The gateway-wide fairness of replay reads (another client
 * answered between pages) is proven under load in replay-fairness.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { connect } from '@eventflow/test-support/raw-socket';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** Publishes `count` events of `domain` straight into the store (1,000 per transaction), routed. */
async function publishMany(harness: Harness, domain: string, count: number): Promise<void> {
  for (let from = 0; from < count; from += 1000) {
    const batch = Array.from({ length: Math.min(1000, count - from) }, (_, i) => ({
      event: { id: `${domain}-${from + i}`, domain, name: 'noise', pid: `p${i % 20}`, data: { i } },
      options: { publisher: 'test' },
    }));
    await harness.gateway.store.appendBatch(batch);
  }
}

describe('the scan budget of replays', () => {
  it('paces a pattern replay that reads rows it does not send, which still completes with every matching event', async () => {
    // 2,000 rows per second, burst 2,000: 3,000 rows read and not sent owe half a second.
    h = await startHarness({ EVENTFLOW_MAX_SCAN_RATE: 2000 });
    await publishMany(h, 'other', 3000);
    await h.gateway.store.append({ id: 'match-1', domain: 'tenant-a.orders', name: 'placed', pid: 'p', data: {} }, { publisher: 'test' });
    const conn = await connect(h.gateway.url);
    const started = performance.now();
    expect(await conn.request('subscribePattern', { subscription: 's1', pattern: 'tenant-a.>', after: 0 })).toMatchObject({ type: 'result' });
    const matched = await conn.next((frame) => frame.type === 'matched');
    expect((matched['event'] as { id: string }).id).toBe('match-1');
    // The replay's end: a live event is sent only after it (parked meanwhile).
    expect(await conn.request('publish', { event: { id: 'match-2', domain: 'tenant-a.orders', name: 'placed', pid: 'p', data: {} } })).toMatchObject({ type: 'result' });
    await conn.next((frame) => frame.type === 'matched' && (frame['event'] as { id: string }).id === 'match-2');
    expect(performance.now() - started).toBeGreaterThanOrEqual(400);
    // The connection serves requests meanwhile and after.
    await conn.ping();
  });

  it('charges nothing for the rows a replay sends: a plain subscription replays at the client\'s pace only', async () => {
    h = await startHarness({ EVENTFLOW_MAX_SCAN_RATE: 100 });
    await publishMany(h, 'orders', 3000);
    const conn = await connect(h.gateway.url);
    const started = performance.now();
    expect(await conn.request('subscribe', { domain: 'orders', name: 'noise', after: 0 })).toMatchObject({ type: 'result' });
    await conn.next((frame) => frame.type === 'event' && (frame['event'] as { id: string }).id === 'orders-2999', 20_000);
    expect(conn.frames.filter((frame) => frame.type === 'event')).toHaveLength(3000);
    // 3,000 rows at 100 per second would take 30 s if sent rows were charged.
    expect(performance.now() - started).toBeLessThan(15_000);
  });
});
