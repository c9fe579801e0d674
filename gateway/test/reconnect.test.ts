/**
 * Reconnects: the client re-registers subscriptions, consumers and waits by itself, resumes
 * subscriptions from their last position, and resends requests queued while disconnected.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryPair, EventflowClient, type ConnectionState, type StoredEvent } from '@eventflow/core';
import { eventually, fence, isFence } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness;
beforeEach(async () => (h = await startHarness()));
afterEach(async () => h.stop());

describe('reconnect', () => {
  it('a gateway restart: state goes offline → open, subscriptions resume with no gaps or duplicates', async () => {
    const client = h.client();
    const states: ConnectionState[] = [];
    client.onStateChange((state) => states.push(state));
    const seen: StoredEvent[] = [];
    await client.subscribe('orders', '*', (event) => seen.push(event));
    const publisher = h.client();
    await publisher.publish({ domain: 'orders', name: 'a', pid: 'p' });
    await eventually(() => seen.length === 1, 5_000, 'first event');

    await h.gateway.close();
    // Published while the subscriber is disconnected, straight into the store.
    const offline = await startOnSameFile();
    const missed: string[] = [];
    for (let i = 0; i < 5; i++) missed.push((await offline.publish({ domain: 'orders', name: `m${i}`, pid: 'p' })));
    await offline.stop();

    await h.restart();
    await eventually(() => client.state === 'open', 5_000, 'reconnected');
    await publisher.publish({ domain: 'orders', name: 'after', pid: 'p' });
    await eventually(() => seen.length === 7, 5_000, 'replayed and live events');
    expect(seen.map((event) => event.name)).toEqual(['a', 'm0', 'm1', 'm2', 'm3', 'm4', 'after']);
    expect(new Set(seen.map((event) => event.id)).size).toBe(7);
    expect(states).toContain('offline');
    expect(states.at(-1)).toBe('open');
  });

  it('a resume longer than one replay page delivers every missed event once, in order', async () => {
    const client = h.client();
    const seen: number[] = [];
    await client.subscribe('bulk', 'n', (event) => void (isFence(event) || seen.push(event.position)));
    await h.gateway.close();
    const offline = await startOnSameFile();
    for (let i = 0; i < 1_200; i++) await offline.publish({ domain: 'bulk', name: i % 2 ? 'n' : 'other', pid: 'p' });
    await offline.stop();
    await h.restart();
    await eventually(() => seen.length === 600, 10_000, '600 missed events');
    // A marker down the same subscription, after the replay: a duplicate would have come before it.
    await h.fence(client, 'bulk', 'n');
    expect(seen).toHaveLength(600);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
  });

  it('consumers and waits are registered again without the caller doing anything', async () => {
    const worker = h.client();
    const handled: string[] = [];
    await worker.consume('jobs', 'run', async (event) => void handled.push(event.pid));
    const waiter = h.client();
    const waiting = waiter.wait('jobs', 'p2', ['success'], 10_000);
    await eventually(() => h.gateway.dispatcher.stats.waits === 1, 5_000, 'wait registered');

    await h.restart();
    await eventually(() => h.gateway.dispatcher.stats.consumers === 1 && h.gateway.dispatcher.stats.waits === 1, 5_000, 're-registered');

    const publisher = h.client();
    await publisher.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await publisher.publish({ domain: 'jobs', name: 'success', pid: 'p2' });
    await eventually(() => handled.length === 1, 5_000, 'consumed after reconnect');
    expect((await waiting).pid).toBe('p2');
  });

  it('a consumer that was away gets, once each, the events nobody consumed meanwhile', async () => {
    const worker = h.client();
    const handled: string[] = [];
    await worker.consume('jobs', 'run', async (event) => void handled.push(event.id));
    const before = await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p-before' });
    await eventually(() => handled.length === 1, 5_000, 'the first job');
    // Its outcome stored before the stop: the handler ran, and the settle follows it (a stop without a
    // drain hands an unsettled job back, and it would be delivered again).
    await eventually(() => h.gateway.dispatcher.stats.deliveries === 0, 5_000, 'the first job settled');
    await h.gateway.close();
    // Published while the worker is away and nobody else consumes: unclaimed (marked orphan).
    const offline = await startOnSameFile();
    const missed: string[] = [];
    for (let i = 0; i < 5; i++) missed.push(await offline.publish({ domain: 'jobs', name: 'run', pid: `p${i}` }));
    await offline.stop();
    await h.restart();
    await eventually(() => handled.length === 6, 10_000, 'the missed jobs');
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p-after' });
    await eventually(() => handled.length === 7, 5_000, 'a live job after the catch-up');
    expect(handled.slice(0, 6)).toEqual([before, ...missed]);
    expect(new Set(handled).size).toBe(7);
  });

  it('a wait finds an outcome stored while it was disconnected', async () => {
    const waiter = h.client();
    const waiting = waiter.wait('jobs', 'p1', ['success'], 10_000);
    await eventually(() => h.gateway.dispatcher.stats.waits === 1, 5_000, 'wait registered');
    await h.gateway.close();
    const offline = await startOnSameFile();
    const id = await offline.publish({ domain: 'jobs', name: 'success', pid: 'p1' });
    await offline.stop();
    await h.restart();
    expect((await waiting).id).toBe(id);
  });

  it('requests made while disconnected are sent once the connection is back', async () => {
    const client = h.client();
    await client.ready();
    await h.gateway.close();
    await eventually(() => client.state === 'offline', 5_000, 'disconnected');
    const publishing = client.publish({ domain: 'd', name: 'n', pid: 'p' }, { timeout: 10_000 });
    // Time is what is tested: the request waits out a stretch offline before the gateway is back.
    await new Promise((resolve) => setTimeout(resolve, 100));
    await h.restart();
    const id = await publishing;
    expect((await h.client().read(id)).id).toBe(id);
  });

  it('subscribe → unsubscribe → subscribe (React StrictMode) leaves exactly one subscription at the gateway', async () => {
    const client = h.client();
    await client.ready();
    const listener = (): void => undefined;
    const first = client.subscribe('d', 'n', listener);
    const off = client.unsubscribe('d', 'n', listener);
    const second = client.subscribe('d', 'n', listener);
    await Promise.all([first, off, second]);
    await eventually(() => h.gateway.dispatcher.stats.subscriptions === 1, 2_000, 'one subscription');
    // A round trip: every frame the client sent before it has reached the gateway.
    await fence(() => client.readEventlog('d', 'p'));
    expect(h.gateway.dispatcher.stats.subscriptions).toBe(1);
    await client.unsubscribe('d', 'n', listener);
    await eventually(() => h.gateway.dispatcher.stats.subscriptions === 0, 2_000, 'none left');
  });

  it('subscribe and consume give up on abort while disconnected, and are not registered later', async () => {
    const client = h.client();
    await client.ready();
    await h.gateway.close();
    await eventually(() => client.state === 'offline', 5_000, 'disconnected');
    const controller = new AbortController();
    const subscribing = client.subscribe('d', 'n', () => undefined, { signal: controller.signal });
    const consuming = client.consume('d', 'n', async () => undefined, { signal: controller.signal });
    controller.abort();
    await expect(subscribing).rejects.toMatchObject({ code: 'E_EVENTFLOW_ABORTED' });
    await expect(consuming).rejects.toMatchObject({ code: 'E_EVENTFLOW_ABORTED' });
    await h.restart();
    await eventually(() => client.state === 'open', 5_000, 'reconnected');
    await client.call('ping', {});
    expect(h.gateway.dispatcher.stats).toMatchObject({ subscriptions: 0, consumers: 0 });
  });

  it('close() rejects pending waits with E_EVENTFLOW_CLIENT_CLOSED, and the client refuses further calls', async () => {
    const client = h.client();
    const waiting = client.wait('d', 'p', ['x'], 10_000);
    await client.close();
    await expect(waiting).rejects.toMatchObject({ code: 'E_EVENTFLOW_CLIENT_CLOSED' });
    expect(client.state).toBe('closed');
    // A method that returns a promise rejects it rather than throwing.
    await expect(client.call('ping', {})).rejects.toMatchObject({ code: 'E_EVENTFLOW_CLIENT_CLOSED' });
    await expect(client.ready()).rejects.toMatchObject({ code: 'E_EVENTFLOW_CLIENT_CLOSED' });
  });

  it('works over the in-memory transport pair as over WebSocket', async () => {
    const client = new EventflowClient(async () => {
      const [clientEnd, gatewayEnd] = createMemoryPair();
      h.gateway.accept(gatewayEnd);
      return clientEnd;
    });
    try {
      const seen: string[] = [];
      await client.subscribe('mem', '*', (event) => seen.push(event.name));
      await client.publish({ domain: 'mem', name: 'hello', pid: 'p' });
      await eventually(() => seen.length === 1, 2_000, 'event over memory transport');
      expect(seen).toEqual(['hello']);
    } finally {
      await client.close();
    }
  });
});

/** A second gateway on the harness's database file, for writing while the first one is down. */
async function startOnSameFile(): Promise<{ publish(event: { domain: string; name: string; pid: string }): Promise<string>; stop(): Promise<void> }> {
  const { startGateway } = await import('../src/index.js');
  const { createClient } = await import('@eventflow/core');
  const gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: h.dbPath, EVENTFLOW_LOG_LEVEL: 'silent' });
  const client = createClient(gateway.url);
  return {
    publish: (event) => client.publish(event),
    async stop() {
      await client.close();
      await gateway.close();
    },
  };
}
