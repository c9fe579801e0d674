/**
 * Trace context and delivery timings every EventStore must keep (part of the store suite,
 * store-suite.ts): an event's W3C traceparent/tracestate stored with it and returned by every read
 * (the ledger's claims too, so that deliveries carry it); a retry with another context is the same
 * event; the ledger records when each delivery began and ended (the console's timeline).
 */
import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '@eventflow/core';
import type { EventStore, NewEvent } from '../src/store/store.js';

let counter = 0;
const event = (overrides: Partial<NewEvent> = {}): NewEvent => ({ id: `trace-${++counter}`, domain: 'orders', name: 'created', pid: 'p1', data: { n: counter }, ...overrides });
const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const tracestate = 'vendor=abc,other=x:y';

export function describeTraceContext(open: () => Promise<EventStore>): void {
  describe('trace context', () => {
    it('keeps an event\'s traceparent and tracestate and returns them on every read; events without have none', async () => {
      const store = await open();
      const { event: traced } = await store.append(event({ traceparent, tracestate }), { publisher: 'g' });
      const { event: plain } = await store.append(event(), { publisher: 'g' });
      const { event: parentOnly } = await store.append(event({ traceparent }), { publisher: 'g' });
      expect(traced).toMatchObject({ traceparent, tracestate });
      expect(parentOnly).toMatchObject({ traceparent });
      expect('tracestate' in parentOnly).toBe(false);
      expect('traceparent' in plain || 'tracestate' in plain).toBe(false);
      const reads: StoredEvent[][] = [
        [(await store.read(traced.id)) as StoredEvent, (await store.read(plain.id)) as StoredEvent, (await store.read(parentOnly.id)) as StoredEvent],
        await store.readEventlog('orders', 'p1'),
        await store.readPublishedAfter({ domain: 'orders', name: 'created' }, 0, 10),
        await store.readPublishedSince(0, 10),
        await store.readEventlogFilteredByNames('orders', 'p1', ['created']),
        await store.catalog.eventlogPage('orders', 'p1', 0, 10),
      ];
      for (const read of reads) expect(read).toEqual([traced, plain, parentOnly]);
    });

    it('a retry with another trace context is the same event, with the context it was stored with', async () => {
      const store = await open();
      const first = event({ traceparent });
      const { event: stored } = await store.append(first, { publisher: 'g' });
      const retried = await store.append({ ...first, traceparent: '00-11111111111111111111111111111111-2222222222222222-00', tracestate }, { publisher: 'g' });
      expect(retried.created).toBe(false);
      expect(retried.event).toEqual(stored);
      const [outcome] = await store.appendBatch([{ event: { ...first, traceparent: undefined } }]);
      expect(outcome).toMatchObject({ ok: true, result: { created: false, event: stored } });
    });

    it('a scheduled event keeps its trace context when it fires', async () => {
      const store = await open();
      const { event: scheduled } = await store.append(event({ traceparent, tracestate }), { publisher: 'g', scheduledAt: new Date(Date.now() - 1) });
      const [fired] = await store.claimDueScheduled(new Date());
      expect(fired).toMatchObject({ id: scheduled.id, traceparent, tracestate });
      expect(await store.read(scheduled.id)).toMatchObject({ traceparent, tracestate });
    });

    it('a claim hands out the events with their trace context, and the ledger records when each delivery began and ended', async () => {
      const store = await open();
      const ledger = store.ledger();
      const group = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: 'billing' });
      const { event: traced } = await store.append(event({ traceparent, tracestate, pid: 'p9' }), { publisher: 'g' });
      const { event: plain } = await store.append(event({ pid: 'p9' }), { publisher: 'g' });
      const claimedAt = Date.now();
      const claim = await ledger.claim({ group, owner: 'gw', consumer: 'GW', secret: 's', deadline: claimedAt + 10_000, now: claimedAt, limit: 10, maxAttempts: 5 });
      expect(claim.claimed.map((claimed) => claimed.event)).toEqual([traced, plain]);
      const before = await store.catalog.fates('orders', 'p9', [traced.id, plain.id]);
      expect(before.map((fate) => fate.deliveries)).toEqual([
        [{ group: 'billing', name: 'created', attempts: 1, claimedAt: new Date(claimedAt).toISOString() }],
        [{ group: 'billing', name: 'created', attempts: 1, claimedAt: new Date(claimedAt).toISOString() }],
      ]);
      const [first] = claim.claimed;
      const settling = Date.now();
      await ledger.apply([{ kind: 'outcome', delivery: first?.delivery as string, outcome: 'success' }]);
      const settled = Date.now();
      const after = await store.catalog.fates('orders', 'p9', [traced.id]);
      const delivery = after[0]?.deliveries?.[0];
      expect(delivery).toMatchObject({ outcome: 'success', claimedAt: new Date(claimedAt).toISOString() });
      const settledAt = Date.parse(delivery?.settledAt ?? '');
      expect(settledAt).toBeGreaterThanOrEqual(settling);
      expect(settledAt).toBeLessThanOrEqual(settled);
      // The latency view's rows: settled deliveries of the name in a window of settle times, newest first.
      const rows = await store.catalog.settledDeliveries({ domain: 'orders', name: 'created', from: settling, to: settled + 1, limit: 10 });
      expect(rows).toEqual([{ eventId: traced.id, pid: 'p9', group: 'billing', outcome: 'success', attempts: 1, storedAt: Date.parse(traced.timestamp), claimedAt, settledAt }]);
      expect(await store.catalog.settledDeliveries({ domain: 'orders', name: 'created', group: '', from: settling, to: settled + 1, limit: 10 })).toEqual([]);
      expect(await store.catalog.settledDeliveries({ domain: 'orders', name: 'created', from: settled + 1, to: settled + 1000, limit: 10 })).toEqual([]);
    });
  });
}
