/**
 * The browser client and a request over the gateway's frame limit (EVENTFLOW_MAX_FRAME_BYTES), in Chromium against a
 * real gateway: core's request manager answers it E_EVENTFLOW_INVALID_INPUT (`details.bytes`, `details.limit`) and
 * never sends it, so the platform WebSocket stays open and subscriptions stay live. Before, the gateway closed the
 * connection (1009), the client sent the request again on each new one until its timeout, and every subscription was
 * dropped with each.
 */
import { expect, it, onTestFinished } from 'vitest';
import { isEventflowError, webSocketConnector, type Connector, type StoredEvent } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { BrowserClient } from '../src/index.js';
import { cacheName, gateway } from './helpers.js';

it('a publish over the frame limit fails at once with E_EVENTFLOW_INVALID_INPUT; the connection and a subscription stay up', async () => {
  const limit = 4096;
  const { url } = await gateway({ EVENTFLOW_MAX_FRAME_BYTES: limit });
  const ws = webSocketConnector(url);
  let connections = 0;
  const connect: Connector = async (signal) => {
    const transport = await ws(signal);
    connections++;
    return transport;
  };
  const client = new BrowserClient(connect, { reconnect: { minDelay: 50, maxDelay: 200 }, cache: { name: cacheName() }, onError: () => undefined });
  onTestFinished(() => client.close());
  const seen: StoredEvent[] = [];
  await client.subscribe('big', 'put', (event) => void seen.push(event));
  const states: string[] = [];
  client.onStateChange((state) => states.push(state));

  const started = Date.now();
  // Under the limit in characters, over it in UTF-8 bytes (2 each).
  const failure = await client.publish({ domain: 'big', name: 'put', pid: 'p', data: { text: 'é'.repeat(3_000) } }, { timeout: 3_000 }).catch((error: unknown) => error);
  expect(isEventflowError(failure, 'E_EVENTFLOW_INVALID_INPUT'), String(failure)).toBe(true);
  expect(Date.now() - started).toBeLessThan(1_000);
  const { message, details } = failure as Error & { details?: { bytes?: number; limit?: number } };
  expect(message).toMatch(/^publish: \d+ bytes, over the gateway's frame limit of 4096 \(EVENTFLOW_MAX_FRAME_BYTES\); send less data in one request$/);
  expect(details).toEqual({ bytes: expect.any(Number), limit });
  expect(details?.bytes).toBeGreaterThan(limit);

  const id = await client.publish({ domain: 'big', name: 'put', pid: 'p', data: { text: 'fits' } });
  await eventually(() => seen.length === 1, 5_000, 'the event that fits, delivered');
  expect(seen.map((event) => event.id)).toEqual([id]);
  expect(connections).toBe(1);
  expect(states).toEqual([]);
});
