/**
 * A request over the gateway's frame limit (EVENTFLOW_MAX_FRAME_BYTES, announced as welcome.limits.maxFrameBytes)
 * from the Node client (its corked transport over core's request manager, which answers it): E_EVENTFLOW_INVALID_INPUT
 * at once, the connection staying up. Before, the gateway closed the connection (1009), the client sent the request
 * again on each new one, and the call ended in E_EVENTFLOW_REQUEST_TIMEOUT after ~200 reconnects, every subscription
 * and consumer of the client dropped with each.
 */
import { afterEach, expect, it } from 'vitest';
import { isEventflowError, type StoredEvent } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { createNodeClient, type EventflowClient } from '../src/index.js';

let h: Harness | undefined;
const clients: EventflowClient[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  await h?.stop();
  h = undefined;
});

function client(harness: Harness): EventflowClient {
  const made = createNodeClient(harness.gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
  clients.push(made);
  return made;
}

it('a publish, a request() and a schedule over the frame limit fail at once with E_EVENTFLOW_INVALID_INPUT; the connection stays up and what fits goes through', async () => {
  h = await startHarness({ EVENTFLOW_MAX_FRAME_BYTES: 4096 });
  const publisher = client(h);
  const states: string[] = [];
  publisher.onStateChange((state) => states.push(state));
  const seen: StoredEvent[] = [];
  await publisher.subscribe('big', 'put', (event) => void seen.push(event));

  // ASCII over the limit, and non-ASCII under it in characters but over it in bytes (2 bytes each in UTF-8).
  for (const text of ['x'.repeat(5_000), 'é'.repeat(3_000)]) {
    const started = Date.now();
    const failure = await publisher.publish({ domain: 'big', name: 'put', pid: 'p', data: { text } }, { timeout: 5_000 }).catch((error: unknown) => error);
    expect(isEventflowError(failure, 'E_EVENTFLOW_INVALID_INPUT')).toBe(true);
    expect((failure as Error).message).toMatch(/^publish: \d+ bytes, over the gateway's frame limit of 4096 \(EVENTFLOW_MAX_FRAME_BYTES\); send less data in one request$/);
    expect((failure as { details?: unknown }).details).toMatchObject({ limit: 4096, bytes: expect.any(Number) });
    expect(Date.now() - started).toBeLessThan(1_000);
  }
  const requested = await publisher.request({ domain: 'big', name: 'ask', pid: 'p', data: { text: 'y'.repeat(5_000) } }, { timeout: 5_000 }).catch((error: unknown) => error);
  expect(isEventflowError(requested, 'E_EVENTFLOW_INVALID_INPUT')).toBe(true);
  const scheduled = await publisher.schedule(new Date(Date.now() + 60_000), { domain: 'big', name: 'put', pid: 'p', data: { text: 'z'.repeat(5_000) } }).catch((error: unknown) => error);
  expect(isEventflowError(scheduled, 'E_EVENTFLOW_INVALID_INPUT')).toBe(true);

  // The same connection: nothing dropped, and a publish that fits is stored and delivered.
  await publisher.publish({ domain: 'big', name: 'put', pid: 'p', data: { text: 'fits' } });
  await eventually(() => seen.length === 1, 5_000, 'the event that fits, delivered');
  expect(seen.map((event) => event.data)).toEqual([{ text: 'fits' }]);
  expect(states.filter((state) => state !== 'open')).toEqual([]);
  expect(states.length).toBeLessThanOrEqual(1);
});
