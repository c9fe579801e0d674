/**
 * Waits (delivery/waits.ts) on their own: a wait registered after a position is never answered by an
 * event at or below it, also when the domain's pump routes that event only after the registration
 * (its page read before). Against real gateways in mesh-v4-mix.test.ts, where that interleaving is a race.
 */
import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '@eventflow/core';
import { Waits } from '../src/delivery/waits.js';
import { Interest } from '../src/delivery/interest.js';
import type { Peer } from '../src/delivery/peer.js';

function peer(): Peer & { waited: Array<[string, string]> } {
  const waited: Array<[string, string]> = [];
  return { id: 'p', waited, sendEvent: () => undefined, sendDelivery: () => undefined, sendDeleted: () => undefined, sendWaited: (wait, event) => void waited.push([wait, event.id]) };
}

const event = (id: string, name: string, position: number): StoredEvent => ({ id, domain: 'jobs', name, pid: 'job-1', data: {}, timestamp: '', rid: null, position });

const waits = (): Waits => new Waits({ findOutcome: async () => undefined }, new Interest({ setInterest: () => undefined }));

describe('Waits', () => {
  it('a wait after a position is not answered by an event routed later but stored at or before it', async () => {
    const w = waits();
    const p = peer();
    await w.add(p, 'w1', 'jobs', 'job-1', ['success', 'failed'], 2);
    // The pump's page of the request (position 2), with a v4 spoke's earlier outcome ahead of it.
    expect(w.match(event('stale', 'failed', 1))).toBe(false);
    expect(w.match(event('request', 'failed', 2))).toBe(false);
    expect(p.waited).toEqual([]);
    expect(w.match(event('outcome', 'success', 3))).toBe(true);
    expect(p.waited).toEqual([['w1', 'outcome']]);
    expect(w.count).toBe(0);
  });

  it('a wait without a position is answered by the next routed event, whatever its position', async () => {
    const w = waits();
    const p = peer();
    await w.add(p, 'w1', 'jobs', 'job-1', ['success'], undefined);
    expect(w.match(event('outcome', 'success', 1))).toBe(true);
    expect(p.waited).toEqual([['w1', 'outcome']]);
  });
});
