/**
 * The behaviour every EventStore must have, written once and run against each implementation.
 * Delivery and scheduling state columns are not readable through the interface, so this suite
 * checks them through their observable effects; implementation tests may inspect the columns.
 */
import { sleep } from '@eventflow/test-support/wait';
import { afterEach, describe, expect, it } from 'vitest';
import { isEventflowError, type ErrorCode, type EventflowError, type StoredEvent } from '@eventflow/core';
import { describeCatalog } from './store-suite-catalog.js';
import type { AppendOutcome, AppendRequest, AppendResult, EventStore, NewEvent } from '../src/store/store.js';
import { describeLedger } from './ledger-suite.js';
import { describeTraceContext } from './store-suite-trace.js';

export async function expectCode(promise: Promise<unknown>, code: ErrorCode): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error, `expected a rejection with ${code}`).toBeDefined();
  expect(isEventflowError(error, code), `expected ${code}, got ${String(error)}`).toBe(true);
}

/** Lets the clock move on, so that consecutive events get distinct millisecond timestamps. */
export function tick(ms = 3): Promise<void> {
  return sleep(ms);
}

let counter = 0;
export function newEvent(overrides: Partial<NewEvent> = {}): NewEvent {
  counter += 1;
  return { id: `evt-${counter}`, domain: 'orders', name: 'created', pid: 'p1', data: {}, ...overrides };
}

const ids = (events: readonly { id: string }[]): string[] => events.map((event) => event.id);

/** Fires the scheduled events due at `at` and returns the one that fired, failing unless exactly one did. */
async function fireOne(store: EventStore, at = new Date()): Promise<StoredEvent> {
  const fired = await store.claimDueScheduled(at);
  expect(fired).toHaveLength(1);
  return fired[0] as StoredEvent;
}

/** Inside a describe: `open()` makes a store with `create`; each is closed after its test. */
export function openedStores(create: () => Promise<EventStore>): () => Promise<EventStore> {
  const opened: EventStore[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((store) => store.close()));
  });
  return async () => {
    const store = await create();
    opened.push(store);
    return store;
  };
}

/** `create` must return a fresh, empty, initialised store; the suite closes it after each test. */
export function describeEventStore(name: string, create: () => Promise<EventStore>): void {
  describe(`EventStore: ${name}`, () => {
    const open = openedStores(create);

    describe('lifecycle', () => {
      it('starts empty with head 0, survives a second init and closes idempotently', async () => {
        const store = await open();
        expect(await store.head()).toBe(0);
        expect(typeof store.kind).toBe('string');
        const { event } = await store.append(newEvent());
        await store.init();
        expect(await store.read(event.id)).toEqual(event);
        await store.close();
        await store.close();
      });
    });

    describeCatalog(open);
    describeTraceContext(open);

    describe('append', () => {
      it('keeps keys named like prototype machinery as plain data, exactly, and touches no prototype', async () => {
        const store = await open();
        // JSON.parse makes "__proto__" an own key, as a frame's data is; the gateway refuses it (data-keys.ts), the store keeps what it is given.
        const data = JSON.parse(
          '{"constructor":{"prototype":{"polluted":1}},"prototype":{"polluted":2},"__proto__":{"polluted":3},"list":[{"__proto__":{"polluted":4}},{"constructor":"x"}],"hasOwnProperty":5}',
        ) as NewEvent['data'];
        const { event } = await store.append(newEvent({ data }));
        for (const read of [event, await store.read(event.id), (await store.readEventlog(event.domain, event.pid)).at(-1)]) {
          expect(JSON.stringify(read?.data)).toBe(JSON.stringify(data));
          expect(Object.keys(read?.data as object)).toEqual(['constructor', 'prototype', '__proto__', 'list', 'hasOwnProperty']);
          expect(Object.getPrototypeOf(read?.data)).toBe(Object.prototype);
        }
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();
      });

      it('stores the event with a store-set timestamp and position', async () => {
        const store = await open();
        const before = new Date().toISOString();
        const input = newEvent({ data: { amount: 3, tags: ['a'], nested: { ok: true } } });
        const { event, created } = await store.append(input);
        const after = new Date().toISOString();
        expect(created).toBe(true);
        expect(event).toMatchObject({ id: input.id, domain: 'orders', name: 'created', pid: 'p1', rid: null });
        expect(event.data).toEqual(input.data);
        expect(event.timestamp >= before && event.timestamp <= after).toBe(true);
        expect(new Date(event.timestamp).toISOString()).toBe(event.timestamp);
        expect(event.position).toBeGreaterThan(0);
        expect(await store.head()).toBe(event.position);
        expect(await store.read(input.id)).toEqual(event);
        expect(await store.read('missing')).toBeUndefined();
      });

      it('returns the stored event without writing when the same event is appended again', async () => {
        const store = await open();
        const input = newEvent({ data: { a: 1, b: [1, 2] } });
        const first = await store.append(input, { publisher: 'spoke-1' });
        const retry = await store.append({ ...input, data: { b: [1, 2], a: 1 } }, { publisher: 'spoke-1' });
        expect(retry).toEqual({ event: first.event, created: false });
        expect(await store.head()).toBe(first.event.position);
        expect(await store.readEventlog('orders', 'p1')).toHaveLength(1);
        expect(await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toHaveLength(1);
      });

      it('treats rid as part of the content on retry', async () => {
        const store = await open();
        const parent = await store.append(newEvent());
        const child = newEvent({ rid: parent.event.id });
        const first = await store.append(child);
        expect(first.event.rid).toBe(parent.event.id);
        expect((await store.append(child)).created).toBe(false);
        await expectCode(store.append({ ...child, rid: undefined }), 'E_EVENTFLOW_DUPLICATE_ID');
      });

      it('refuses an id used by an event with other content', async () => {
        const store = await open();
        const input = newEvent({ data: { a: 1 } });
        const { event } = await store.append(input);
        for (const change of [{ data: { a: 2 } }, { domain: 'other' }, { name: 'other' }, { pid: 'other' }]) {
          await expectCode(store.append({ ...input, ...change }, { publisher: 's' }), 'E_EVENTFLOW_DUPLICATE_ID');
        }
        expect(await store.read(input.id)).toEqual(event);
        expect(await store.head()).toBe(event.position);
        expect(await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toEqual([]);
      });

      it('answers an id already stored before looking at its rid: a retry is a retry, other content a duplicate', async () => {
        const store = await open();
        const parent = await store.append(newEvent());
        const input = newEvent({ rid: parent.event.id });
        const first = await store.append(input, { publisher: 's' });
        // Deleting the parent clears the stored rid: the same write again is other content now.
        await store.delete(parent.event.id);
        await expectCode(store.append(input, { publisher: 's' }), 'E_EVENTFLOW_DUPLICATE_ID');
        await expectCode(store.append({ ...input, rid: 'nope' }, { publisher: 's' }), 'E_EVENTFLOW_DUPLICATE_ID');
        expect((await store.append({ ...input, rid: undefined }, { publisher: 's' })).event).toEqual({ ...first.event, rid: null });
        expect(await store.head()).toBe(first.event.position);
      });

      it('refuses a rid naming no stored event and stores nothing', async () => {
        const store = await open();
        const input = newEvent({ rid: 'nope' });
        await expectCode(
          store.append(input, { publisher: 's', scheduledAt: new Date(Date.now() - 1000) }),
          'E_EVENTFLOW_REFERENCE_NOT_FOUND',
        );
        expect(await store.read(input.id)).toBeUndefined();
        expect(await store.head()).toBe(0);
        expect(await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toEqual([]);
        expect(await store.nextScheduled()).toBeUndefined();
        expect(await store.claimDueScheduled(new Date())).toEqual([]);
      });

      it('gives strictly increasing positions that are never reused, and head never decreases', async () => {
        const store = await open();
        const a = (await store.append(newEvent())).event;
        const b = (await store.append(newEvent())).event;
        expect(b.position).toBeGreaterThan(a.position);
        expect(await store.delete(b.id)).toBe(true);
        expect(await store.head()).toBe(b.position);
        const c = (await store.append(newEvent())).event;
        expect(c.position).toBeGreaterThan(b.position);
        await store.deleteEventlog('orders', 'p1');
        expect(await store.head()).toBe(c.position);
        const d = (await store.append(newEvent())).event;
        expect(d.position).toBeGreaterThan(c.position);
      });
    });

    describe('reads', () => {
      it('counts the events of an eventlog, without unfired scheduled ones', async () => {
        const store = await open();
        expect(await store.countEventlog('orders', 'p1')).toBe(0);
        const first = (await store.append(newEvent())).event;
        await store.append(newEvent());
        await store.append(newEvent({ pid: 'p2' }));
        await store.append(newEvent(), { publisher: 's', scheduledAt: new Date(Date.now() + 60_000) });
        expect(await store.countEventlog('orders', 'p1')).toBe(2);
        await store.delete(first.id);
        expect(await store.countEventlog('orders', 'p1')).toBe(1);
      });

      it('reads an event log in position order, after a position, and only of that stream', async () => {
        const store = await open();
        const a = (await store.append(newEvent({ name: 'z' }))).event;
        await store.append(newEvent({ pid: 'p2' }));
        await store.append(newEvent({ domain: 'billing' }));
        await store.append(newEvent({ pid: 'P1' }));
        const b = (await store.append(newEvent({ name: 'a' }))).event;
        const c = (await store.append(newEvent({ name: 'm' }))).event;
        expect(ids(await store.readEventlog('orders', 'p1'))).toEqual([a.id, b.id, c.id]);
        expect(ids(await store.readEventlog('orders', 'p1', a.position))).toEqual([b.id, c.id]);
        expect(await store.readEventlog('orders', 'p1', c.position)).toEqual([]);
        expect(await store.readEventlog('orders', 'none')).toEqual([]);
      });

      it('reads by timestamp inclusive at both ends', async () => {
        const store = await open();
        const a = (await store.append(newEvent())).event;
        await tick();
        const b = (await store.append(newEvent())).event;
        await tick();
        const c = (await store.append(newEvent())).event;
        await store.append(newEvent({ pid: 'p2' }));
        const at = (iso: string, shift = 0) => new Date(new Date(iso).getTime() + shift);
        expect(ids(await store.readEventlogByTimestamp('orders', 'p1', at(a.timestamp), at(c.timestamp)))).toEqual([
          a.id,
          b.id,
          c.id,
        ]);
        expect(ids(await store.readEventlogByTimestamp('orders', 'p1', at(b.timestamp), at(b.timestamp)))).toEqual([
          b.id,
        ]);
        expect(
          ids(await store.readEventlogByTimestamp('orders', 'p1', at(a.timestamp, 1), at(c.timestamp, -1))),
        ).toEqual([b.id]);
        expect(await store.readEventlogByTimestamp('orders', 'p1', at(c.timestamp, 1), at(c.timestamp, 1000))).toEqual(
          [],
        );
      });

      it('filters by names exactly and case-sensitively', async () => {
        const store = await open();
        const a = (await store.append(newEvent({ name: 'Paid' }))).event;
        await store.append(newEvent({ name: 'paid' }));
        const c = (await store.append(newEvent({ name: 'shipped' }))).event;
        await store.append(newEvent({ name: 'Paid', pid: 'p2' }));
        expect(ids(await store.readEventlogFilteredByNames('orders', 'p1', ['shipped', 'Paid']))).toEqual([a.id, c.id]);
        expect(await store.readEventlogFilteredByNames('orders', 'p1', ['PAID'])).toEqual([]);
      });

      it('reads by child process using the association domain, not the event domain', async () => {
        const store = await open();
        const a = (await store.append(newEvent({ domain: 'orders' }))).event;
        const b = (await store.append(newEvent({ domain: 'billing' }))).event;
        const c = (await store.append(newEvent({ domain: 'payments' }))).event;
        await store.persistChildProcessAssociation(b.id, 'payments', 'cp1');
        await store.persistChildProcessAssociation(a.id, 'payments', 'cp1');
        await store.persistChildProcessAssociation(c.id, 'payments', 'cp2');
        await store.persistChildProcessAssociation(c.id, 'orders', 'cp1');
        expect(ids(await store.readEventlogByChildProcess('payments', 'cp1'))).toEqual([a.id, b.id]);
        expect(ids(await store.readEventlogByChildProcess('orders', 'cp1'))).toEqual([c.id]);
        expect(await store.readEventlogByChildProcess('billing', 'cp1')).toEqual([]);
      });

      it('reads by entity id, across domains or within the event domain', async () => {
        const store = await open();
        const a = (await store.append(newEvent({ domain: 'orders' }))).event;
        const b = (await store.append(newEvent({ domain: 'billing' }))).event;
        const c = (await store.append(newEvent({ domain: 'orders' }))).event;
        await store.persistEntityAssociation(c.id, 'customer-1');
        await store.persistEntityAssociation(b.id, 'customer-1');
        await store.persistEntityAssociation(a.id, 'customer-1');
        await store.persistEntityAssociation(a.id, 'customer-2');
        expect(ids(await store.readEventlogByEid('customer-1'))).toEqual([a.id, b.id, c.id]);
        expect(ids(await store.readEventlogByEid('customer-2'))).toEqual([a.id]);
        expect(ids(await store.readEventlogByDomainAndEid('orders', 'customer-1'))).toEqual([a.id, c.id]);
        expect(ids(await store.readEventlogByDomainAndEid('billing', 'customer-2'))).toEqual([]);
        expect(await store.readEventlogByEid('nobody')).toEqual([]);
      });

      it('lists distinct pids of a domain in binary order', async () => {
        const store = await open();
        for (const pid of ['b', 'a', 'B', 'a', '_', '1']) await store.append(newEvent({ pid }));
        await store.append(newEvent({ domain: 'billing', pid: 'A' }));
        expect(await store.readDistinctPidByDomain('orders')).toEqual(['1', 'B', '_', 'a', 'b']);
        expect(await store.readDistinctPidByDomain('none')).toEqual([]);
      });

      it('reads published events after a position with * or a name, at most limit', async () => {
        const store = await open();
        const pub = { publisher: 'spoke-1' };
        const a = (await store.append(newEvent({ name: 'created' }), pub)).event;
        await store.append(newEvent({ name: 'created' }));
        const c = (await store.append(newEvent({ name: 'paid', pid: 'p2' }), pub)).event;
        await store.append(newEvent({ domain: 'billing', name: 'created' }), pub);
        const pending = (await store.append(newEvent({ name: 'created' }), { ...pub, scheduledAt: new Date() })).event;
        const any = { domain: 'orders', name: '*' };
        // A scheduled event is published only once it fires.
        expect(ids(await store.readPublishedAfter(any, 0, 100))).toEqual([a.id, c.id]);
        await tick();
        const e = await fireOne(store);
        expect(e.id).toBe(pending.id);
        expect(ids(await store.readPublishedAfter(any, 0, 100))).toEqual([a.id, c.id, e.id]);
        expect(ids(await store.readPublishedAfter({ domain: 'orders', name: 'created' }, 0, 100))).toEqual([a.id, e.id]);
        expect(ids(await store.readPublishedAfter(any, a.position, 100))).toEqual([c.id, e.id]);
        expect(ids(await store.readPublishedAfter(any, 0, 2))).toEqual([a.id, c.id]);
        expect(ids(await store.readPublishedAfter(any, c.position, 1))).toEqual([e.id]);
        expect(await store.readPublishedAfter(any, e.position, 100)).toEqual([]);
        expect(await store.readPublishedAfter({ domain: 'orders', name: 'Created' }, 0, 100)).toEqual([]);
      });

      it('reads published events of every domain after a position, in position order, at most limit (pattern subscriptions)', async () => {
        const store = await open();
        const pub = { publisher: 'spoke-1' };
        const a = (await store.append(newEvent({ domain: 'prod.eu' }), pub)).event;
        await store.append(newEvent({ domain: 'prod.us' })); // persisted only
        const c = (await store.append(newEvent({ domain: 'billing' }), pub)).event;
        const pending = (await store.append(newEvent({ domain: 'prod.us' }), { ...pub, scheduledAt: new Date() })).event;
        expect(ids(await store.readPublishedSince(0, 100))).toEqual([a.id, c.id]);
        await tick();
        const e = await fireOne(store);
        expect(e.id).toBe(pending.id);
        expect(ids(await store.readPublishedSince(0, 100))).toEqual([a.id, c.id, e.id]);
        expect(ids(await store.readPublishedSince(a.position, 1))).toEqual([c.id]);
        expect(await store.readPublishedSince(e.position, 100)).toEqual([]);
      });

      it('finds the first published outcome event after a position', async () => {
        const store = await open();
        const published = { publisher: 's' };
        const start = (await store.append(newEvent({ name: 'started' }), published)).event;
        await store.append(newEvent({ name: 'done', pid: 'p2' }), published);
        await store.append(newEvent({ name: 'done', domain: 'billing' }), published);
        // Persisted, never published: a wait does not see it live, so it does not see it stored either.
        await store.append(newEvent({ name: 'failed' }));
        const failed = (await store.append(newEvent({ name: 'failed' }), published)).event;
        const done = (await store.append(newEvent({ name: 'done' }), published)).event;
        expect((await store.findOutcome('orders', 'p1', ['done', 'failed'], start.position))?.id).toBe(failed.id);
        expect((await store.findOutcome('orders', 'p1', ['done'], 0))?.id).toBe(done.id);
        expect((await store.findOutcome('orders', 'p1', ['done', 'failed'], failed.position))?.id).toBe(done.id);
        expect(await store.findOutcome('orders', 'p1', ['done'], done.position)).toBeUndefined();
        expect(await store.findOutcome('orders', 'p1', ['cancelled'], 0)).toBeUndefined();
      });
    });

    describe('deletes', () => {
      it('deletes an event with its associations and delivery rows, and clears rid of referrers', async () => {
        const store = await open();
        const parent = (await store.append(newEvent(), { publisher: 's', scheduledAt: new Date(0) })).event;
        const child = (await store.append(newEvent({ rid: parent.id }))).event;
        await store.persistEntityAssociation(parent.id, 'customer-1');
        await store.persistChildProcessAssociation(parent.id, 'payments', 'cp1');
        expect(await store.delete(parent.id)).toBe(true);
        expect(await store.read(parent.id)).toBeUndefined();
        expect((await store.read(child.id))?.rid).toBeNull();
        expect(await store.readEventlogByEid('customer-1')).toEqual([]);
        expect(await store.readEventlogByChildProcess('payments', 'cp1')).toEqual([]);
        expect(await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toEqual([]);
        expect(await store.nextScheduled()).toBeUndefined();
        expect(await store.claimDueScheduled(new Date())).toEqual([]);
        expect(await store.claimForRouting(parent.id, 'hub')).toBe(false);
        expect(await store.delete(parent.id)).toBe(false);
        await expectCode(store.persistEntityAssociation(parent.id, 'customer-1'), 'E_EVENTFLOW_EVENT_NOT_FOUND');
        // The id is free again once deleted.
        expect((await store.append(newEvent({ id: parent.id, data: { again: true } }))).created).toBe(true);
      });

      it('deletes a whole event log and only that one', async () => {
        const store = await open();
        const a = (await store.append(newEvent(), { publisher: 's' })).event;
        await store.append(newEvent({ rid: a.id }));
        const other = (await store.append(newEvent({ pid: 'p2', rid: a.id }))).event;
        const billing = (await store.append(newEvent({ domain: 'billing' }))).event;
        await store.persistEntityAssociation(a.id, 'customer-1');
        expect(await store.deleteEventlog('orders', 'p1')).toBe(true);
        expect(await store.readEventlog('orders', 'p1')).toEqual([]);
        expect(await store.readEventlogByEid('customer-1')).toEqual([]);
        expect(await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toEqual([]);
        expect((await store.read(other.id))?.rid).toBeNull();
        expect(await store.read(billing.id)).toEqual(billing);
        expect(await store.readDistinctPidByDomain('orders')).toEqual(['p2']);
        expect(await store.deleteEventlog('orders', 'p1')).toBe(false);
      });
    });

    describe('associations', () => {
      it('are idempotent', async () => {
        const store = await open();
        const a = (await store.append(newEvent())).event;
        await store.persistEntityAssociation(a.id, 'customer-1');
        await store.persistEntityAssociation(a.id, 'customer-1');
        await store.persistChildProcessAssociation(a.id, 'payments', 'cp1');
        await store.persistChildProcessAssociation(a.id, 'payments', 'cp1');
        expect(ids(await store.readEventlogByEid('customer-1'))).toEqual([a.id]);
        expect(ids(await store.readEventlogByChildProcess('payments', 'cp1'))).toEqual([a.id]);
      });

      it('refuse an unknown event', async () => {
        const store = await open();
        await expectCode(store.persistEntityAssociation('missing', 'customer-1'), 'E_EVENTFLOW_EVENT_NOT_FOUND');
        await expectCode(
          store.persistChildProcessAssociation('missing', 'payments', 'cp1'),
          'E_EVENTFLOW_EVENT_NOT_FOUND',
        );
        expect(await store.readEventlogByEid('customer-1')).toEqual([]);
        expect(await store.readEventlogByChildProcess('payments', 'cp1')).toEqual([]);
      });
    });

    describe('delivery lifecycle', () => {
      it('lets exactly one of two routers win the routing claim', async () => {
        const store = await open();
        const { event } = await store.append(newEvent(), { publisher: 's' });
        const results = await Promise.all([
          store.claimForRouting(event.id, 'hub-1'),
          store.claimForRouting(event.id, 'hub-2'),
        ]);
        expect(results.filter(Boolean)).toHaveLength(1);
        expect(await store.claimForRouting(event.id, 'hub-1')).toBe(false);
      });

      it('has no claims for unpublished or unknown events', async () => {
        const store = await open();
        const { event } = await store.append(newEvent());
        expect(await store.claimForRouting(event.id, 'hub-1')).toBe(false);
        expect(await store.claimForConsumer(event.id, 'c1')).toBe(false);
        expect(await store.claimForConsumer('missing', 'c1')).toBe(false);
        await store.releaseConsumerClaim('missing');
        await store.settle('missing', 'success');
        await store.markOrphan('missing');
      });

      it('lets exactly one of two consumers win, and again after a release', async () => {
        const store = await open();
        const { event } = await store.append(newEvent(), { publisher: 's' });
        expect(await store.claimForRouting(event.id, 'hub-1')).toBe(true);
        const results = await Promise.all([
          store.claimForConsumer(event.id, 'c1'),
          store.claimForConsumer(event.id, 'c2'),
        ]);
        expect(results.filter(Boolean)).toHaveLength(1);
        expect(await store.claimForConsumer(event.id, 'c3')).toBe(false);
        await store.releaseConsumerClaim(event.id);
        expect(await store.claimForConsumer(event.id, 'c3')).toBe(true);
        expect(await store.claimForConsumer(event.id, 'c1')).toBe(false);
      });

      it('settles once: a settled delivery can no longer be released or settled again', async () => {
        const store = await open();
        const { event } = await store.append(newEvent(), { publisher: 's' });
        expect(await store.claimForConsumer(event.id, 'c1')).toBe(true);
        await store.settle(event.id, 'failed');
        await store.settle(event.id, 'success');
        await store.releaseConsumerClaim(event.id);
        expect(await store.claimForConsumer(event.id, 'c2')).toBe(false);
      });

      it('marks an orphan without disturbing the claims', async () => {
        const store = await open();
        const { event } = await store.append(newEvent(), { publisher: 's' });
        await store.markOrphan(event.id);
        await store.markOrphan(event.id);
        expect(await store.claimForRouting(event.id, 'hub-1')).toBe(true);
        expect(await store.claimForConsumer(event.id, 'c1')).toBe(true);
      });
    });

    describeLedger(open, newEvent);

    describe('scheduling', () => {
      it('reports the earliest unexecuted due time', async () => {
        const store = await open();
        expect(await store.nextScheduled()).toBeUndefined();
        const later = new Date(Date.now() + 60_000);
        const sooner = new Date(Date.now() + 30_000);
        await store.append(newEvent(), { publisher: 's', scheduledAt: later });
        await store.append(newEvent(), { publisher: 's', scheduledAt: sooner });
        await store.append(newEvent(), { publisher: 's' });
        expect((await store.nextScheduled())?.getTime()).toBe(sooner.getTime());
      });

      it('claims due events once, in due order, and leaves future ones', async () => {
        const store = await open();
        const now = Date.now();
        const opts = (offset: number) => ({ publisher: 's', scheduledAt: new Date(now + offset) });
        const late = (await store.append(newEvent(), opts(-1_000))).event;
        const early = (await store.append(newEvent(), opts(-5_000))).event;
        const sameA = (await store.append(newEvent(), opts(-1_000))).event;
        const exact = (await store.append(newEvent(), opts(0))).event;
        const future = (await store.append(newEvent(), opts(60_000))).event;
        const head = await store.head();
        const claimed = await store.claimDueScheduled(new Date(now));
        expect(ids(claimed)).toEqual([early.id, late.id, sameA.id, exact.id]);
        // Firing re-sequences the event: same content, a new position and the fire time as timestamp.
        expect(claimed[0]).toEqual({ ...early, position: expect.any(Number), timestamp: expect.any(String) });
        expect(claimed[0]?.position).toBeGreaterThan(head);
        expect((claimed[0]?.timestamp ?? '') >= early.timestamp).toBe(true);
        expect(await store.read(early.id)).toEqual(claimed[0]);
        expect(await store.claimDueScheduled(new Date(now))).toEqual([]);
        expect((await store.nextScheduled())?.getTime()).toBe(now + 60_000);
        expect(ids(await store.claimDueScheduled(new Date(now + 60_000)))).toEqual([future.id]);
        expect(await store.nextScheduled()).toBeUndefined();
        await store.settleScheduled(early.id, 'success');
        await store.settleScheduled(early.id, 'failed');
        await store.settleScheduled(late.id, 'failed');
      });

      it('gives each due event to exactly one of two concurrent claimers', async () => {
        const store = await open();
        for (let i = 0; i < 5; i += 1) await store.append(newEvent(), { publisher: 's', scheduledAt: new Date(0) });
        const [first, second] = await Promise.all([
          store.claimDueScheduled(new Date()),
          store.claimDueScheduled(new Date()),
        ]);
        const all = [...ids(first ?? []), ...ids(second ?? [])];
        expect(all).toHaveLength(5);
        expect(new Set(all).size).toBe(5);
        const positions = [...(first ?? []), ...(second ?? [])].map((event) => event.position);
        expect(new Set(positions).size).toBe(5);
        expect(await store.head()).toBe(Math.max(...positions));
      });

      it('keeps an unfired scheduled event out of every multi-event read, but not out of read(id)', async () => {
        const store = await open();
        const pub = { publisher: 's' };
        const due = new Date();
        // Due already, but not fired until claimDueScheduled claims it.
        const pending = (await store.append(newEvent({ name: 'done', pid: 'p2' }), { ...pub, scheduledAt: due })).event;
        const other = (await store.append(newEvent({ name: 'done' }), pub)).event;
        for (const id of [pending.id, other.id]) {
          await store.persistEntityAssociation(id, 'customer-1');
          await store.persistChildProcessAssociation(id, 'payments', 'cp1');
        }
        const reads = async (after: number) => ({
          eventlog: ids(await store.readEventlog('orders', 'p2', after)),
          byTimestamp: ids(await store.readEventlogByTimestamp('orders', 'p2', new Date(0), new Date(Date.now() + 60_000))),
          byNames: ids(await store.readEventlogFilteredByNames('orders', 'p2', ['done'])),
          byChildProcess: ids(await store.readEventlogByChildProcess('payments', 'cp1')),
          byEid: ids(await store.readEventlogByEid('customer-1')),
          byDomainAndEid: ids(await store.readEventlogByDomainAndEid('orders', 'customer-1')),
          pids: await store.readDistinctPidByDomain('orders'),
          published: ids(await store.readPublishedAfter({ domain: 'orders', name: '*' }, after, 100)),
          publishedNamed: ids(await store.readPublishedAfter({ domain: 'orders', name: 'done' }, after, 100)),
          outcome: (await store.findOutcome('orders', 'p2', ['done'], after))?.id,
        });
        expect(await reads(0)).toEqual({
          eventlog: [],
          byTimestamp: [],
          byNames: [],
          byChildProcess: [other.id],
          byEid: [other.id],
          byDomainAndEid: [other.id],
          pids: ['p1'],
          published: [other.id],
          publishedNamed: [other.id],
          outcome: undefined,
        });
        expect(await store.read(pending.id)).toEqual(pending);

        const head = await store.head();
        await tick();
        const fired = await fireOne(store);
        // It joins the log after everything already there, so a reader resuming from `head` sees it.
        const joined = [pending.id];
        expect(await reads(head)).toEqual({
          eventlog: joined,
          byTimestamp: joined,
          byNames: joined,
          byChildProcess: [other.id, pending.id],
          byEid: [other.id, pending.id],
          byDomainAndEid: [other.id, pending.id],
          pids: ['p1', 'p2'],
          published: joined,
          publishedNamed: joined,
          outcome: pending.id,
        });
        expect(await store.readEventlog('orders', 'p2')).toEqual([fired]);
        const at = new Date(fired.timestamp);
        expect(await store.readEventlogByTimestamp('orders', 'p2', at, at)).toEqual([fired]);
        expect(await store.read(pending.id)).toEqual(fired);
      });

      it('gives a fired event a new position after the head and the fire time as timestamp, once', async () => {
        const store = await open();
        const due = new Date();
        const pending = (await store.append(newEvent({ data: { n: 1 } }), { publisher: 's', scheduledAt: due })).event;
        const later = (await store.append(newEvent())).event;
        const head = await store.head();
        expect(head).toBe(later.position);
        await tick();
        const fired = await fireOne(store);
        expect(fired).toEqual({ ...pending, position: expect.any(Number), timestamp: expect.any(String) });
        expect(fired.position).toBeGreaterThan(head);
        expect(await store.head()).toBe(fired.position);
        expect(fired.timestamp >= due.toISOString()).toBe(true);
        expect(fired.timestamp > later.timestamp).toBe(true);
        expect(new Date(fired.timestamp).toISOString()).toBe(fired.timestamp);
        expect(await store.claimDueScheduled(new Date())).toEqual([]);
        expect(await store.head()).toBe(fired.position);
        expect(await store.read(pending.id)).toEqual(fired);
      });

      it('keeps positions strictly increasing and unused after a fired event is re-sequenced', async () => {
        const store = await open();
        const a = (await store.append(newEvent())).event;
        const pending = (await store.append(newEvent(), { publisher: 's', scheduledAt: new Date(0) })).event;
        const b = (await store.append(newEvent())).event;
        // Deleting the newest event leaves head above every stored position; firing must go beyond head.
        expect(await store.delete(b.id)).toBe(true);
        const fired = await fireOne(store);
        expect(fired.position).toBeGreaterThan(b.position);
        expect(await store.head()).toBe(fired.position);
        const c = (await store.append(newEvent())).event;
        expect(c.position).toBeGreaterThan(fired.position);
        expect(await store.head()).toBe(c.position);
        // Firing the newest event still moves it.
        const last = (await store.append(newEvent(), { publisher: 's', scheduledAt: new Date(0) })).event;
        const lastFired = await fireOne(store);
        expect(lastFired.id).toBe(last.id);
        expect(lastFired.position).toBeGreaterThan(last.position);
        const d = (await store.append(newEvent())).event;
        expect(d.position).toBeGreaterThan(lastFired.position);
        const log = await store.readEventlog('orders', 'p1');
        expect(ids(log)).toEqual([a.id, pending.id, c.id, last.id, d.id]);
        const positions = log.map((event) => event.position);
        expect(positions).toEqual([...positions].sort((x, y) => x - y));
        expect(new Set([...positions, pending.position, b.position, last.position]).size).toBe(8);
      });

      it('fires events due at once in due order with increasing new positions', async () => {
        const store = await open();
        const now = Date.now();
        const opts = (offset: number) => ({ publisher: 's', scheduledAt: new Date(now + offset) });
        const late = (await store.append(newEvent(), opts(-1_000))).event;
        const early = (await store.append(newEvent(), opts(-5_000))).event;
        const head = await store.head();
        const fired = await store.claimDueScheduled(new Date(now));
        expect(ids(fired)).toEqual([early.id, late.id]);
        const [first, second] = fired as [StoredEvent, StoredEvent];
        expect(first.position).toBeGreaterThan(head);
        expect(second.position).toBeGreaterThan(first.position);
        expect(await store.head()).toBe(second.position);
        expect(await store.readEventlog('orders', 'p1')).toEqual([first, second]);
      });
    });

    describe('group commit (appendBatch)', () => {
      /** A stored event as the input that stored it (rid aside), with `data` if given. */
      const inputOf = ({ id, domain, name, pid, data }: StoredEvent, other?: NewEvent['data']): NewEvent => ({ id, domain, name, pid, data: other ?? (data as NewEvent['data']) });
      /** Each outcome as `created`, or its error code. */
      const summary = (outcomes: readonly AppendOutcome[]): Array<boolean | string> =>
        outcomes.map((outcome) => (outcome.ok ? outcome.result.created : ((outcome.error as EventflowError).code ?? String(outcome.error))));

      it('decides each append alone, in request order: a conflict, a duplicate or a bad date fails only itself', async () => {
        const store = await open();
        const stored = (await store.append(newEvent({ data: { n: 0 } }), { publisher: 's' })).event;
        const head = await store.head();
        const first = newEvent({ pid: 'p2' });
        const requests: AppendRequest[] = [
          { event: first, options: { publisher: 's', expectedVersion: 0 } },
          // The stream p1 is at version 1: a conflict, for this append only.
          { event: newEvent({ data: { late: true } }), options: { publisher: 's', expectedVersion: 0 } },
          // A retry of a stored event, with its keys in another order, and of one earlier in this batch.
          { event: inputOf(stored, { n: 0 }), options: { publisher: 's' } },
          { event: { ...first }, options: { publisher: 's', expectedVersion: 7 } },
          // The stored id with other content.
          { event: inputOf(stored, { n: 1 }), options: { publisher: 's' } },
          // Sees the append before it: p2 is at version 1 now, and `first` exists as a rid.
          { event: newEvent({ pid: 'p2', rid: first.id }), options: { publisher: 's', expectedVersion: 1 } },
          { event: newEvent({ rid: 'no-such-event' }), options: { publisher: 's' } },
          { event: newEvent(), options: { publisher: 's', scheduledAt: new Date(Number.NaN) } },
          // Unfired scheduled events do not count: p3 stays at version 0.
          { event: newEvent({ pid: 'p3' }), options: { publisher: 's', scheduledAt: new Date(Date.now() + 3_600_000) } },
          { event: newEvent({ pid: 'p3' }), options: { expectedVersion: 0 } },
        ];
        const outcomes = await store.appendBatch(requests);
        expect(summary(outcomes)).toEqual([
          true,
          'E_EVENTFLOW_VERSION_CONFLICT',
          false,
          false,
          'E_EVENTFLOW_DUPLICATE_ID',
          true,
          'E_EVENTFLOW_REFERENCE_NOT_FOUND',
          'E_EVENTFLOW_INVALID_DATE',
          true,
          true,
        ]);
        const conflict = outcomes[1] as Extract<AppendOutcome, { ok: false }>;
        expect((conflict.error as EventflowError).details).toEqual({ domain: 'orders', pid: 'p1', currentVersion: 1, expectedVersion: 0 });
        const events = outcomes.flatMap((outcome) => (outcome.ok ? [outcome.result.event] : []));
        expect(events[1]).toEqual(stored);
        expect(events[2]).toEqual(events[0]);
        // The created ones: positions after the head, ascending in request order.
        const created = outcomes.flatMap((outcome) => (outcome.ok && outcome.result.created ? [outcome.result.event] : []));
        expect(created.map((event) => event.position)).toEqual([...created.map((event) => event.position)].sort((a, b) => a - b));
        expect(created[0]!.position).toBeGreaterThan(head);
        expect(new Set(created.map((event) => event.position)).size).toBe(created.length);
        for (const event of created) expect(await store.read(event.id)).toEqual(event);
        expect(ids(await store.readEventlog('orders', 'p2'))).toEqual([first.id, created[1]!.id]);
        expect(await store.countEventlog('orders', 'p1')).toBe(1);
        expect(ids(await store.readPublishedAfter({ domain: 'orders', name: '*' }, head, 10))).toEqual([first.id, created[1]!.id]);
        expect(await store.appendBatch([])).toEqual([]);
      });

      it('group-commits concurrent appends: positions follow the order of the calls, each settles alone', async () => {
        const store = await open();
        await store.append(newEvent({ pid: 'v' }));
        const inputs = Array.from({ length: 60 }, (_, i) => newEvent({ pid: `p${i % 4}`, data: { i } }));
        // Two "clients" interleaved, plus a racer on the version of stream v and a duplicate id.
        const calls = inputs.map((input, i) => store.append(input, { publisher: i % 2 ? 'client-a' : 'client-b' }));
        const racers = [0, 1, 2].map(() => store.append(newEvent({ pid: 'v' }), { publisher: 's', expectedVersion: 1 }));
        const duplicate = store.append({ ...inputs[0]!, data: { other: true } }, { publisher: 's' });
        const results = await Promise.all(calls);
        const raced = await Promise.allSettled(racers);
        await expectCode(duplicate, 'E_EVENTFLOW_DUPLICATE_ID');
        expect(raced.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
        const positions = results.map((result) => result.event.position);
        expect(positions).toEqual([...positions].sort((a, b) => a - b));
        expect(new Set(positions).size).toBe(positions.length);
        expect(results.every((result) => result.created)).toBe(true);
        const published = await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 100);
        expect(ids(published)).toEqual([...ids(results.map((result) => result.event)), (raced[0] as PromiseFulfilledResult<AppendResult>).value.event.id]);
      });

      it('claims a batch for routing once, takes the claim at append for routedBy, and marks orphans in one go', async () => {
        const store = await open();
        const a = (await store.append(newEvent(), { publisher: 's' })).event;
        const b = (await store.append(newEvent(), { publisher: 's' })).event;
        const routed = (await store.append(newEvent(), { publisher: 's', routedBy: 'GW-1' })).event;
        const persisted = (await store.append(newEvent())).event;
        expect(await store.claimForRouting(b.id, 'GW-2')).toBe(true);
        expect(await store.claimAllForRouting([a.id, b.id, routed.id, persisted.id, 'missing'], 'GW-1')).toEqual([a.id]);
        expect(await store.claimAllForRouting([a.id], 'GW-2')).toEqual([]);
        expect(await store.claimAllForRouting([], 'GW-2')).toEqual([]);
        // A retry does not take the claim again, nor fail for it.
        expect((await store.append(inputOf(routed), { publisher: 's', routedBy: 'GW-3' })).created).toBe(false);
        await store.markOrphans([a.id, b.id, 'missing']);
        await store.markOrphans([]);
        // Orphan marks leave the claims alone.
        expect(await store.claimForConsumer(a.id, 'c1')).toBe(true);
      });
    });

    describe('expectedVersion (optimistic concurrency)', () => {
      /** The rejection of `promise`, which must be an E_EVENTFLOW_VERSION_CONFLICT. */
      const conflictOf = async (promise: Promise<unknown>): Promise<EventflowError> => {
        const error = await promise.then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(isEventflowError(error, 'E_EVENTFLOW_VERSION_CONFLICT'), `expected a version conflict, got ${String(error)}`).toBe(true);
        return error as EventflowError;
      };

      it('appends when the eventlog holds exactly expectedVersion events, counting persisted events and no other stream', async () => {
        const store = await open();
        const first = await store.append(newEvent(), { publisher: 's', expectedVersion: 0 });
        expect(first.created).toBe(true);
        // Persisted (unrouted) events count; so does an event written without a check.
        await store.append(newEvent(), { expectedVersion: 1 });
        await store.append(newEvent(), { publisher: 's' });
        // Other pids and other domains are other streams.
        await store.append(newEvent({ pid: 'p2' }), { expectedVersion: 0 });
        await store.append(newEvent({ domain: 'billing' }), { expectedVersion: 0 });
        const fourth = await store.append(newEvent(), { publisher: 's', expectedVersion: 3 });
        expect(fourth.created).toBe(true);
        expect(await store.countEventlog('orders', 'p1')).toBe(4);
        expect(ids(await store.readEventlog('orders', 'p1')).at(-1)).toBe(fourth.event.id);
      });

      it('throws E_EVENTFLOW_VERSION_CONFLICT with the current and expected versions, and stores nothing', async () => {
        const store = await open();
        await store.append(newEvent(), { publisher: 's' });
        await store.append(newEvent(), { publisher: 's' });
        const head = await store.head();
        const behind = newEvent({ data: { n: 1 } });
        const error = await conflictOf(store.append(behind, { publisher: 's', expectedVersion: 1 }));
        expect(error.details).toEqual({ domain: 'orders', pid: 'p1', currentVersion: 2, expectedVersion: 1 });
        expect(error.message).toBe('orders › p1 is at version 2, not 1: read the eventlog and retry');
        const ahead = newEvent();
        expect((await conflictOf(store.append(ahead, { expectedVersion: 3 }))).details).toMatchObject({ currentVersion: 2, expectedVersion: 3 });
        expect(await store.read(behind.id)).toBeUndefined();
        expect(await store.read(ahead.id)).toBeUndefined();
        expect(await store.countEventlog('orders', 'p1')).toBe(2);
        expect(await store.readPublishedAfter({ domain: 'orders', name: '*' }, 0, 10)).toHaveLength(2);
        // A failed check assigns no position (a store may skip one; it must not store the event).
        const next = await store.append(behind, { publisher: 's', expectedVersion: 2 });
        expect(next.created).toBe(true);
        expect(next.event.position).toBeGreaterThan(head);
        expect(await store.countEventlog('orders', 'p1')).toBe(3);
      });

      it('leaves unfired scheduled events out of the version, and counts them once fired', async () => {
        const store = await open();
        await store.append(newEvent(), { publisher: 's' });
        const later = (await store.append(newEvent(), { publisher: 's', scheduledAt: new Date(Date.now() + 3_600_000) })).event;
        expect((await conflictOf(store.append(newEvent(), { expectedVersion: 2 }))).details).toMatchObject({ currentVersion: 1 });
        await store.append(newEvent(), { expectedVersion: 1 });
        await store.append(newEvent(), { publisher: 's', scheduledAt: new Date(0) });
        expect(await store.countEventlog('orders', 'p1')).toBe(2);
        await fireOne(store);
        expect(await store.countEventlog('orders', 'p1')).toBe(3);
        await store.append(newEvent(), { expectedVersion: 3 });
        expect(await store.read(later.id)).toBeDefined();
        expect(await store.countEventlog('orders', 'p1')).toBe(4);
      });

      it('does not check an idempotent retry: a retried write whose first attempt stored the event returns it', async () => {
        const store = await open();
        const input = newEvent({ data: { a: 1, b: 2 } });
        const first = await store.append(input, { publisher: 's', expectedVersion: 0 });
        // The stream is now at version 1, yet resending the same write (same id and content) succeeds.
        const retried = await store.append({ ...input, data: { b: 2, a: 1 } }, { publisher: 's', expectedVersion: 0 });
        expect(retried).toEqual({ event: first.event, created: false });
        expect((await store.append(input, { expectedVersion: 42 })).created).toBe(false);
        // The same id with other content is still a duplicate, whatever the version says.
        await expectCode(store.append({ ...input, data: { a: 2 } }, { expectedVersion: 1 }), 'E_EVENTFLOW_DUPLICATE_ID');
        expect(await store.countEventlog('orders', 'p1')).toBe(1);
      });

      it('counts deletions: deleting events lowers the version', async () => {
        const store = await open();
        const a = (await store.append(newEvent())).event;
        await store.append(newEvent());
        expect(await store.delete(a.id)).toBe(true);
        await expectCode(store.append(newEvent(), { expectedVersion: 2 }), 'E_EVENTFLOW_VERSION_CONFLICT');
        await store.append(newEvent(), { expectedVersion: 1 });
        expect(await store.deleteEventlog('orders', 'p1')).toBe(true);
        await store.append(newEvent(), { expectedVersion: 0 });
      });

      it('lets exactly one of concurrent appends with the same expectedVersion win', async () => {
        const store = await open();
        await store.append(newEvent());
        const racers = Array.from({ length: 6 }, (_, i) => newEvent({ data: { racer: i } }));
        const results = await Promise.allSettled(racers.map((input) => store.append(input, { publisher: 's', expectedVersion: 1 })));
        const won = results.filter((result) => result.status === 'fulfilled');
        const lost = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(racers.length - 1);
        for (const error of lost) {
          expect(isEventflowError(error, 'E_EVENTFLOW_VERSION_CONFLICT'), String(error)).toBe(true);
          expect((error as EventflowError).details).toEqual({ domain: 'orders', pid: 'p1', currentVersion: 2, expectedVersion: 1 });
        }
        expect(await store.countEventlog('orders', 'p1')).toBe(2);
      });
    });
  });
}
