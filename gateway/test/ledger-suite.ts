/**
 * The delivery ledger's contract (store/ledger.ts), run on both stores through describeEventStore
 * (store-suite.ts): groups, the queue and its pages, claims and leases, settles by delivery id,
 * ordered groups, retry delays, dead letters with their last error, requeue and discard (guarded by
 * the domain), and the counts.
 */
import { describe, expect, it } from 'vitest';
import type { EventStore, NewEvent } from '../src/store/store.js';
import type { StoredEvent } from '@eventflow/core';
import { LateClaim, type ClaimResult, type GroupKey, type GroupRecord } from '../src/store/ledger.js';

type Open = () => Promise<EventStore>;
type NewEventOf = (overrides?: Partial<NewEvent>) => NewEvent;

let secrets = 0;

export function describeLedger(open: Open, newEvent: NewEventOf): void {
  describe('delivery ledger', () => {
    const publish = async (store: EventStore, name = 'created', pid?: string) => (await store.append(newEvent({ name, ...(pid ? { pid } : {}) }), { publisher: 's' })).event;
    const named: GroupKey = { domain: 'orders', name: 'created', group: 'billing' };
    const fallback: GroupKey = { domain: 'orders', name: 'created', group: '' };
    const claim = (store: EventStore, group: GroupRecord, options: { now?: number; limit?: number; lease?: number; maxAttempts?: number; owner?: string } = {}): Promise<ClaimResult> => {
      const now = options.now ?? Date.now();
      return store.ledger().claim({
        group,
        owner: options.owner ?? 'gw-1',
        consumer: 'GW',
        secret: `secret-${(secrets += 1)}`,
        deadline: now + (options.lease ?? 10_000),
        now,
        limit: options.limit ?? 10,
        maxAttempts: options.maxAttempts ?? 5,
      });
    };
    const ids = (result: ClaimResult) => result.claimed.map((claimed) => claimed.event.id);

    it('a group is created once, at the head; its backlog is the events after it, claimed in position order, in pages', async () => {
      const store = await open();
      const before = await publish(store);
      const group = await store.ledger().ensureGroup(named);
      expect(group).toMatchObject({ createdPosition: before.position, ordered: false });
      expect((await store.ledger().ensureGroup(named)).createdAt).toBe(group.createdAt);
      const a = await publish(store);
      await publish(store, 'other');
      const b = await publish(store);
      const c = await publish(store);
      const first = await claim(store, group, { limit: 2 });
      expect(ids(first)).toEqual([a.id, b.id]);
      expect(first.claimed.map((claimed) => claimed.attempt)).toEqual([1, 1]);
      expect(first.nextDue).toBeUndefined();
      const second = await claim(store, group, { limit: 2 });
      expect(ids(second)).toEqual([c.id]);
      // Fewer than asked: the earliest time a leased row comes free.
      expect(second.nextDue).toBeGreaterThan(Date.now());
      expect(await store.ledger().consumed('orders', 'created')).toBe(true);
      expect(await store.ledger().consumed('orders', 'other')).toBe(false);
      expect(await store.ledger().countGroups('orders')).toBe(1);
      expect(await store.ledger().deleteGroup(named)).toBe(true);
      expect(await store.ledger().deleteGroup(named)).toBe(false);
      expect(await store.ledger().consumed('orders', 'created')).toBe(false);
      expect(await claim(store, group)).toMatchObject({ claimed: [], missing: true });
      // Asked before and answered false: a group made since answers true at once.
      await store.ledger().ensureGroup({ ...named, name: 'other' });
      expect(await store.ledger().consumed('orders', 'other')).toBe(true);
    });

    it('a page of any size takes exactly that many events, in position order, none twice; expired leases first', async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup(named);
      const published: string[] = [];
      for (let i = 0; i < 120; i++) published.push((await publish(store)).id);
      const now = Date.now();
      const taken: string[] = [];
      // Sizes with several bits set (a store may take a page in parts) and one; the first page's
      // leases are short, the others' long.
      for (const [limit, lease] of [[10, 5_000], [27, 60_000], [1, 60_000], [23, 60_000], [6, 60_000]] as const) {
        const page = ids(await claim(store, group, { now, limit, lease }));
        expect(page).toEqual(published.slice(taken.length, taken.length + limit));
        taken.push(...page);
      }
      // The first 10 leases ran out: a page of 15 takes them first, then 5 free rows in position order.
      const expired = await claim(store, group, { now: now + 20_000, limit: 15, lease: 60_000 });
      expect(ids(expired).slice(0, 10).sort()).toEqual(published.slice(0, 10).sort());
      expect(ids(expired).slice(10)).toEqual(published.slice(67, 72));
      const rest = ids(await claim(store, group, { now: now + 20_000, limit: 1000 }));
      // The other leases are in force: only the free rows are left, once each.
      expect(rest).toEqual(published.slice(72));
    });

    it('delivery ids are unguessable and distinct per claim; one claim wins per group; groups are independent; an expired lease is taken over', async () => {
      const store = await open();
      const billing = await store.ledger().ensureGroup(named);
      const v4 = await store.ledger().ensureGroup(fallback);
      const event = await publish(store);
      const now = Date.now();
      const [x, y] = await Promise.all([claim(store, billing, { now }), claim(store, billing, { now, owner: 'gw-2' })]);
      expect([...ids(x as ClaimResult), ...ids(y as ClaimResult)]).toEqual([event.id]);
      const first = [...(x as ClaimResult).claimed, ...(y as ClaimResult).claimed][0];
      // The claim's time in ms (the ids of later claims sort after it: the index of open deliveries
      // takes them at one edge), then 128 unguessable bits.
      expect(first?.delivery).toMatch(/^[0-9a-f]{44}$/);
      const claimedAt = parseInt(first?.delivery.slice(0, 12) ?? '', 16);
      expect(claimedAt).toBeGreaterThanOrEqual(now - 1);
      expect(claimedAt).toBeLessThanOrEqual(Date.now());
      expect((await claim(store, v4, { now })).claimed).toHaveLength(1);
      // The default group's claim is v4's too: a v4 spoke's guarded claim now fails.
      expect(await store.claimForConsumer(event.id, 'spoke')).toBe(false);
      const taken = await claim(store, billing, { now: now + 20_000 });
      expect(taken.claimed[0]).toMatchObject({ attempt: 2 });
      expect(taken.claimed[0]?.delivery).not.toBe(first?.delivery);
      expect(taken.claimed[0]!.delivery.slice(0, 12) >= (first?.delivery.slice(0, 12) ?? '')).toBe(true);
      // The superseded delivery is refused; the current one is recorded once.
      expect(await store.ledger().apply([{ kind: 'outcome', delivery: first?.delivery as string, outcome: 'success' }])).toEqual([undefined]);
      const current = taken.claimed[0]?.delivery as string;
      expect(await store.ledger().apply([{ kind: 'outcome', delivery: current, outcome: 'success' }])).toMatchObject([{ eventId: event.id, attempts: 2, key: named }]);
      expect(await store.ledger().apply([{ kind: 'outcome', delivery: current, outcome: 'failed' }])).toEqual([undefined]);
      expect(ids(await claim(store, billing, { now: now + 40_000 }))).toEqual([]);
    });

    // Before: such a claim committed leases that had run out; nobody could hand them out, and a claim by another gateway took
    // them over as expired before the hand-back took the attempt back: attempt 2 for a first run, or (one attempt) a dead letter never run.
    it('a claim whose leases have run out by its commit (ClaimRequest.clock) rolls back: no lease, no attempt; the next claim gets the event as attempt 1', async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup({ ...named, group: 'late' });
      const event = await publish(store);
      const now = Date.now();
      const request = { group, owner: 'gw-1', consumer: 'GW', deadline: now + 1_000, now, limit: 10, maxAttempts: 1 };
      // The link (or the store) held the claim half a second past its deadline.
      const late = await store.ledger().claim({ ...request, secret: `secret-${(secrets += 1)}`, clock: () => now + 1_500 }).catch((error: unknown) => error);
      expect(late).toBeInstanceOf(LateClaim);
      expect(late).toMatchObject({ code: 'E_EVENTFLOW_STORE_FAILED', details: { lateMs: 500 } });
      // Another gateway's claim after that deadline finds the event pending, not an expired lease on its last attempt.
      const taken = await claim(store, group, { now: now + 1_500, owner: 'gw-2', maxAttempts: 1 });
      expect(taken.dead).toEqual([]);
      expect(taken.claimed).toMatchObject([{ event: { id: event.id }, attempt: 1 }]);
      expect(await store.ledger().apply([{ kind: 'outcome', delivery: taken.claimed[0]?.delivery as string, outcome: 'success' }])).toMatchObject([{ eventId: event.id, attempts: 1 }]);
      // In time, a claim with a clock commits as one without.
      const next = await publish(store);
      expect(ids(await store.ledger().claim({ ...request, now: now + 2_000, deadline: now + 12_000, secret: `secret-${(secrets += 1)}`, clock: () => now + 2_100 }))).toEqual([next.id]);
    });

    it('a lease that ran out with its report still to be written (ClaimRequest.held) is left alone by a claim that names it; an ordered pid waits behind it', async () => {
      const store = await open();
      for (const ordered of [false, true]) {
        const group = await store.ledger().ensureGroup({ ...named, group: ordered ? 'held-ordered' : 'held' }, { ordered });
        const first = await publish(store, 'created', `h-${ordered}`);
        const second = await publish(store, 'created', `h-${ordered}`);
        const now = Date.now();
        const leased = await claim(store, group, { now, limit: ordered ? 10 : 1, lease: 1_000 });
        expect(ids(leased)).toEqual([first.id]);
        const report = leased.claimed[0]?.delivery as string;
        const later = now + 5_000;
        const claimNaming = (held: string[]): Promise<ClaimResult> =>
          store.ledger().claim({ group, owner: 'gw-1', consumer: 'GW', secret: `secret-${(secrets += 1)}`, deadline: later + 10_000, now: later, limit: 10, maxAttempts: 5, held });
        // Ordered: the pid's second event stays behind the first, held or not.
        expect(ids(await claimNaming([report]))).toEqual(ordered ? [] : [second.id]);
        expect(await store.ledger().apply([{ kind: 'outcome', delivery: report, outcome: 'success' }])).toMatchObject([{ eventId: first.id, attempts: 1 }]);
        if (ordered) expect(ids(await claimNaming([]))).toEqual([second.id]);
      }
    });

    it("v4's consumer claim is taken back only under the owner's lease in force, never before its claim or after it ends", async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup(fallback);
      const event = await publish(store);
      const now = Date.now();
      const retake = (owner = 'gw-1', at = now) => store.retakeConsumerClaim(event.id, 'GW', { owner, now: at });
      // Not claimed by the gateway yet (its claim may be in flight): left for that claim, which then wins.
      expect(await retake()).toBe(false);
      const [first] = (await claim(store, group, { now })).claimed;
      expect(first).toMatchObject({ attempt: 1 });
      // Held: nothing to take back.
      expect(await retake()).toBe(false);
      // A hub's lease sweep cleared the claim of the open delivery: its owner takes it back, no one else does.
      await store.releaseConsumerClaim(event.id);
      expect(await retake('gw-2')).toBe(false);
      expect(await retake('gw-1', now + 10_000)).toBe(false);
      expect(await retake()).toBe(true);
      expect(await store.claimForConsumer(event.id, 'spoke')).toBe(false);
      // The delivery ended without an outcome: the claim is free for the next claim, not taken by a late retake.
      expect(await store.ledger().apply([{ kind: 'release', delivery: first?.delivery as string }])).toMatchObject([{ attempts: 1 }]);
      expect(await retake()).toBe(false);
      const [second] = (await claim(store, group, { now })).claimed;
      expect(second).toMatchObject({ attempt: 2 });
      expect(await store.ledger().apply([{ kind: 'outcome', delivery: second?.delivery as string, outcome: 'success' }])).toMatchObject([{ attempts: 2 }]);
      await store.releaseConsumerClaim(event.id);
      expect(await retake()).toBe(false);
    });

    it("the default group's backlog passes over events a v4 spoke claimed first (the spoke's work, not pending here) and takes the rest in position order, in pages", async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup(fallback);
      const events: StoredEvent[] = [];
      for (let i = 0; i < 40; i++) events.push(await publish(store));
      // Claimed by v4 spokes before any claim of ours: theirs until their outcome.
      const spokes = new Set([1, 2, 3, 17, 30].map((i) => events[i]?.id as string));
      for (const id of spokes) expect(await store.claimForConsumer(id, 'spoke')).toBe(true);
      const pending = async () => (await store.ledger().groups(Date.now())).find((summary) => summary.group === '');
      // Counted before any claim (no rows yet) as after (rows written).
      expect(await pending()).toMatchObject({ pending: events.length - spokes.size, inFlight: 0 });
      const ours = events.map((event) => event.id).filter((id) => !spokes.has(id));
      const taken: string[] = [];
      for (const limit of [1, 2, 5, 4, 3, 100]) taken.push(...ids(await claim(store, group, { limit })));
      expect(taken).toEqual(ours);
      expect(await pending()).toMatchObject({ pending: 0, inFlight: ours.length });
      // Published after: taken next, as before.
      const later = await publish(store);
      expect(ids(await claim(store, group, { limit: 10 }))).toEqual([later.id]);
    });

    it('a settle counts only for the current delivery; release and retry delays make it pending again; a released id is void', async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup(named);
      const event = await publish(store);
      const now = Date.now();
      const [first] = (await claim(store, group, { now })).claimed;
      const released = await store.ledger().apply([{ kind: 'release', delivery: first?.delivery as string, availableAt: now + 60_000, error: 'busy' }]);
      expect(released).toMatchObject([{ attempts: 1 }]);
      expect(await store.ledger().delivery(first?.delivery as string)).toBeUndefined();
      expect(await store.ledger().extend(first?.delivery as string, now + 1)).toBe(false);
      const waiting = await claim(store, group, { now });
      expect(waiting.claimed).toEqual([]);
      expect(waiting.nextDue).toBe(now + 60_000);
      const [second] = (await claim(store, group, { now: now + 60_000 })).claimed;
      expect(second).toMatchObject({ attempt: 2 });
      expect(await store.ledger().delivery(second?.delivery as string)).toMatchObject({ eventId: event.id, domain: 'orders', attempts: 2 });
      expect(await store.ledger().extend(second?.delivery as string, now + 120_000)).toBe(true);
      expect(await store.ledger().releaseOwner('gw-1')).toBe(1);
      const [third] = (await claim(store, group, { now: now + 60_000 })).claimed;
      // releaseOwner hands back without counting the attempt.
      expect(third).toMatchObject({ attempt: 2 });
    });

    it('an outcome voids its delivery id, in its batch and after: no second outcome, release, extend or lookup; a requeued dead letter gets a new one', async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup(named);
      const events = [await publish(store), await publish(store)];
      const claimed = (await claim(store, group)).claimed;
      expect(claimed).toHaveLength(2);
      const [done, doomed] = claimed as [(typeof claimed)[0], (typeof claimed)[0]];
      const first = await store.ledger().apply([
        { kind: 'outcome', delivery: done.delivery, outcome: 'success' },
        { kind: 'dead', delivery: doomed.delivery, error: 'poison' },
      ]);
      expect(first.map((ref) => (ref instanceof Error ? ref : ref?.eventId))).toEqual([events[0]?.id, events[1]?.id]);
      for (const { delivery } of [done, doomed]) {
        expect(await store.ledger().delivery(delivery)).toBeUndefined();
        expect(await store.ledger().extend(delivery, Date.now() + 60_000)).toBe(false);
        expect(
          await store.ledger().apply([
            { kind: 'outcome', delivery, outcome: 'failed' },
            { kind: 'release', delivery },
            { kind: 'dead', delivery, error: 'again' },
          ]),
        ).toEqual([undefined, undefined, undefined]);
      }
      expect(await store.ledger().requeue(named, events[1]?.id as string)).toBe(true);
      // Pending again, under no delivery: the dead one's id stays void, and a claim gives a new one.
      expect(await store.ledger().apply([{ kind: 'outcome', delivery: doomed.delivery, outcome: 'success' }])).toEqual([undefined]);
      const [again] = (await claim(store, group)).claimed;
      expect(again).toMatchObject({ event: { id: events[1]?.id }, attempt: 1 });
      expect(again?.delivery).not.toBe(doomed.delivery);
      expect(await store.ledger().apply([{ kind: 'outcome', delivery: doomed.delivery, outcome: 'success' }])).toEqual([undefined]);
      expect(await store.ledger().apply([{ kind: 'outcome', delivery: again?.delivery as string, outcome: 'success' }])).toMatchObject([{ eventId: events[1]?.id }]);
    });

    it('one batch of actions: each recorded only while current, the v4 columns of the default group with it', async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup(fallback);
      const events = [await publish(store), await publish(store), await publish(store)];
      const claimed = (await claim(store, group)).claimed;
      expect(claimed).toHaveLength(3);
      const [a, b, c] = claimed as [(typeof claimed)[0], (typeof claimed)[0], (typeof claimed)[0]];
      const results = await store.ledger().apply([
        { kind: 'outcome', delivery: a.delivery, outcome: 'success' },
        { kind: 'outcome', delivery: b.delivery, outcome: 'failed', error: 'Überweisung fehlgeschlagen 💥' },
        { kind: 'release', delivery: c.delivery },
        { kind: 'outcome', delivery: a.delivery, outcome: 'failed' },
        { kind: 'outcome', delivery: 'nothing-like-it', outcome: 'success' },
      ]);
      expect(results.map((result) => (result instanceof Error ? result : result?.eventId))).toEqual([events[0]?.id, events[1]?.id, events[2]?.id, undefined, undefined]);
      // v4's claim of the released one is free again for a v4 spoke.
      expect(await store.claimForConsumer(events[2]?.id as string, 'spoke')).toBe(true);
      const [fate] = await store.catalog.fates('orders', events[1]?.pid as string, [events[1]?.id as string]);
      expect(fate?.deliveries?.[0]).toMatchObject({ outcome: 'failed', lastError: 'Überweisung fehlgeschlagen 💥' });
    });

    it('an ordered group has at most one unsettled delivery per pid, in position order; a retried one keeps its place', async () => {
      const store = await open();
      const group = await store.ledger().ensureGroup(named, { ordered: true });
      expect(group.ordered).toBe(true);
      const a1 = await publish(store, 'created', 'a');
      const a2 = await publish(store, 'created', 'a');
      const b1 = await publish(store, 'created', 'b');
      const b2 = await publish(store, 'created', 'b');
      const now = Date.now();
      const first = await claim(store, group, { now });
      expect(ids(first)).toEqual([a1.id, b1.id]);
      expect(ids(await claim(store, group, { now }))).toEqual([]);
      const [da1, db1] = first.claimed;
      await store.ledger().apply([
        { kind: 'outcome', delivery: da1?.delivery as string, outcome: 'success' },
        { kind: 'release', delivery: db1?.delivery as string, availableAt: now + 5_000, error: 'later' },
      ]);
      expect(ids(await claim(store, group, { now }))).toEqual([a2.id]);
      // b1 waits for its retry: b2 stays behind it.
      expect(ids(await claim(store, group, { now: now + 5_000 }))).toEqual([b1.id]);
      expect((await store.ledger().ensureGroup(named, { ordered: false })).ordered).toBe(false);
      expect(ids(await claim(store, group, { now: now + 5_000 }))).toEqual([b2.id]);
      expect((await store.ledger().ensureGroup(named)).ordered).toBe(false);
    });

    it('a group made ordered keeps per-pid order over the rows written while it (or, for the default groups, every group of the ledger) was not', async () => {
      const store = await open();
      const domainWide: GroupKey = { domain: 'orders', name: '*', group: '' };
      const group = await store.ledger().ensureGroup(named);
      const wide = await store.ledger().ensureGroup(domainWide);
      await store.ledger().ensureGroup(fallback);
      const a1 = await publish(store, 'created', 'a');
      const a2 = await publish(store, 'created', 'a');
      const a3 = await publish(store, 'created', 'a');
      const now = Date.now();
      // Unordered: the rows of all three are written, one is taken.
      expect(ids(await claim(store, group, { now, limit: 1 }))).toEqual([a1.id]);
      expect(ids(await claim(store, wide, { now, limit: 1 }))).toEqual([a1.id]);
      const ordered = await store.ledger().ensureGroup(named, { ordered: true });
      expect(ids(await claim(store, ordered, { now }))).toEqual([]);
      // The default groups share one ledger: an ordered one of a name orders the rows the domain's wrote.
      const byName = await store.ledger().ensureGroup(fallback, { ordered: true });
      expect(ids(await claim(store, byName, { now }))).toEqual([]);
      expect(ids(await claim(store, byName, { now: now + 20_000 }))).toEqual([a1.id]);
      expect(ids(await claim(store, ordered, { now: now + 20_000 }))).toEqual([a1.id]);
      void a2;
      void a3;
    });

    it('a row out of attempts becomes a dead letter at its claim; dead letters carry the last error, list newest first, and are requeued or discarded only in their own domain', async () => {
      const store = await open();
      const billing = await store.ledger().ensureGroup(named);
      const v4 = await store.ledger().ensureGroup(fallback);
      const event = await publish(store);
      const now = Date.now();
      const [lost] = (await claim(store, billing, { now })).claimed;
      await store.ledger().apply([{ kind: 'release', delivery: lost?.delivery as string, error: 'card declined' }]);
      const spent = await claim(store, billing, { now, maxAttempts: 1 });
      expect(spent.claimed).toEqual([]);
      expect(spent.dead).toMatchObject([{ event: { id: event.id }, attempts: 1, lastError: 'card declined' }]);
      const [v4Delivery] = (await claim(store, v4, { now })).claimed;
      await store.ledger().apply([{ kind: 'dead', delivery: v4Delivery?.delivery as string, error: 'Zahlung 🚫 abgelehnt' }]);
      const letters = await store.ledger().deadLetters({ domain: 'orders', limit: 10, offset: 0 });
      expect(letters).toHaveLength(2);
      expect(letters.find((letter) => letter.group === 'billing')).toMatchObject({ eventId: event.id, attempts: 1, lastError: 'card declined', consumes: 'created' });
      expect(await store.ledger().deadLetters({ domain: 'nothing', limit: 10, offset: 0 })).toEqual([]);
      expect(await store.deadLetters()).toMatchObject([{ eventId: event.id, attempts: 1, reason: 'Zahlung 🚫 abgelehnt' }]);
      const summary = (await store.ledger().groups(Date.now())).find((group) => group.group === 'billing');
      expect(summary).toMatchObject({ deadLetters: 1, pending: 0 });
      // Another domain's key names the same event and group: refused, as an unknown one.
      expect(await store.ledger().requeue({ ...named, domain: 'payroll' }, event.id)).toBe(false);
      expect(await store.ledger().discard({ ...fallback, domain: 'payroll' }, event.id)).toBe(false);
      expect(await store.ledger().requeue(named, event.id)).toBe(true);
      expect(await store.ledger().requeue(named, event.id)).toBe(false);
      expect((await claim(store, billing)).claimed[0]).toMatchObject({ attempt: 1 });
      expect(await store.ledger().discard(fallback, event.id)).toBe(true);
      expect(await store.deadLetters()).toEqual([]);
      expect(await store.ledger().deadLetters({ limit: 10, offset: 0 })).toEqual([]);
    });

    it('counts: pending (rows written or not yet), in flight, redelivered, dead letters, the oldest pending', async () => {
      const store = await open();
      const billing = await store.ledger().ensureGroup(named);
      await store.ledger().ensureGroup({ domain: 'orders', name: '*', group: 'audit' });
      const first = await publish(store);
      await publish(store);
      await publish(store, 'other');
      const now = Date.now();
      const [leased] = (await claim(store, billing, { now, limit: 1 })).claimed;
      await store.ledger().apply([{ kind: 'release', delivery: leased?.delivery as string }]);
      await claim(store, billing, { now, limit: 1 });
      const summaries = await store.ledger().groups(now);
      expect(summaries.find((group) => group.group === 'billing')).toMatchObject({ pending: 1, inFlight: 1, redelivered: 1, deadLetters: 0, oldestPendingAt: first.timestamp });
      // No claim yet: its rows are not written, its backlog is counted all the same.
      expect(summaries.find((group) => group.group === 'audit')).toMatchObject({ pending: 3, inFlight: 0, oldestPendingAt: first.timestamp });
      expect((await store.ledger().groups(now, ['nothing'])).length).toBe(0);
    });

    it("counts stay right while the watermark in the group's row lags the claims' own (written at most once a second)", async () => {
      const store = await open();
      const billing = await store.ledger().ensureGroup(named);
      const first = await publish(store);
      await publish(store);
      const now = Date.now();
      expect((await claim(store, billing, { now, limit: 2 })).claimed).toHaveLength(2);
      const third = await publish(store);
      await publish(store);
      await publish(store);
      // Within the second: this claim's watermark is the ledger's, not yet its row's.
      expect((await claim(store, billing, { now: now + 1, limit: 1 })).claimed.map((one) => one.event.id)).toEqual([third.id]);
      expect((await store.ledger().groups(now + 2)).find((group) => group.group === 'billing')).toMatchObject({ pending: 2, inFlight: 3, oldestPendingAt: first.timestamp });
      await publish(store);
      await publish(store);
      expect(await store.ledger().groups(now + 3, ['orders'])).toMatchObject([{ group: 'billing', pending: 4, inFlight: 3, oldestPendingAt: first.timestamp }]);
    });

    it("groups by token patterns: only the matching domains' groups are read, a pattern's LIKE and GLOB characters taken literally", async () => {
      const store = await open();
      for (const domain of ['orders', 'orders-eu', 'order_s', 'ordersX', 'shop']) await store.ledger().ensureGroup({ domain, name: 'created', group: 'billing' });
      const listed = async (patterns: string[]) => (await store.ledger().groups(Date.now(), undefined, patterns)).map((group) => group.domain);
      expect(await listed(['orders-*'])).toEqual(['orders-eu']);
      expect(await listed(['orders', 'shop'])).toEqual(['orders', 'shop']);
      // `_` is one character in LIKE, `?` one in GLOB: in a token pattern each is itself.
      expect(await listed(['order_s'])).toEqual(['order_s']);
      expect(await listed(['orders?'])).toEqual([]);
      expect(await listed([])).toEqual([]);
      expect(await store.ledger().groups(Date.now(), ['orders', 'shop'], ['sh*'])).toMatchObject([{ domain: 'shop' }]);
    });
  });
}
