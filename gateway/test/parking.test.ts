/**
 * Live events that arrive while a subscription replays are parked and sent after the replay. A
 * replay stalled by a client that takes nothing must not park the whole live stream: parking is
 * bounded by EVENTFLOW_MAX_PARKED_BYTES per connection; past it, the events are dropped and the
 * replay reads them from the store, so the client still gets every event exactly once, in order.
 *
 * The stalled client is a transport whose bufferedAmount the test sets (the fault), attached to a
 * real gateway with gateway.accept; the publisher and the fence are real WebSocket clients.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';
import { StallingTransport } from './stalling-transport.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const MAX_PARKED = 64 * 1024;
const MAX_BUFFERED = 1024 * 1024;

async function publishMany(h: Harness, from: number, count: number, size: number): Promise<void> {
  const client = h.client();
  const pad = 'x'.repeat(size);
  for (let start = from; start < from + count; start += 100) {
    const end = Math.min(from + count, start + 100);
    await Promise.all(Array.from({ length: end - start }, (_, i) => client.publish({ domain: 'feed', name: 'tick', pid: `p${(start + i) % 5}`, data: { n: start + i, pad } })));
  }
  await client.close();
}

describe('EVENTFLOW_MAX_PARKED_BYTES: live events held back during a replay', () => {
  it('a stalled replay parks at most the bound; the client still receives every event once, in order', async () => {
    h = await startHarness({ EVENTFLOW_MAX_PARKED_BYTES: MAX_PARKED, EVENTFLOW_MAX_BUFFERED_BYTES: MAX_BUFFERED, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    await publishMany(h, 0, 1_200, 100);

    // A live subscriber is the fence: once it has an event, every connection was handed it.
    const fence = h.client();
    const seen: number[] = [];
    await fence.subscribe('feed', '*', (event) => void seen.push((event.data as { n: number }).n));

    const stalled = new StallingTransport();
    const session = h.gateway.accept(stalled);
    stalled.deliver({ type: 'hello', protocol: 1, client: 'stalled' });
    await eventually(() => stalled.frames.some((frame) => frame.type === 'welcome'), 10_000, 'welcome');
    // Between a quarter of the send-buffer limit (the replay waits) and the limit (not cut off).
    stalled.bufferedAmount = MAX_BUFFERED / 2;
    stalled.deliver({ type: 'request', id: 1, op: 'subscribe', params: { domain: 'feed', name: '*', after: 0 } });
    await eventually(() => stalled.frames.some((frame) => frame.type === 'result' && frame.id === 1), 10_000, 'subscribe result');

    // ~1.5 MB of live events while the replay is stalled: far beyond the bound.
    await publishMany(h, 1_200, 1_500, 1_000);
    await eventually(() => seen.length === 1_500, 30_000, 'the fence to see every live event');
    expect(session.parkedBytes).toBeLessThanOrEqual(MAX_PARKED);
    expect(stalled.closed).toBeUndefined();

    // The client takes its backlog: the replay goes on from the store and then live.
    stalled.bufferedAmount = 0;
    await eventually(() => stalled.events().length >= 2_700, 60_000, 'every event at the stalled client');
    await publishMany(h, 2_700, 50, 10);
    await eventually(() => seen.length === 1_550 && stalled.events().length >= 2_750, 30_000, 'the events published after the replay');

    const received = stalled.events().map((frame) => (frame.event.data as { n: number }).n);
    expect(received).toEqual(Array.from({ length: 2_750 }, (_, n) => n));
    const positions = stalled.events().map((frame) => frame.event.position);
    expect(positions.every((position, i) => i === 0 || position > (positions[i - 1] as number))).toBe(true);
    expect(session.parkedBytes).toBe(0);
    expect(stalled.closed).toBeUndefined();
    await fence.close();
    session.close(1000, 'done');
  }, 180_000);

  it('an unsubscribed (or re-made) subscription stops its replay and gives its parked bytes back', async () => {
    h = await startHarness({ EVENTFLOW_MAX_PARKED_BYTES: MAX_PARKED, EVENTFLOW_MAX_BUFFERED_BYTES: MAX_BUFFERED, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    await publishMany(h, 0, 600, 10);
    const stalled = new StallingTransport();
    const session = h.gateway.accept(stalled);
    stalled.deliver({ type: 'hello', protocol: 1, client: 'stalled' });
    await eventually(() => stalled.frames.some((frame) => frame.type === 'welcome'), 10_000, 'welcome');
    stalled.bufferedAmount = MAX_BUFFERED / 2;
    const answered = (id: number): Promise<unknown> => eventually(() => stalled.frames.some((frame) => frame.type === 'result' && frame.id === id), 10_000, `result ${id}`);
    // One at a time, so that each subscribe starts its own replay before it is unsubscribed.
    for (let id = 1; id <= 20; id++) {
      stalled.deliver({ type: 'request', id: id * 2, op: 'subscribe', params: { domain: 'feed', name: '*', after: 0 } });
      await answered(id * 2);
      stalled.deliver({ type: 'request', id: id * 2 + 1, op: 'unsubscribe', params: { domain: 'feed', name: '*' } });
      await answered(id * 2 + 1);
    }
    stalled.deliver({ type: 'request', id: 100, op: 'subscribe', params: { domain: 'feed', name: '*', after: 0 } });
    await eventually(() => stalled.frames.some((frame) => frame.type === 'result' && frame.id === 100), 10_000, 'last subscribe');
    await publishMany(h, 600, 20, 10);
    stalled.bufferedAmount = 0;
    await eventually(() => stalled.events().length >= 620, 30_000, 'the replay of the last subscription');
    // Only the last subscription's replay sent anything: each event once.
    const received = stalled.events().map((frame) => (frame.event.data as { n: number }).n);
    expect(received).toEqual(Array.from({ length: 620 }, (_, n) => n));
    expect(session.parkedBytes).toBe(0);
    session.close(1000, 'done');
  }, 120_000);
});
