/**
 * The delivery ledger's contract (store/ledger.ts), run on both stores through describeEventStore
 * (store-suite.ts): groups, backlog, claims and leases, settles by delivery id, retry delays,
 * dead letters with their last error, requeue and discard.
 */
import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '@eventflow/core';
import type { EventStore, NewEvent } from '../src/store/store.js';
import type { GroupKey } from '../src/store/ledger.js';

type Open = () => Promise<EventStore>;
type NewEventOf = (overrides?: Partial<NewEvent>) => NewEvent;

export function describeLedger(open: Open, newEvent: NewEventOf): void {
  describe('delivery ledger', () => {
    const publish = async (store: EventStore, name = 'created') => (await store.append(newEvent({ name }), { publisher: 's' })).event;
    const named: GroupKey = { domain: 'orders', name: 'created', group: 'billing' };
    const fallback: GroupKey = { domain: 'orders', name: 'created', group: '' };
    const claim = (store: EventStore, key: GroupKey, event: { id: string }, delivery: string, now = Date.now(), lease = 10_000) =>
      store.ledger().claim({ key, event: event as StoredEvent, owner: 'gw-1', consumer: 'GW', delivery, deadline: now + lease, now });

    it('a group is created once, at the head; its backlog is the events after it, in position order', async () => {
      const store = await open();
      const before = await publish(store);
      const group = await store.ledger().ensureGroup(named);
      expect(group.createdPosition).toBe(before.position);
      expect((await store.ledger().ensureGroup(named)).createdAt).toBe(group.createdAt);
      const a = await publish(store);
      await publish(store, 'other');
      const b = await publish(store);
      expect((await store.ledger().unsettled(group, 0, 10)).map((row) => row.event.id)).toEqual([a.id, b.id]);
      expect(await store.ledger().consumed('orders', 'created')).toBe(true);
      expect(await store.ledger().consumed('orders', 'other')).toBe(false);
      expect(await store.ledger().deleteGroup(named)).toBe(true);
      expect(await store.ledger().deleteGroup(named)).toBe(false);
      expect(await store.ledger().consumed('orders', 'created')).toBe(false);
    });

    it('one claim wins per group; groups are independent; a lease in force blocks, an expired one is taken over', async () => {
      const store = await open();
      await store.ledger().ensureGroup(named);
      await store.ledger().ensureGroup(fallback);
      const event = await publish(store);
      const now = Date.now();
      const results = await Promise.all([claim(store, named, event, 'd1', now), claim(store, named, event, 'd2', now)]);
      expect(results.filter((attempt) => attempt === 1)).toHaveLength(1);
      expect(await claim(store, fallback, event, 'd3', now)).toBe(1);
      // The default group's claim is v4's too: a v4 spoke's guarded claim now fails.
      expect(await store.claimForConsumer(event.id, 'spoke')).toBe(false);
      expect(await claim(store, named, event, 'd4', now + 20_000)).toBe(2);
      expect(await store.ledger().settle('d4', 'success', undefined)).toMatchObject({ eventId: event.id, attempts: 2 });
      expect(await store.ledger().settle('d4', 'failed', undefined)).toBeUndefined();
      expect(await claim(store, named, event, 'd5', now + 40_000)).toBeUndefined();
    });

    it('a settle counts only for the current delivery; release and retry delays make it pending again', async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup(named);
      const event = await publish(store);
      const now = Date.now();
      expect(await claim(store, named, event, 'd1', now)).toBe(1);
      expect(await store.ledger().release('d1', { availableAt: now + 60_000, error: 'busy' })).toMatchObject({ attempts: 1 });
      const [row] = await store.ledger().unsettled(group, 0, 10);
      expect(row).toMatchObject({ attempts: 1, availableAt: now + 60_000, lastError: 'busy' });
      expect(await store.ledger().nextDue(now)).toBe(now + 60_000);
      expect(await claim(store, named, event, 'd2', now)).toBeUndefined();
      expect(await claim(store, named, event, 'd2', now + 60_000)).toBe(2);
      expect(await store.ledger().settle('d1', 'success', undefined)).toBeUndefined();
      expect(await store.ledger().releaseOwner('gw-1')).toBe(1);
      expect((await store.ledger().unsettled(group, 0, 10))[0]).toMatchObject({ attempts: 1, deadline: undefined });
    });

    it('dead letters carry the last error, list newest first by domain, and can be requeued or discarded', async () => {
      const store = await open();
      await store.ledger().ensureGroup(named);
      await store.ledger().ensureGroup(fallback);
      const event = await publish(store);
      expect(await store.ledger().deadLetter(named, event.id, 5, 'card declined')).toBe(true);
      expect(await store.ledger().deadLetter(fallback, event.id, 3, 'lease expired')).toBe(true);
      const letters = await store.ledger().deadLetters({ domain: 'orders', limit: 10, offset: 0 });
      expect(letters).toHaveLength(2);
      expect(letters.find((letter) => letter.group === 'billing')).toMatchObject({ eventId: event.id, attempts: 5, lastError: 'card declined', consumes: 'created' });
      expect(await store.ledger().deadLetters({ domain: 'nothing', limit: 10, offset: 0 })).toEqual([]);
      expect(await store.deadLetters()).toMatchObject([{ eventId: event.id, attempts: 3 }]);
      const summary = (await store.ledger().groups(Date.now())).find((group) => group.group === 'billing');
      expect(summary).toMatchObject({ deadLetters: 1, pending: 0 });
      expect(await store.ledger().requeue(named, event.id)).toBe(true);
      expect(await store.ledger().requeue(named, event.id)).toBe(false);
      expect(await claim(store, named, event, 'd9')).toBe(1);
      expect(await store.ledger().discard(fallback, event.id)).toBe(true);
      expect(await store.deadLetters()).toEqual([]);
      expect(await store.ledger().deadLetters({ limit: 10, offset: 0 })).toEqual([]);
    });
  });
}
