/**
 * A publisher and a requester under connection faults (an in-process gateway on SQLite, real
 * WebSockets, a partition proxy that holds the bytes): a write whose fate is unknown names its
 * event id, so that it is sent again with that id and stored once; request() rides out an
 * outage within its own timeout, and a request() made again with the id of an event already handled
 * ends with its outcome.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, EventflowError, type EventflowClient } from '@eventflow/core';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { startPartitionProxy, type PartitionProxy } from './partition-proxy.js';

let h: Harness | undefined;
let proxy: PartitionProxy | undefined;
const extra: EventflowClient[] = [];
afterEach(async () => {
  await Promise.all(extra.splice(0).map((client) => client.close({ drainTimeout: 100 })));
  await proxy?.close();
  proxy = undefined;
  await h?.stop();
});

/** A client that reaches the harness gateway through a partition proxy. */
async function partitionable(harness: Harness): Promise<EventflowClient> {
  proxy = await startPartitionProxy(Number(new URL(harness.gateway.url).port));
  const client = createClient(`ws://127.0.0.1:${proxy.port}/`, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
  extra.push(client);
  await client.ready();
  return client;
}

const rejection = async (promise: Promise<unknown>): Promise<EventflowError> => {
  const error = await promise.then(() => undefined, (cause: unknown) => cause);
  expect(error).toBeInstanceOf(EventflowError);
  return error as EventflowError;
};

describe('writes whose fate is unknown', () => {
  it('a publish sent and not answered in time names its event id and says it may be stored; sent again with that id it is stored once', async () => {
    h = await startHarness();
    const client = await partitionable(h);
    proxy!.partition();
    const error = await rejection(client.publish({ domain: 'orders', name: 'placed', pid: 'o1' }, { timeout: 300 }));
    expect(error.code).toBe('E_EVENTFLOW_REQUEST_TIMEOUT');
    expect(error.details).toMatchObject({ op: 'publish' });
    const id = error.details?.id as string;
    expect(typeof id).toBe('string');
    expect(error.message).toContain(id);
    // The bytes get through after all: the event was stored though the client gave up on it.
    proxy!.heal();
    const reader = h.client();
    await eventually(async () => (await reader.readEventlog('orders', 'o1')).length === 1, 5_000, 'the held publish to be stored');
    expect(await client.publish({ id, domain: 'orders', name: 'placed', pid: 'o1' })).toBe(id);
    expect((await reader.readEventlog('orders', 'o1')).map((event) => event.id)).toEqual([id]);
  });

  it('a publish never sent (the client offline the whole time) fails with E_EVENTFLOW_OFFLINE and names its event too', async () => {
    h = await startHarness();
    const client = h.client();
    await client.ready();
    await h.stopGateway();
    const error = await rejection(client.publish({ domain: 'orders', name: 'placed', pid: 'o1' }, { timeout: 200 }));
    expect(error.code).toBe('E_EVENTFLOW_OFFLINE');
    expect(typeof error.details?.id).toBe('string');
    expect(error.message).toContain(error.details?.id as string);
    await h.startGateway();
  });

  it('a request() aborted after its publish was sent names the event id and says it may be stored', async () => {
    h = await startHarness();
    const worker = h.client();
    await worker.consume('orders', 'place', async () => undefined);
    const client = await partitionable(h);
    proxy!.partition();
    const abort = new AbortController();
    const requesting = client.request({ domain: 'orders', name: 'place', pid: 'o1' }, { signal: abort.signal });
    // Sent: the client wrote the frames (the proxy holds them).
    await sleep(50);
    abort.abort();
    const error = await rejection(requesting);
    expect(error.code).toBe('E_EVENTFLOW_ABORTED');
    // The held frames get through: the event is stored, under the id the message named.
    proxy!.heal();
    const reader = h.client();
    const stored = await eventually(async () => (await reader.readEventlog('orders', 'o1'))[0], 5_000, 'the held publish to be stored');
    expect(error.message).toContain(`event ${stored.id}`);
  });
});

describe('request() across faults', () => {
  it('rides out a gateway outage shorter than its own timeout, though longer than the client requestTimeout', async () => {
    h = await startHarness();
    const worker = h.client();
    await worker.consume('orders', 'place', (event) => worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id }));
    const requester = h.client({ requestTimeout: 300 });
    await requester.ready();
    await h.stopGateway();
    const requesting = requester.request({ domain: 'orders', name: 'place', pid: 'o1' }, { timeout: 10_000 });
    requesting.catch(() => undefined);
    await sleep(600);
    await h.startGateway();
    const outcome = await requesting;
    expect(outcome.name).toBe('success');
  });

  it('made again with the id of an event already handled (its first answer lost), it ends with the outcome stored before', async () => {
    h = await startHarness();
    const worker = h.client();
    let handled = 0;
    await worker.consume('orders', 'place', (event) => (handled++, worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id })));
    const requester = h.client();
    const event = { id: 'order-o1-place', domain: 'orders', name: 'place', pid: 'o1' };
    const first = await requester.request(event, { timeout: 5_000 });
    const again = await requester.request(event, { timeout: 2_000 });
    expect(again.id).toBe(first.id);
    expect(handled).toBe(1);
  });

  it('sent into a partition that outlasts the heartbeat: the client reconnects, and the request ends with the outcome, its event stored and handled once', async () => {
    h = await startHarness();
    const worker = h.client();
    let handled = 0;
    await worker.consume('orders', 'place', (event) => (handled++, worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id })));
    proxy = await startPartitionProxy(Number(new URL(h.gateway.url).port));
    const requester = createClient(`ws://127.0.0.1:${proxy.port}/`, { heartbeatInterval: 200, handshakeTimeout: 500, reconnect: { minDelay: 20, maxDelay: 100 }, onError: () => undefined });
    extra.push(requester);
    await requester.ready();
    proxy.partition();
    const requesting = requester.request({ domain: 'orders', name: 'place', pid: 'o1' }, { timeout: 10_000 });
    requesting.catch(() => undefined);
    await eventually(() => requester.state !== 'open', 3_000, 'the partition to be noticed');
    // What the link held reaches the gateway now: the first connection's wait and publish, then its close.
    proxy.heal();
    const outcome = await requesting;
    expect(outcome.name).toBe('success');
    const events = await h.client().readEventlog('orders', 'o1');
    expect(events.map((event) => event.name)).toEqual(['place', 'success']);
    expect(handled).toBe(1);
  });
});

