/** The Catalog (store/catalog.ts) every EventStore must have: part of the store suite (store-suite.ts). */
import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '@eventflow/core';
import type { EventStore, NewEvent } from '../src/store/store.js';

let counter = 0;
const event = (overrides: Partial<NewEvent>): NewEvent => ({ id: `cat-${++counter}`, domain: 'orders', name: 'created', pid: 'p1', data: {}, ...overrides });

export function describeCatalog(open: () => Promise<EventStore>): void {
  describe('catalog', () => {
    it('lists domains with event counts and last activity, leaving unfired scheduled events out', async () => {
      const store = await open();
      await store.append(event({ domain: 'orders' }));
      const { event: last } = await store.append(event({ domain: 'orders', pid: 'p2' }));
      await store.append(event({ domain: 'billing' }));
      await store.append(event({ domain: 'later' }), { publisher: 'g', scheduledAt: new Date(Date.now() + 60_000) });
      const domains = await store.catalog.domains();
      expect(domains.map((d) => [d.domain, d.events])).toEqual([['billing', 1], ['orders', 2]]);
      expect(domains[1]?.lastEvent).toBe(last.timestamp);
    });

    it('pages processes in pid order with a cursor, finds them by prefix, and gives each its status', async () => {
      const store = await open();
      for (const pid of ['a1', 'a2', 'b1', 'b2', 'b3']) await store.append(event({ pid }));
      await store.append(event({ pid: 'a1', name: 'shipped' }));
      const { event: failed } = await store.append(event({ pid: 'b1' }), { publisher: 'g' });
      await store.settle(failed.id, 'failed');
      const { event: claimed } = await store.append(event({ pid: 'b2' }), { publisher: 'g' });
      await store.claimForConsumer(claimed.id, 'worker');
      await store.append(event({ pid: 'b3' }), { publisher: 'g', scheduledAt: new Date(Date.now() + 60_000) });
      const first = await store.catalog.processes('orders', { limit: 2 });
      expect(first.map((p) => [p.pid, p.events])).toEqual([['a1', 2], ['a2', 1]]);
      expect((first[0]?.firstEvent ?? '') <= (first[0]?.lastEvent ?? '')).toBe(true);
      const rest = await store.catalog.processes('orders', { after: 'a2', limit: 10 });
      expect(rest.map((p) => [p.pid, p.status])).toEqual([['b1', 'failed'], ['b2', 'pending'], ['b3', 'scheduled']]);
      expect(first[0]?.status).toBe('open'); // events, and no outcome of any kind
      expect((await store.catalog.processes('orders', { prefix: 'b', after: 'b1', limit: 10 })).map((p) => p.pid)).toEqual(['b2', 'b3']);
      expect(await store.catalog.processes('orders', { prefix: 'zz', limit: 10 })).toEqual([]);
      expect(await store.catalog.processes('other', { limit: 10 })).toEqual([]);
    });

    it('tells a process by its outcomes: outcome events (the newest wins), consumes of any group, and open without any', async () => {
      const store = await open();
      const publish = async (pid: string, name: string): Promise<StoredEvent> => (await store.append(event({ domain: 'shop', pid, name }), { publisher: 'g' })).event;
      // The demo's orders: the consumer succeeds and publishes the process's outcome as an event.
      const shipped = await publish('shipped', 'order-placed');
      await store.claimForConsumer(shipped.id, 'worker');
      await store.settle(shipped.id, 'success');
      await publish('shipped', 'order-shipped');
      await publish('shipped', 'success');
      const refused = await publish('refused', 'order-placed');
      await store.claimForConsumer(refused.id, 'worker');
      await store.settle(refused.id, 'success');
      await publish('refused', 'failed');
      // Failed, then retried with success: completed; the other way round: failed. (MySQL orders
      // outcome events by their millisecond timestamps, v4's rows having no position: a tick apart.)
      const tick = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 3));
      await publish('retried', 'failed');
      await tick();
      await publish('retried', 'success');
      await publish('relapsed', 'success');
      await tick();
      await publish('relapsed', 'failed');
      // Consumed with success, no outcome event: completed. Nothing at all: open.
      const consumed = await publish('consumed', 'noted');
      await store.claimForConsumer(consumed.id, 'worker');
      await store.settle(consumed.id, 'success');
      await publish('untouched', 'noted');
      // A named group: its dead letter fails the process, its open delivery makes it pending.
      const audit = { domain: 'shop', name: 'audited', group: 'audit' };
      const group = await store.ledger().ensureGroup(audit);
      const now = Date.now();
      const claim = () => store.ledger().claim({ group, owner: 'gw-1', consumer: 'GW', secret: 's', deadline: now + 10_000, now, limit: 1, maxAttempts: 5 });
      const dead = await publish('dead', 'audited');
      const [failed] = (await claim()).claimed;
      expect(failed?.event.id).toBe(dead.id);
      await store.ledger().apply([{ kind: 'outcome', delivery: failed?.delivery as string, outcome: 'failed', error: 'boom' }]);
      const busy = await publish('busy', 'audited');
      expect((await claim()).claimed[0]?.event.id).toBe(busy.id);
      const statuses = Object.fromEntries((await store.catalog.processes('shop', { limit: 100 })).map((p) => [p.pid, p.status]));
      expect(statuses).toEqual({
        shipped: 'completed',
        refused: 'failed',
        retried: 'completed',
        relapsed: 'failed',
        consumed: 'completed',
        untouched: 'open',
        dead: 'failed',
        busy: 'pending',
      });
    });

    it('pages processes by recent activity: the newest event first, with a cursor, by prefix too', async () => {
      const store = await open();
      // Timestamps have ms resolution and ties go by pid: each append in a ms of its own, for an order by time alone.
      const nextMs = async (): Promise<void> => {
        const now = Date.now();
        while (Date.now() <= now) await new Promise((resolve) => setImmediate(resolve));
      };
      for (const pid of ['r1', 'r2', 'r3', 'x1', 'r4']) {
        await store.append(event({ domain: 'recent', pid }));
        await nextMs();
      }
      await store.append(event({ domain: 'recent', pid: 'r2' })); // r2 is the most recent now
      const first = await store.catalog.processes('recent', { order: 'recent', limit: 2 });
      expect(first.map((p) => p.pid)).toEqual(['r2', 'r4']);
      const rest = await store.catalog.processes('recent', { order: 'recent', cursor: first[1]!.cursor, limit: 10 });
      expect(rest.map((p) => p.pid)).toEqual(['x1', 'r3', 'r1']);
      expect(rest.every((p) => p.cursor !== undefined)).toBe(true);
      expect((await store.catalog.processes('recent', { order: 'recent', prefix: 'r', cursor: first[0]!.cursor, limit: 10 })).map((p) => p.pid)).toEqual(['r4', 'r3', 'r1']);
      expect(await store.catalog.processes('recent', { order: 'recent', cursor: 'not a cursor', limit: 10 })).toEqual([]);
    });

    it("tells each event's fate, a dead letter included, and the process's associations", async () => {
      const store = await open();
      const { event: persisted } = await store.append(event({ pid: 'f' }));
      const { event: done } = await store.append(event({ pid: 'f' }), { publisher: 'g' });
      await store.claimForConsumer(done.id, 'worker-1');
      await store.settle(done.id, 'success');
      const { event: dead } = await store.append(event({ pid: 'f' }), { publisher: 'g' });
      await store.deadLetter(dead.id, 3, 'lease expired');
      await store.persistChildProcessAssociation(done.id, 'billing', 'inv-1');
      await store.persistEntityAssociation(done.id, 'customer-7');
      const fates = new Map((await store.catalog.fates('orders', 'f', [persisted.id, done.id, dead.id])).map((fate) => [fate.eventId, fate]));
      expect(fates.get(persisted.id)?.published).toBe(false);
      expect(fates.get(done.id)).toMatchObject({ published: true, consumer: 'worker-1' });
      expect(fates.get(done.id)?.success).toBeTypeOf('string');
      expect(fates.get(dead.id)?.deadLetter).toMatchObject({ attempts: 3, reason: 'lease expired' });
      expect(fates.get(dead.id)?.failed).toBeTypeOf('string');
      expect(await store.catalog.associations('orders', 'f')).toEqual({
        children: [{ eventId: done.id, domain: 'billing', cpid: 'inv-1' }],
        entities: [{ eventId: done.id, eid: 'customer-7' }],
      });
    });

    it("gives each event its consumer groups' deliveries: attempts, outcome and last error, one query per page", async () => {
      const store = await open();
      const billing = { domain: 'orders', name: 'created', group: 'billing' };
      const fallback = { domain: 'orders', name: 'created', group: '' };
      const billingGroup = await store.ledger().ensureGroup(billing);
      const fallbackGroup = await store.ledger().ensureGroup(fallback);
      const { event: retried } = await store.append(event({ pid: 'g' }), { publisher: 'g' });
      const { event: untouched } = await store.append(event({ pid: 'g' }), { publisher: 'g' });
      const now = Date.now();
      const claim = async (group: typeof billingGroup, at: number) => {
        const { claimed } = await store.ledger().claim({ group, owner: 'gw-1', consumer: 'GW', secret: `s${at}`, deadline: at + 10_000, now: at, limit: 1, maxAttempts: 5 });
        expect(claimed[0]?.event.id).toBe(retried.id);
        return claimed[0] as (typeof claimed)[0];
      };
      const b1 = await claim(billingGroup, now);
      expect(b1.attempt).toBe(1);
      await store.ledger().apply([{ kind: 'release', delivery: b1.delivery, error: 'boom 1' }]);
      const b2 = await claim(billingGroup, now + 1);
      expect(b2.attempt).toBe(2);
      await store.ledger().apply([{ kind: 'outcome', delivery: b2.delivery, outcome: 'failed', error: 'boom 2' }]);
      const f1 = await claim(fallbackGroup, now);
      expect(f1.attempt).toBe(1);
      // The untouched event has rows in the queue (written by the claims) but no delivery yet: none shown.
      const fates = new Map((await store.catalog.fates('orders', 'g', [retried.id, untouched.id])).map((fate) => [fate.eventId, fate]));
      const iso = (ms: number): string => new Date(ms).toISOString();
      // claimedAt: the claim's time; settledAt (only when the delivery ended) is the store's clock, checked by store-suite-trace.ts.
      expect(fates.get(retried.id)?.deliveries?.map(({ settledAt: _settledAt, ...delivery }) => delivery)).toEqual([
        { group: '', name: '', attempts: 1, claimedAt: iso(now) },
        { group: 'billing', name: 'created', attempts: 2, outcome: 'failed', lastError: 'boom 2', claimedAt: iso(now + 1) },
      ]);
      expect(fates.get(retried.id)?.deliveries?.[0]?.settledAt).toBeUndefined();
      expect(fates.get(untouched.id)?.deliveries).toBeUndefined();
      await store.ledger().apply([{ kind: 'outcome', delivery: f1.delivery, outcome: 'success' }]);
      const [settled] = await store.catalog.fates('orders', 'g', [retried.id]);
      expect(settled?.deliveries?.[0]).toEqual({ group: '', name: '', attempts: 1, outcome: 'success', claimedAt: iso(now), settledAt: expect.any(String) });
    });

    it('lists upcoming scheduled events soonest first, pages them, and cancels one only before it fires', async () => {
      const store = await open();
      const soon = new Date(Date.now() + 60_000);
      const later = new Date(Date.now() + 120_000);
      const { event: b } = await store.append(event({ pid: 's2' }), { publisher: 'g', scheduledAt: later });
      const { event: a } = await store.append(event({ pid: 's1' }), { publisher: 'g', scheduledAt: soon });
      const { event: c } = await store.append(event({ domain: 'billing', pid: 's3' }), { publisher: 'g', scheduledAt: later });
      const all = await store.catalog.scheduled({ limit: 10 });
      expect(all.map((s) => s.id)).toEqual([a.id, ...[b.id, c.id].sort()]);
      expect(new Date(all[0]?.due ?? 0).getTime()).toBeGreaterThanOrEqual(soon.getTime() - 1);
      const page = await store.catalog.scheduled({ limit: 1, after: { due: all[0]!.due, id: all[0]!.id } });
      expect(page.map((s) => s.id)).toEqual([all[1]?.id]);
      expect((await store.catalog.scheduled({ domain: 'billing', limit: 10 })).map((s) => s.id)).toEqual([c.id]);
      // Only in the domain named: the caller's right was checked on that one.
      expect(await store.catalog.cancelScheduled(c.id, 'orders')).toBe(false);
      expect(await store.read(c.id)).toBeDefined();
      expect(await store.catalog.cancelScheduled(a.id, a.domain)).toBe(true);
      expect(await store.read(a.id)).toBeUndefined();
      expect(await store.catalog.cancelScheduled(a.id, a.domain)).toBe(false);
      await store.claimDueScheduled(new Date(Date.now() + 200_000));
      expect(await store.catalog.cancelScheduled(b.id, b.domain)).toBe(false);
      expect(await store.read(b.id)).toBeDefined();
      const { event: plain } = await store.append(event({}));
      expect(await store.catalog.cancelScheduled(plain.id, plain.domain)).toBe(false);
    });

    it('lists scheduled events only of domains matching the patterns given, each character but `*` taken literally', async () => {
      const store = await open();
      const due = new Date(Date.now() + 60_000);
      const domains = ['a_b', 'axb', 'a%b', 'a[b', 'A_B', '?', 'a!b'];
      const ids = new Map<string, string>();
      for (const domain of domains) ids.set(domain, (await store.append(event({ domain, pid: 'p' }), { publisher: 'g', scheduledAt: due })).event.id);
      const listed = async (patterns: string[]): Promise<string[]> =>
        (await store.catalog.scheduled({ domains: patterns, limit: 100 })).map((row) => row.domain).sort();
      expect(await listed(['a_b'])).toEqual(['a_b']);
      expect(await listed(['a%b'])).toEqual(['a%b']);
      expect(await listed(['a[b'])).toEqual(['a[b']);
      expect(await listed(['a!b'])).toEqual(['a!b']);
      expect(await listed(['?'])).toEqual(['?']);
      expect(await listed(['a*b'])).toEqual(['a!b', 'a%b', 'a[b', 'a_b', 'axb']);
      expect(await listed(['A*', '?'])).toEqual(['?', 'A_B']);
      expect(await listed(['é*', 'ä'])).toEqual([]);
      expect(await listed([])).toEqual([]);
      expect((await store.catalog.scheduled({ limit: 100 })).length).toBe(domains.length);
    });

    it('finds where the last N published events of a subscription begin', async () => {
      const store = await open();
      const published = [];
      for (let i = 0; i < 4; i++) published.push((await store.append(event({ name: i % 2 ? 'b' : 'a' }), { publisher: 'g' })).event);
      await store.append(event({ name: 'a' })); // persisted only: not replayed
      expect(await store.catalog.positionBeforeLast('orders', '*', 2)).toBe(published[2]!.position - 1);
      expect(await store.catalog.positionBeforeLast('orders', 'a', 1)).toBe(published[2]!.position - 1);
      expect(await store.catalog.positionBeforeLast('orders', '*', 10)).toBe(0);
    });

    it('counts deliveries claimed and not settled as the backlog', async () => {
      const store = await open();
      const { event: one } = await store.append(event({}), { publisher: 'g' });
      const { event: two } = await store.append(event({}), { publisher: 'g' });
      await store.claimForConsumer(one.id, 'w');
      await store.claimForConsumer(two.id, 'w');
      await store.settle(two.id, 'success');
      expect(await store.catalog.backlog()).toBe(1);
    });
  });
}
