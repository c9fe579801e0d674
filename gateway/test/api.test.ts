/**
 * Every client API method against a real gateway, over real WebSockets, on a real SQLite file.
 * Includes the v4 spoke test scenarios and the v4 listener defects that must not come back.
 */
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EventflowError, type StoredEvent } from '@eventflow/core';
import { eventually, fence, isFence, sleep } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness;
beforeEach(async () => (h = await startHarness()));
afterEach(async () => h.stop());

/** The v4 delivery columns of an event, read straight from the SQLite file. */
function published(id: string): Record<string, string | null> | undefined {
  const db = new Database(h.dbPath, { readonly: true });
  try {
    return db.prepare('SELECT * FROM event_published WHERE event_id = ?').get(id) as Record<string, string | null> | undefined;
  } finally {
    db.close();
  }
}

/** Collects the events a listener receives, leaving out fence markers (`h.fence`). */
function collector(): { events: StoredEvent[]; listener: (event: StoredEvent) => void } {
  const events: StoredEvent[] = [];
  return { events, listener: (event) => void (isFence(event) || events.push(event)) };
}

describe('v4 spoke scenarios', () => {
  it('subscribe: a subscriber receives the published event with its data', async () => {
    const client = h.client();
    const { events, listener } = collector();
    await client.subscribe('orders', 'placed', listener);
    const id = await client.publish({ domain: 'orders', name: 'placed', pid: 'p1', data: { sku: 'a' } });
    await eventually(() => events.length === 1, 5_000, 'event');
    expect(events[0]).toMatchObject({ id, domain: 'orders', name: 'placed', pid: 'p1', data: { sku: 'a' } });
  });

  it('consume: the consumer gets the event and its success is stored', async () => {
    const client = h.client();
    const seen: StoredEvent[] = [];
    await client.consume('orders', 'placed', async (event) => void seen.push(event));
    const id = await client.publish({ domain: 'orders', name: 'placed', pid: 'p1', data: { n: 1 } });
    await eventually(() => published(id)?.success, 5_000, 'success');
    expect(seen.map((event) => event.id)).toEqual([id]);
    expect(published(id)).toMatchObject({ consumer: h.gateway.id, failed: null });
  });

  it('consume: a throwing consumer marks the event failed', async () => {
    const client = h.client();
    await client.consume('orders', 'placed', () => {
      throw new Error('boom');
    });
    const id = await client.publish({ domain: 'orders', name: 'placed', pid: 'p1' });
    await eventually(() => published(id)?.failed, 5_000, 'failed');
    expect(published(id)?.success).toBeNull();
  });

  it('wait: resolves with the whole outcome event', async () => {
    const client = h.client();
    const waiting = client.wait('orders', 'p1');
    await eventually(() => h.gateway.dispatcher.stats.waits === 1, 5_000, 'wait registered');
    const id = await client.publish({ domain: 'orders', name: 'success', pid: 'p1', data: { ok: true } });
    const outcome = await waiting;
    expect(outcome).toMatchObject({ id, name: 'success', pid: 'p1', data: { ok: true } });
  });

  it('wait: ignores other pids and other names, and times out with E_EVENTFLOW_WAIT_TIMEOUT', async () => {
    const client = h.client();
    const waiting = client.wait('orders', 'p1', ['success'], 300);
    await client.publish({ domain: 'orders', name: 'success', pid: 'p2' });
    await client.publish({ domain: 'orders', name: 'failed', pid: 'p1' });
    const error = await waiting.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EventflowError);
    expect((error as EventflowError).code).toBe('E_EVENTFLOW_WAIT_TIMEOUT');
    expect((error as EventflowError).message).toBe('wait timed out (300) for orders › p1 › success');
  });

  it('schedule: the event is routed once at its due time, not before', async () => {
    const client = h.client();
    const { events, listener } = collector();
    await client.subscribe('reminders', 'due', listener);
    const at = Date.now() + 400;
    const id = await client.schedule(new Date(at), { domain: 'reminders', name: 'due', pid: 'r1', data: { x: 1 } });
    // Time is what is tested: the scheduler's timer has not fired before the due time.
    await sleep(150);
    expect(events).toHaveLength(0);
    expect(await client.readEventlog('reminders', 'r1')).toEqual([]);
    await eventually(() => events.length === 1, 5_000, 'scheduled event');
    expect(Date.now()).toBeGreaterThanOrEqual(at);
    expect(events[0]).toMatchObject({ id, data: { x: 1 } });
    // Time is what is tested: no second timer fires the event again after its due time.
    await sleep(300);
    expect(events).toHaveLength(1);
    expect(await client.readEventlog('reminders', 'r1')).toHaveLength(1);
  });

  it('delete: removes one event', async () => {
    const client = h.client();
    const a = await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    const b = await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    expect(await client.delete(a)).toBe(true);
    expect(await client.delete(a)).toBe(false);
    expect((await client.readEventlog('d', 'p')).map((event) => event.id)).toEqual([b]);
  });

  it('delete eventlog: removes every event of one process only', async () => {
    const client = h.client();
    await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    const other = await client.publish({ domain: 'd', name: 'n', pid: 'q' });
    expect(await client.deleteEventlog('d', 'p')).toBe(true);
    expect(await client.deleteEventlog('d', 'p')).toBe(false);
    expect(await client.readEventlog('d', 'p')).toEqual([]);
    expect((await client.readEventlog('d', 'q')).map((event) => event.id)).toEqual([other]);
  });

  it('read: returns one event; an unknown id throws E_EVENTFLOW_EVENT_NOT_FOUND', async () => {
    const client = h.client();
    const id = await client.publish({ domain: 'd', name: 'n', pid: 'p', data: { v: 1 } });
    const event = await client.read(id);
    expect(event).toMatchObject({ id, domain: 'd', name: 'n', pid: 'p', data: { v: 1 }, rid: null });
    expect(event.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    await expect(client.read('missing')).rejects.toMatchObject({ code: 'E_EVENTFLOW_EVENT_NOT_FOUND' });
  });

  it('read eventlog: the events of a process in order', async () => {
    const client = h.client();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await client.publish({ domain: 'd', name: `n${i}`, pid: 'p', data: { i } }));
    const log = await client.readEventlog('d', 'p');
    expect(log.map((event) => event.id)).toEqual(ids);
    expect(log.map((event) => event.position)).toEqual([...log.map((event) => event.position)].sort((a, b) => a - b));
    const after = await client.readEventlog('d', 'p', { after: log[2]?.position });
    expect(after.map((event) => event.id)).toEqual(ids.slice(3));
  });

  it('eventlog state: composes the process state with v4 semantics', async () => {
    const client = h.client();
    await client.publish({ domain: 'd', name: 'a', pid: 'p', data: { a: 1, b: { x: 1 }, arr: [1, 2] } });
    await client.publish({ domain: 'd', name: 'b', pid: 'p', data: { b: { y: 2 }, arr: [2, 3], a: null } });
    await client.publish({ domain: 'd', name: 'c', pid: 'p', data: { b: { x: 5 } } });
    const state = await client.readEventlogState('d', 'p');
    expect(state).toEqual({ a: null, b: { x: 5, y: 2 }, arr: [1, 2, 3] });
    expect(Object.isFrozen(state)).toBe(true);
  });

  it('eventlog state: the gateway answers from its snapshot plus the events after it, as the full fold would', async () => {
    await h.stop();
    h = await startHarness({ EVENTFLOW_SNAPSHOT_EVERY: 10 });
    const client = h.client();
    const snapshots = (): number => {
      const db = new Database(h.dbPath, { readonly: true });
      try {
        return (db.prepare(`SELECT count FROM eventflow_snapshot WHERE domain = 'd' AND pid = 'p'`).get() as { count: number } | undefined)?.count ?? 0;
      } finally {
        db.close();
      }
    };
    for (let i = 0; i < 35; i++) await client.publish({ domain: 'd', name: 'n', pid: 'p', data: { [`k${i % 3}`]: { n: i }, tags: [i % 4] } });
    const full = client.composeEventlogState(await client.readEventlog('d', 'p'));
    expect(JSON.stringify(await client.readEventlogState('d', 'p'))).toBe(JSON.stringify(full));
    expect(snapshots()).toBe(30);
    await client.publish({ domain: 'd', name: 'n', pid: 'p', data: { z: 1 } });
    const state = await client.readEventlogState('d', 'p');
    expect(JSON.stringify(state)).toBe(JSON.stringify(client.composeEventlogState(await client.readEventlog('d', 'p'))));
    expect(Object.isFrozen(state)).toBe(true);
    expect(await client.readEventlogState('d', 'nothing')).toEqual({});
  });

  it('compose: composeEventlogState on the client', () => {
    const client = h.client();
    expect(client.composeEventlogState([{ data: { n: [1, 1] } }, { data: { n: [2] } }])).toEqual({ n: [1, 2] });
  });
});

describe('the rest of the API', () => {
  it('persist stores without routing; persisted events are readable', async () => {
    const client = h.client();
    const { events, listener } = collector();
    await client.subscribe('d', '*', listener);
    const id = await client.persist({ domain: 'd', name: 'n', pid: 'p' });
    await h.fence(client, 'd');
    expect(events).toHaveLength(0);
    expect(published(id)).toBeUndefined();
    expect((await client.read(id)).id).toBe(id);
  });

  it('publish is idempotent on a client-chosen id', async () => {
    const client = h.client();
    const { events, listener } = collector();
    await client.subscribe('d', 'n', listener);
    const event = { id: 'fixed-id-1', domain: 'd', name: 'n', pid: 'p', data: { a: 1 } };
    expect(await client.publish(event)).toBe('fixed-id-1');
    expect(await client.publish(event)).toBe('fixed-id-1');
    await h.fence(client, 'd', 'n');
    expect(events).toHaveLength(1);
    expect(await client.readEventlog('d', 'p')).toHaveLength(1);
    await expect(client.publish({ ...event, data: { a: 2 } })).rejects.toMatchObject({ code: 'E_EVENTFLOW_DUPLICATE_ID' });
  });

  it('rid links an event to another; deleting the referenced event clears it', async () => {
    const client = h.client();
    const first = await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    const second = await client.publish({ domain: 'd', name: 'n', pid: 'p', rid: first });
    expect((await client.read(second)).rid).toBe(first);
    await client.delete(first);
    expect((await client.read(second)).rid).toBeNull();
  });

  it('reads by timestamp range, inclusive', async () => {
    const client = h.client();
    // Time is what is tested: three distinct timestamps.
    const a = await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    await sleep(20);
    const b = await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    await sleep(20);
    await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    const [ea, eb] = [await client.read(a), await client.read(b)];
    const range = await client.readEventlogByTimestamp('d', 'p', ea.timestamp, new Date(eb.timestamp));
    expect(range.map((event) => event.id)).toEqual([a, b]);
    await expect(client.readEventlogByTimestamp('d', 'p', 'not a date', Date.now())).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_DATE' });
  });

  it('reads filtered by names; an empty list is refused', async () => {
    const client = h.client();
    await client.publish({ domain: 'd', name: 'a', pid: 'p' });
    const b = await client.publish({ domain: 'd', name: 'b', pid: 'p' });
    const c = await client.publish({ domain: 'd', name: 'c', pid: 'p' });
    expect((await client.readEventlogFilteredByNames('d', 'p', ['b', 'c'])).map((event) => event.id)).toEqual([b, c]);
    await expect(client.readEventlogFilteredByNames('d', 'p', [])).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT' });
  });

  it('entity and child-process associations, and reads through them', async () => {
    const client = h.client();
    const a = await client.publish({ domain: 'orders', name: 'n', pid: 'p1' });
    const b = await client.publish({ domain: 'billing', name: 'n', pid: 'p2' });
    expect(await client.persistEntityAssociation(a, 'customer-1')).toBe(true);
    expect(await client.persistEntityAssociation(a, 'customer-1')).toBe(true);
    await client.persistEntityAssociation(b, 'customer-1');
    expect((await client.readEventlogByEid('customer-1')).map((event) => event.id)).toEqual([a, b]);
    expect((await client.readEventlogByDomainAndEid('billing', 'customer-1')).map((event) => event.id)).toEqual([b]);
    expect(await client.persistChildProcessAssociation(b, 'orders', 'p1')).toBe(true);
    expect((await client.readEventlogByChildProcess('orders', 'p1')).map((event) => event.id)).toEqual([b]);
    await expect(client.persistEntityAssociation('nope', 'x')).rejects.toMatchObject({ code: 'E_EVENTFLOW_EVENT_NOT_FOUND' });
  });

  it('readDistinctPidByDomain returns strings in binary order', async () => {
    const client = h.client();
    for (const pid of ['b', 'a', 'B', 'a']) await client.publish({ domain: 'd', name: 'n', pid });
    await client.publish({ domain: 'other', name: 'n', pid: 'z' });
    expect(await client.readDistinctPidByDomain('d')).toEqual(['B', 'a', 'b']);
  });

  it('generatePid gives v4-shaped pids', () => {
    const pid = h.client().generatePid();
    expect(pid).toMatch(/^[a-z]+-[a-z]+-[0-9a-z]+$/);
    expect(pid.length).toBeLessThanOrEqual(64);
  });

  it('unsubscribe and removeConsumer stop delivery', async () => {
    const client = h.client();
    const { events, listener } = collector();
    await client.subscribe('d', 'n', listener);
    await client.unsubscribe('d', 'n', listener);
    const handled: string[] = [];
    const handler = async (event: StoredEvent): Promise<void> => void handled.push(event.id);
    await client.consume('d', 'n', handler);
    await client.removeConsumer('d', 'n', handler);
    const id = await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    await h.fence(client, 'd');
    // Orphans are marked once per page of the dispatcher, possibly after the marker went out.
    await eventually(() => published(id)?.orphan, 5_000, 'orphan');
    expect(events).toHaveLength(0);
    expect(handled).toHaveLength(0);
    expect(published(id)).toMatchObject({ orphan: expect.any(String), consumed_spoke: null });
  });

  it('an event nobody subscribed to or consumed is stored as orphan', async () => {
    const client = h.client();
    const id = await client.publish({ domain: 'nobody', name: 'n', pid: 'p' });
    await eventually(() => published(id)?.orphan, 5_000, 'orphan');
    expect(published(id)).toMatchObject({ hub: h.gateway.id, consumed_spoke: null });
  });

  it('the async-iterator form yields events and unsubscribes on break', async () => {
    const client = h.client();
    const publisher = h.client();
    const received: string[] = [];
    const iterating = (async () => {
      for await (const event of client.events('d', '*')) {
        received.push(event.name);
        if (received.length === 2) break;
      }
    })();
    await eventually(() => h.gateway.dispatcher.stats.subscriptions === 1, 5_000, 'subscription');
    await publisher.publish({ domain: 'd', name: 'one', pid: 'p' });
    await publisher.publish({ domain: 'd', name: 'two', pid: 'p' });
    await iterating;
    expect(received).toEqual(['one', 'two']);
    await eventually(() => h.gateway.dispatcher.stats.subscriptions === 0, 5_000, 'unsubscribed at the gateway');
  });

  it('validates input on the client with coded errors naming the field', async () => {
    const client = h.client();
    await expect(client.publish({ domain: '', name: 'n', pid: 'p' })).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('event.domain') });
    await expect(client.subscribe('d', 'x'.repeat(65), () => undefined)).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('name') });
    await expect(client.schedule('whenever', { domain: 'd', name: 'n', pid: 'p' })).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_DATE' });
  });
});

describe('waits', () => {
  it('concurrent waits in one domain are independent', async () => {
    const client = h.client();
    const first = client.wait('orders', 'p1', ['success'], 5_000);
    const second = client.wait('orders', 'p2', ['success'], 5_000);
    await eventually(() => h.gateway.dispatcher.stats.waits === 2, 5_000, 'waits registered');
    await client.publish({ domain: 'orders', name: 'success', pid: 'p1' });
    expect((await first).pid).toBe('p1');
    await client.publish({ domain: 'orders', name: 'success', pid: 'p2' });
    expect((await second).pid).toBe('p2');
  });

  it('a wait does not disturb subscribers of the same names, nor steal consumption', async () => {
    const client = h.client();
    const { events, listener } = collector();
    await client.subscribe('orders', '*', listener);
    const handled: string[] = [];
    await client.consume('orders', 'success', async (event) => void handled.push(event.id));
    const waiting = client.wait('orders', 'p1', ['success']);
    await eventually(() => h.gateway.dispatcher.stats.waits === 1, 5_000, 'wait registered');
    const id = await client.publish({ domain: 'orders', name: 'success', pid: 'p1' });
    await waiting;
    await eventually(() => handled.length === 1 && events.length === 1, 5_000, 'subscriber and consumer');
    await eventually(() => published(id)?.success, 5_000, 'success');
  });

  it('after: returns a matching event already stored after that event', async () => {
    const client = h.client();
    const start = await client.publish({ domain: 'orders', name: 'placed', pid: 'p1' });
    const done = await client.publish({ domain: 'orders', name: 'success', pid: 'p1' });
    const outcome = await client.wait('orders', 'p1', ['success', 'failed'], 1_000, { after: start });
    expect(outcome.id).toBe(done);
    // Nothing after the outcome itself: this one must time out.
    await expect(client.wait('orders', 'p1', ['success'], 200, { after: done })).rejects.toMatchObject({ code: 'E_EVENTFLOW_WAIT_TIMEOUT' });
  });

  it('the wait is registered at the gateway before its clock starts', async () => {
    const client = h.client();
    await client.ready();
    const waiting = client.wait('orders', 'p1', ['success'], 2_000);
    await eventually(() => h.gateway.dispatcher.stats.waits === 1, 2_000, 'wait registered');
    await client.publish({ domain: 'orders', name: 'success', pid: 'p1' });
    await waiting;
    expect(h.gateway.dispatcher.stats.waits).toBe(0);
  });

  it('request registers the wait, publishes, and resolves with the outcome', async () => {
    const worker = h.client();
    await worker.consume('orders', 'place', async (event) => {
      await worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id, data: { placed: true } });
    });
    const client = h.client();
    const outcome = await client.request({ domain: 'orders', name: 'place', pid: 'p9', data: { sku: 'x' } }, { timeout: 5_000 });
    expect(outcome).toMatchObject({ name: 'success', pid: 'p9', data: { placed: true } });
  });

  it('abort rejects a wait with E_EVENTFLOW_ABORTED and removes it at the gateway', async () => {
    const client = h.client();
    const controller = new AbortController();
    const waiting = client.wait('orders', 'p1', ['success'], 10_000, { signal: controller.signal });
    await eventually(() => h.gateway.dispatcher.stats.waits === 1, 2_000, 'wait registered');
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'E_EVENTFLOW_ABORTED' });
    await eventually(() => h.gateway.dispatcher.stats.waits === 0, 2_000, 'wait removed');
  });

  it("a request() whose publish is refused takes its wait back; one aborted while it waits rejects with E_EVENTFLOW_ABORTED and takes it back", async () => {
    const client = h.client();
    await client.ready();
    await expect(client.request({ domain: 'orders', name: 'nobody-consumes', pid: 'r1' }, { timeout: 10_000 })).rejects.toMatchObject({ code: 'E_EVENTFLOW_NO_CONSUMER' });
    await eventually(() => h.gateway.dispatcher.stats.waits === 0, 2_000, 'wait of the refused publish removed');
    const worker = h.client();
    let finish = (): void => undefined;
    await worker.consume('orders', 'slow', () => new Promise<void>((resolve) => (finish = resolve)));
    const controller = new AbortController();
    const asked = client.request({ domain: 'orders', name: 'slow', pid: 'r2' }, { timeout: 10_000, signal: controller.signal });
    await eventually(() => h.gateway.dispatcher.stats.waits === 1 && h.gateway.dispatcher.stats.deliveries === 1, 2_000, 'wait registered, job delivered');
    controller.abort();
    await expect(asked).rejects.toMatchObject({ code: 'E_EVENTFLOW_ABORTED' });
    await eventually(() => h.gateway.dispatcher.stats.waits === 0, 2_000, 'wait removed');
    finish();
  });
});

describe('listeners and consumers are independent (v4 §8.3–8.5 defects)', () => {
  it('removing one of two listeners of a domain leaves the other working', async () => {
    const client = h.client();
    const a = collector();
    const b = collector();
    const c = collector();
    await client.subscribe('orders', 'placed', a.listener);
    await client.subscribe('orders', 'placed', b.listener);
    await client.subscribe('orders', 'shipped', c.listener);
    await client.unsubscribe('orders', 'placed', a.listener);
    await client.publish({ domain: 'orders', name: 'placed', pid: 'p' });
    await client.publish({ domain: 'orders', name: 'shipped', pid: 'p' });
    await eventually(() => b.events.length === 1 && c.events.length === 1, 5_000, 'remaining listeners');
    expect(a.events).toHaveLength(0);
  });

  it('* is additive: a named and a * listener both receive the event, once each', async () => {
    const client = h.client();
    const named = collector();
    const any = collector();
    await client.subscribe('orders', 'placed', named.listener);
    await client.subscribe('orders', '*', any.listener);
    await client.publish({ domain: 'orders', name: 'placed', pid: 'p' });
    await client.publish({ domain: 'orders', name: 'other', pid: 'p' });
    await eventually(() => any.events.length === 2, 5_000, 'wildcard');
    await h.fence(client, 'orders');
    expect(named.events.map((event) => event.name)).toEqual(['placed']);
    expect(any.events.map((event) => event.name)).toEqual(['placed', 'other']);
  });

  it('removing one consumer leaves the others of the domain running', async () => {
    const client = h.client();
    const gone = async (): Promise<void> => undefined;
    const kept: string[] = [];
    await client.consume('orders', 'placed', gone);
    await client.consume('orders', 'shipped', async (event) => void kept.push(event.name));
    await client.removeConsumer('orders', 'placed', gone);
    const id = await client.publish({ domain: 'orders', name: 'shipped', pid: 'p' });
    await eventually(() => published(id)?.success, 5_000, 'success');
    expect(kept).toEqual(['shipped']);
  });

  it('two competing consumers on two clients: each event is handled exactly once', async () => {
    const first = h.client();
    const second = h.client();
    const handled = new Map<string, number>();
    const count = async (event: StoredEvent): Promise<void> => void handled.set(event.id, (handled.get(event.id) ?? 0) + 1);
    await first.consume('jobs', 'run', count);
    await second.consume('jobs', 'run', count);
    const publisher = h.client();
    const ids = await Promise.all(Array.from({ length: 100 }, (_, i) => publisher.publish({ domain: 'jobs', name: 'run', pid: `p${i}` })));
    await eventually(() => handled.size === 100, 10_000, 'all handled');
    // A round trip on each consumer's connection: every delivery sent before has arrived.
    await fence(() => Promise.all([first, second].map((client) => client.read(ids[0]!))));
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
    expect(new Set(ids)).toEqual(new Set(handled.keys()));
  });

  it('a consumer of * and one of a name compete: still exactly one delivery', async () => {
    const first = h.client();
    const second = h.client();
    let deliveries = 0;
    await first.consume('jobs', '*', async () => void deliveries++);
    await second.consume('jobs', 'run', async () => void deliveries++);
    for (let i = 0; i < 20; i++) await first.publish({ domain: 'jobs', name: 'run', pid: `p${i}` });
    await eventually(() => deliveries === 20, 5_000, 'deliveries');
    // A round trip on each consumer's connection: every delivery sent before has arrived.
    await fence(() => Promise.all([first, second].map((client) => client.readEventlog('jobs', 'p0'))));
    expect(deliveries).toBe(20);
  });

  it('a consumer that disconnects mid-delivery: the event goes to the other consumer', async () => {
    const { client: slow, kill } = h.killableClient();
    const steady = h.client();
    let started!: () => void;
    const startedPromise = new Promise<void>((resolve) => (started = resolve));
    await slow.consume('jobs', 'run', () => {
      started();
      return new Promise(() => undefined); // never settles
    });
    const id = await steady.publish({ domain: 'jobs', name: 'run', pid: 'p' });
    await startedPromise;
    const handled: number[] = [];
    await steady.consume('jobs', 'run', async (_event, { attempt }) => void handled.push(attempt));
    kill(); // as if the slow consumer's process died: no drain, no settle
    await eventually(() => handled.length === 1, 5_000, 'redelivery');
    expect(handled).toEqual([2]);
    await eventually(() => published(id)?.success, 5_000, 'success');
  });
});

describe('cache support', () => {
  it('readEventlog reports the total count, so a cache can spot deletions made elsewhere', async () => {
    const client = h.client();
    const first = await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    const all = await client.call('readEventlog', { domain: 'd', pid: 'p' });
    expect(all.count).toBe(2);
    await client.delete(first);
    const after = await client.call('readEventlog', { domain: 'd', pid: 'p', after: all.events[1]?.position });
    expect(after).toEqual({ events: [], count: 1 });
  });

  it('deletes are pushed to connections subscribed in the domain', async () => {
    const watcher = h.client();
    const seen: Array<{ domain: string; pid: string; id?: string | undefined }> = [];
    watcher.onDeleted((deleted) => seen.push(deleted));
    await watcher.subscribe('d', 'other-name', () => undefined);
    const client = h.client();
    const id = await client.publish({ domain: 'd', name: 'n', pid: 'p' });
    await client.publish({ domain: 'x', name: 'n', pid: 'p' });
    await client.delete(id);
    await client.deleteEventlog('x', 'p');
    await client.publish({ domain: 'd', name: 'n', pid: 'q' });
    await client.deleteEventlog('d', 'q');
    await eventually(() => seen.length === 2, 5_000, 'deleted pushes');
    expect(seen).toEqual([
      { domain: 'd', pid: 'p', id },
      { domain: 'd', pid: 'q' },
    ]);
  });
});

describe('dispatcher', () => {
  it('re-registering a wait under the same handle replaces it and keeps it alive', async () => {
    const waited: string[] = [];
    const peer = {
      id: 'test-peer',
      sendEvent: () => undefined,
      sendDelivery: () => undefined,
      sendWaited: (_wait: string, event: StoredEvent) => void waited.push(event.id),
      sendDeleted: () => undefined,
    };
    await h.gateway.dispatcher.addWait(peer, 'w1', 'orders', 'p1', ['success'], undefined);
    await h.gateway.dispatcher.addWait(peer, 'w1', 'orders', 'p1', ['success'], undefined);
    expect(h.gateway.dispatcher.stats.waits).toBe(1);
    const id = await h.client().publish({ domain: 'orders', name: 'success', pid: 'p1' });
    await eventually(() => waited.length === 1, 5_000, 'the re-registered wait');
    expect(waited).toEqual([id]);
  });
});
