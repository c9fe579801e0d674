/**
 * The outbox in Chromium against a real gateway: writes queued offline survive a new client (a
 * reload) and a gateway restart and are stored once, in order; two clients of one origin send
 * through one sender; a stale expectedVersion is refused on reconnect and rolled back; the budget
 * and the maximum age hold.
 */
import { commands } from 'vitest/browser';
import { expect, it, onTestFinished, vi } from 'vitest';
import { deleteDB } from 'idb';
import { EventflowError, webSocketConnector, type Connector, type Transport } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { BrowserClient, type BrowserClientOptions, type EventlogSnapshot } from '../src/index.js';
import { createOutbox, type OutboxRejection } from '../src/outbox.js';
import { browserClient, cacheName, gateway, ids, otherClient, record, storedAt } from './helpers.js';

const domain = 'orders';

/** A cache name whose outbox database is deleted after the test too. */
function outboxName(): string {
  const name = cacheName();
  onTestFinished(() => deleteDB(`eventflow-outbox:${name}`));
  return name;
}

/** A client with an outbox (the helpers' fast reconnect). */
function outboxClient(url: string, name: string, options: Parameters<typeof createOutbox>[0] = {}, more: BrowserClientOptions = {}): BrowserClient {
  return browserClient(url, name, { outbox: createOutbox(options), onError: () => undefined, ...more });
}

/** A connector that refuses to connect while `offline`, and drops the open connection when set offline: one tab's network. */
function network(url: string): { connect: Connector; offline(): void; online(): void } {
  const ws = webSocketConnector(url);
  let down = false;
  let current: Transport | undefined;
  return {
    connect: async (signal) => {
      if (down) throw new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', 'offline (test network)');
      return (current = await ws(signal));
    },
    offline: () => {
      down = true;
      current?.close(4999, 'offline');
    },
    online: () => {
      down = false;
    },
  };
}

/** Every state a watch showed after the first one holding all of `keys` also holds them: no frame without a pending write. */
function neverLoses(snapshots: readonly EventlogSnapshot[], keys: string[]): void {
  const first = snapshots.findIndex((snapshot) => keys.every((key) => snapshot.state[key] === true));
  expect(first).toBeGreaterThanOrEqual(0);
  for (const snapshot of snapshots.slice(first)) expect(keys.filter((key) => snapshot.state[key] !== true)).toEqual([]);
}

it('offline: three publishes survive a reload and a gateway restart, are stored once and in order, pending → confirmed', async () => {
  const { handle, url } = await gateway();
  const name = outboxName();
  const placed = await otherClient(url).publish({ domain, name: 'placed', pid: 'order-1', data: { status: 'placed' } });
  const before = outboxClient(url, name);
  const shownBefore = record(before, domain, 'order-1');
  // The dashboard has seen the order (views show pending writes on top of a known state).
  await eventually(() => shownBefore.last()?.stale === false, 5_000, 'the order');
  await storedAt(name, domain, 'order-1', 1);
  await commands.gatewayStop(handle);
  await eventually(() => before.state !== 'open', 5_000, 'offline');
  // Resolves with the id at once, offline.
  const sent = [];
  for (const step of [1, 2, 3]) sent.push(await before.publish({ domain, name: 'noted', pid: 'order-1', data: { [`s${step}`]: true, last: step } }));
  expect(before.outbox?.entries.map((entry) => entry.id)).toEqual(sent);
  await eventually(() => shownBefore.last()?.pending.length === 3, 5_000, 'three pending in the view');
  expect(shownBefore.last()).toMatchObject({ stale: true, position: 1, state: { status: 'placed', s1: true, s2: true, s3: true, last: 3 } });
  await before.close();

  // The page again: the entries come back from IndexedDB.
  const after = outboxClient(url, name);
  const shown = record(after, domain, 'order-1');
  await after.outbox?.loaded;
  expect(after.outbox?.entries.map((entry) => entry.id)).toEqual(sent);
  await eventually(() => shown.last()?.pending.length === 3, 5_000, 'three pending after the reload');

  await commands.gatewayRestart(handle);
  await eventually(() => after.outbox?.entries.length === 0 && shown.last()?.pending.length === 0 && shown.last()?.position === 4, 15_000, 'the three confirmed');
  expect(shown.last()).toMatchObject({ stale: false, state: { s1: true, s2: true, s3: true, last: 3 } });
  neverLoses(shown.snapshots, ['s1', 's2', 's3']);
  expect(ids(await otherClient(url).readEventlog(domain, 'order-1'))).toEqual([placed, ...sent]);
});

it('two clients of one origin, both offline: every write stored once, sent by one of them', async () => {
  const { handle, url } = await gateway();
  const name = outboxName();
  await commands.gatewayStop(handle);
  const first = outboxClient(url, name);
  const second = outboxClient(url, name);
  const calls = [vi.spyOn(first, 'call'), vi.spyOn(second, 'call')];
  const a = await first.publish({ domain, name: 'noted', pid: 'order-2', data: { a: true } });
  const b = await second.publish({ domain, name: 'noted', pid: 'order-2', data: { b: true } });
  // Each sees the other's entry (BroadcastChannel), in the order they were queued.
  await eventually(() => first.outbox?.entries.length === 2 && second.outbox?.entries.length === 2, 5_000, 'both entries in both clients');
  expect(second.outbox?.entries.map((entry) => entry.id)).toEqual([a, b]);

  await commands.gatewayRestart(handle);
  await eventually(() => first.outbox?.entries.length === 0 && second.outbox?.entries.length === 0, 15_000, 'both outboxes empty');
  expect(ids(await otherClient(url).readEventlog(domain, 'order-2'))).toEqual([a, b]);
  const publishes = calls.map((spy) => spy.mock.calls.filter(([op]) => op === 'publish').length);
  expect(publishes.toSorted()).toEqual([0, 2]);
});

it('a queued publish with a stale expectedVersion is refused on reconnect, rolled back and reported', async () => {
  const { url } = await gateway();
  const name = outboxName();
  const other = otherClient(url);
  await other.publish({ domain, name: 'placed', pid: 'order-3', data: { status: 'placed' } });
  const net = network(url);
  const rejected: OutboxRejection[] = [];
  const client = new BrowserClient(net.connect, { reconnect: { minDelay: 50, maxDelay: 200 }, cache: { name }, onError: () => undefined, outbox: createOutbox({ onRejected: (rejection) => rejected.push(rejection) }) });
  onTestFinished(() => client.close());
  const shown = record(client, domain, 'order-3');
  await eventually(() => shown.last()?.position === 1 && !shown.last()?.stale, 5_000, 'the placed order');

  net.offline();
  await eventually(() => client.state !== 'open', 5_000, 'offline');
  const acked = client.publish({ domain, name: 'cancelled', pid: 'order-3', data: { status: 'cancelled' } }, { expectedVersion: 1, ack: true });
  acked.catch(() => undefined);
  await eventually(() => shown.last()?.state['status'] === 'cancelled' && shown.last()?.pending.length === 1, 5_000, 'cancelled, pending');
  // Meanwhile someone else writes: version 1 is stale when the entry is sent.
  await other.publish({ domain, name: 'shipped', pid: 'order-3', data: { status: 'shipped' } });

  net.online();
  await expect(acked).rejects.toMatchObject({ code: 'E_EVENTFLOW_VERSION_CONFLICT' });
  await eventually(() => shown.last()?.state['status'] === 'shipped' && shown.last()?.pending.length === 0, 10_000, 'rolled back to the stored state');
  expect(rejected.map(({ error }) => error.code)).toEqual(['E_EVENTFLOW_VERSION_CONFLICT']);
  expect(client.outbox?.rejections.map(({ entry }) => entry.event.name)).toEqual(['cancelled']);
  expect(client.outbox?.entries).toEqual([]);
  expect((await other.readEventlog(domain, 'order-3')).map((event) => event.name)).toEqual(['placed', 'shipped']);
  expect(await client.readEventlogState(domain, 'order-3')).toEqual({ status: 'shipped' });
});

it('acknowledged entries become confirmed without a frame that lacks them (online, ack: true)', async () => {
  const { url } = await gateway();
  const client = outboxClient(url, outboxName());
  const shown = record(client, domain, 'order-4');
  await eventually(() => shown.last()?.stale === false, 5_000, 'caught up');
  const id = await client.publish({ domain, name: 'noted', pid: 'order-4', data: { x: true } }, { ack: true });
  await eventually(() => shown.last()?.position === 1 && shown.last()?.pending.length === 0, 5_000, 'confirmed');
  neverLoses(shown.snapshots, ['x']);
  expect(ids(shown.last()!.events)).toEqual([id]);
});

it('bounded: a full outbox refuses with E_EVENTFLOW_OUTBOX_FULL; an entry older than maxAge is rejected, not sent; drop removes one', async () => {
  const { handle, url } = await gateway();
  const name = outboxName();
  await commands.gatewayStop(handle);
  const client = outboxClient(url, name, { maxBytes: 400, maxAge: 60_000 });
  const kept = await client.publish({ domain, name: 'noted', pid: 'order-5', data: { text: 'x'.repeat(100) } });
  const dropped = await client.publish({ domain, name: 'noted', pid: 'order-5', data: { text: 'y'.repeat(100) } });
  await expect(client.publish({ domain, name: 'noted', pid: 'order-5', data: { text: 'z'.repeat(300) } })).rejects.toMatchObject({ code: 'E_EVENTFLOW_OUTBOX_FULL', details: { maxBytes: 400 } });
  expect(await client.outbox?.drop(dropped)).toBe(true);
  expect(client.outbox?.entries.map((entry) => entry.id)).toEqual([kept]);
  await client.close();

  // A minute later (the clock moved on): the entry is past maxAge and is rejected instead of sent.
  const later = Date.now() + 61_000;
  vi.spyOn(Date, 'now').mockImplementation(() => later);
  onTestFinished(() => {
    vi.restoreAllMocks();
  });
  const rejected: OutboxRejection[] = [];
  const next = outboxClient(url, name, { maxAge: 60_000, onRejected: (rejection) => rejected.push(rejection) });
  await commands.gatewayRestart(handle);
  await eventually(() => rejected.length === 1, 10_000, 'the old entry rejected');
  expect(rejected[0]).toMatchObject({ entry: { id: kept }, error: { code: 'E_EVENTFLOW_OUTBOX_EXPIRED' } });
  expect(next.outbox?.entries).toEqual([]);
  expect(await otherClient(url).readEventlog(domain, 'order-5')).toEqual([]);
});

it("an entry over the gateway's frame limit is rejected for good (E_EVENTFLOW_INVALID_INPUT, bytes and limit), never sent; the connection and the watch stay up, the entry after it is stored, and a reload does not send it again", async () => {
  const limit = 4096;
  const { url } = await gateway({ EVENTFLOW_MAX_FRAME_BYTES: limit });
  const name = outboxName();
  const ws = webSocketConnector(url);
  let connections = 0;
  const connect: Connector = async (signal) => {
    const transport = await ws(signal);
    connections++;
    return transport;
  };
  const rejected: OutboxRejection[] = [];
  // A short request timeout: before the fix, the entry closed every connection (1009) until it timed out, and was sent again a second later, for ever.
  const client = new BrowserClient(connect, { reconnect: { minDelay: 50, maxDelay: 200 }, requestTimeout: 3_000, cache: { name }, onError: () => undefined, outbox: createOutbox({ onRejected: (rejection) => rejected.push(rejection) }) });
  onTestFinished(() => client.close());
  const shown = record(client, domain, 'order-6');
  await eventually(() => shown.last()?.stale === false, 5_000, 'caught up');
  const states: string[] = [];
  client.onStateChange((state) => states.push(state));
  const calls = vi.spyOn(client, 'call');

  const big = client.publish({ domain, name: 'noted', pid: 'order-6', data: { text: 'é'.repeat(3_000) } }, { ack: true });
  big.catch(() => undefined);
  const small = client.publish({ domain, name: 'noted', pid: 'order-6', data: { fits: true } }, { ack: true });
  await eventually(() => rejected.length > 0, 8_000, 'the entry over the limit rejected');
  await expect(big).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', details: { limit } });
  const [{ entry, error }] = rejected as [OutboxRejection];
  expect(error.code).toBe('E_EVENTFLOW_INVALID_INPUT');
  expect(error.message).toMatch(/^publish: \d+ bytes, over the gateway's frame limit of 4096 \(EVENTFLOW_MAX_FRAME_BYTES\); send less data in one request$/);
  expect((error.details as { bytes: number }).bytes).toBeGreaterThan(limit);
  expect(client.outbox?.rejections.map((rejection) => rejection.entry.id)).toEqual([entry.id]);

  // The entry after it went out on the same connection, and the watch (a live subscription) shows it confirmed.
  const stored = await small;
  await eventually(() => shown.last()?.position === 1 && shown.last()?.pending.length === 0, 5_000, 'the entry that fits, confirmed');
  expect(shown.last()?.state).toEqual({ fits: true });
  expect(ids(await otherClient(url).readEventlog(domain, 'order-6'))).toEqual([stored]);
  expect(client.outbox?.entries).toEqual([]);
  expect(connections).toBe(1);
  expect(states).toEqual([]);
  // Tried once, refused in the client, not retried.
  expect(calls.mock.calls.filter(([op, params]) => op === 'publish' && (params as { event: { id: string } }).event.id === entry.id)).toHaveLength(1);

  // The page again: the rejected entry is not in IndexedDB any more, so nothing sends it again.
  await client.close();
  const again = outboxClient(url, name);
  await again.outbox?.loaded;
  expect(again.outbox?.entries).toEqual([]);
});

/** An unsigned JWT (a gateway without EVENTFLOW_AUTH ignores it): only the client reads its claims. */
const jwt = (claims: Record<string, unknown>): string => [{ alg: 'none' }, claims].map((part) => btoa(JSON.stringify(part)).replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_')).join('.') + '.sig-' + crypto.randomUUID();

it("never sends an entry under another identity's token: held for the one that queued it, sent when it is back (a refreshed token included)", async () => {
  const { handle, url } = await gateway();
  const name = outboxName();
  await commands.gatewayStop(handle);
  // Alice queues offline, then signs out.
  const alice = outboxClient(url, name, {}, { token: jwt({ iss: 'shop', sub: 'alice', exp: 1 }) });
  const hers = await alice.publish({ domain, name: 'noted', pid: 'order-9', data: { by: 'alice' } });
  await alice.close();

  // Bob, at the same browser, with the same cache name: he does not see hers, and sends only his.
  await commands.gatewayRestart(handle);
  const bob = outboxClient(url, name, {}, { token: () => jwt({ iss: 'shop', sub: 'bob' }) });
  const calls = vi.spyOn(bob, 'call');
  await bob.outbox?.loaded;
  expect(bob.outbox?.entries).toEqual([]);
  const his = await bob.publish({ domain, name: 'noted', pid: 'order-9', data: { by: 'bob' } });
  await eventually(() => bob.outbox?.entries.length === 0, 10_000, "bob's entry sent");
  expect(ids(await otherClient(url).readEventlog(domain, 'order-9'))).toEqual([his]);
  expect(calls.mock.calls.filter(([op]) => op === 'publish').map(([, params]) => (params as { event: { id: string } }).event.id)).toEqual([his]);
  await bob.close();

  // Alice again, with a fresh token of the same subject: hers goes now.
  const again = outboxClient(url, name, {}, { token: jwt({ iss: 'shop', sub: 'alice', exp: 2 }) });
  await again.outbox?.loaded;
  expect(again.outbox?.entries.map((entry) => [entry.id, entry.identity])).toEqual([[hers, '["shop","alice"]']]);
  await eventually(() => again.outbox?.entries.length === 0, 10_000, "alice's entry sent");
  expect(ids(await otherClient(url).readEventlog(domain, 'order-9'))).toEqual([his, hers]);
});
