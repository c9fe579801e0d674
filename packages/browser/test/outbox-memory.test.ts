/**
 * The outbox where there is no IndexedDB (Node here): its entries live in its own list for the
 * page's life, against a real gateway: queued while the gateway is down, each with its own `seq`,
 * dropped, then sent once connected, in order and once, and acknowledged with `ack`.
 */
import { afterEach, expect, it } from 'vitest';
import { createBrowserClient, type BrowserClient } from '@eventflow/browser';
import { createOutbox } from '@eventflow/browser/outbox';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
let client: BrowserClient | undefined;
afterEach(async () => {
  await client?.close();
  await h?.stop();
  client = h = undefined;
});

it('without IndexedDB keeps the entries in memory: queued offline, dropped, sent once connected, acked', async () => {
  expect(typeof indexedDB).toBe('undefined');
  h = await startHarness();
  const { url } = h.gateway;
  await h.stopGateway();
  client = createBrowserClient(url, { outbox: createOutbox(), reconnect: { minDelay: 20, maxDelay: 100 }, onError: () => undefined });
  const outbox = client.outbox!;
  await outbox.loaded;
  const first = await client.publish({ domain: 'd', name: 'noted', pid: 'p', data: { n: 1 } });
  const dropped = await client.publish({ domain: 'd', name: 'noted', pid: 'p', data: { n: 2 } });
  const third = await client.publish({ domain: 'd', name: 'noted', pid: 'p', data: { n: 3 } });
  expect(outbox.entries.map((entry) => entry.id)).toEqual([first, dropped, third]);
  expect(new Set(outbox.entries.map((entry) => entry.seq)).size).toBe(3);
  expect(await outbox.drop(dropped)).toBe(true);
  expect(await outbox.drop(dropped)).toBe(false);
  expect(outbox.entries.map((entry) => entry.id)).toEqual([first, third]);

  await h.startGateway();
  await expect.poll(() => outbox.entries.length).toBe(0);
  const acked = client.publish({ domain: 'd', name: 'noted', pid: 'p', data: { n: 4 } }, { ack: true });
  const fourth = await acked;
  const reader = h.client();
  expect((await reader.readEventlog('d', 'p')).map((event) => event.id)).toEqual([first, third, fourth]);
  expect(await client.readEventlogState('d', 'p')).toEqual({ n: 4 });
});

it('an entry queued with `ack` as the client closes: the ack rejects with E_EVENTFLOW_CLIENT_CLOSED (the entry stays queued) instead of never settling', async () => {
  h = await startHarness();
  const { url } = h.gateway;
  // Offline: nothing sends the entry, so only close() can settle its ack.
  await h.stopGateway();
  client = createBrowserClient(url, { outbox: createOutbox(), reconnect: { minDelay: 20, maxDelay: 100 }, onError: () => undefined });
  await client.outbox!.loaded;
  const acked = client.publish({ domain: 'd', name: 'noted', pid: 'p', data: { n: 1 } }, { ack: true });
  // Closed while the entry is being stored: before, its ack's waiter was registered after close() had rejected the
  // waiting ones, and `await publish(…, { ack: true })` never returned.
  await client.close();
  const outcome = await Promise.race([
    acked.then(
      () => 'acked',
      (error: unknown) => (error as { code?: string }).code,
    ),
    new Promise((resolve) => setTimeout(resolve, 1_000, 'still pending')),
  ]);
  expect(outcome).toBe('E_EVENTFLOW_CLIENT_CLOSED');
});
