/**
 * Consumers by the thousand: a connection may hold EVENTFLOW_MAX_SUBSCRIPTIONS consumers and a
 * gateway thousands of connections, all of them members of one group if they like. Registering,
 * finding and removing a connection's consumers must not walk everyone else's, and a group's claim
 * must not fail however many members it has.
 */
import { describe, expect, it } from 'vitest';
import { Backlog } from '../src/delivery/backlog.js';
import { Consumers, type ConsumerRef } from '../src/delivery/consumers.js';
import { Interest } from '../src/delivery/interest.js';
import type { Leases } from '../src/delivery/leases.js';
import type { Peer } from '../src/delivery/peer.js';
import type { Logger } from '../src/log.js';
import type { ClaimRequest, ClaimResult, DeliveryLedger, GroupRecord } from '../src/store/ledger.js';

const key = { domain: 'orders', name: 'created', group: 'billing' };
const record: GroupRecord = { ...key, ordered: false, createdPosition: 0, createdAt: new Date(0).toISOString() };
/** Peers × consumers each: past 150,000 members a spread of them as arguments overflows the stack. */
const PEERS = 250;
const EACH = 1_000;

function fill(consumers: Consumers): Peer[] {
  const peers = Array.from({ length: PEERS }, (_, i) => ({ id: `peer-${i}` }) as Peer);
  for (const peer of peers) {
    for (let c = 0; c < EACH; c++) consumers.add(peer, `c${c}`, key.domain, key.name, { group: key.group, concurrency: 0, retry: undefined });
  }
  return peers;
}

describe('250,000 members of one group', () => {
  it('are registered, found and removed by their connection, without walking the others (each a lookup: the whole test in seconds, not hours)', { timeout: 30_000 }, () => {
    const consumers = new Consumers(new Interest({ setInterest: () => undefined }));
    const peers = fill(consumers);
    expect(consumers.count).toBe(PEERS * EACH);
    const [first, second] = peers as [Peer, Peer];
    expect(consumers.find(second, 'c7')).toMatchObject({ peer: second, handle: 'c7' });
    expect(consumers.find(second, 'c-none')).toBeUndefined();
    // The same handle registered again by its connection: the same member, with the new credit.
    const again = consumers.add(second, 'c7', key.domain, key.name, { group: key.group, concurrency: 3, retry: undefined });
    expect(again).toBe(consumers.find(second, 'c7'));
    expect(consumers.count).toBe(PEERS * EACH);
    // …for another group: it leaves the first.
    consumers.add(second, 'c8', key.domain, key.name, { group: 'other', concurrency: 1, retry: undefined });
    expect(consumers.members(key)).toHaveLength(PEERS * EACH - 1);
    expect(consumers.find(second, 'c8')?.group).toBe('other');
    expect(consumers.remove(first, 'c1')?.handle).toBe('c1');
    expect(consumers.remove(first, 'c1')).toBeUndefined();
    const gone = consumers.removePeer(second);
    expect(gone).toHaveLength(EACH);
    expect(gone.every((consumer) => consumer.peer === second)).toBe(true);
    expect(consumers.ofPeer(second)).toEqual([]);
    expect(consumers.ofPeer(first)).toHaveLength(EACH - 1);
    expect(consumers.count).toBe((PEERS - 1) * EACH - 1);
    expect(consumers.members(key)).toHaveLength((PEERS - 1) * EACH - 1);
  });

  it("claim with the most lenient member's attempts (a spread of the members as arguments overflowed the stack: no claim, ever)", async () => {
    const claims: ClaimRequest[] = [];
    const ledger = {
      ensureGroup: async () => record,
      claim: (request: ClaimRequest) => (claims.push(request), new Promise<ClaimResult>(() => undefined)),
    } as unknown as DeliveryLedger;
    const consumers = new Consumers(new Interest({ setInterest: () => undefined }));
    const peers = fill(consumers);
    // One member with credit and a lenient retry policy among the paused ones.
    const lenient = consumers.add(peers[0]!, 'worker', key.domain, key.name, { group: key.group, concurrency: 4, retry: { attempts: 9, backoff: 'fixed', delayMs: 0, maxDelayMs: 0 } });
    const errors: unknown[] = [];
    const leases = {
      owner: 'gw',
      consumerId: 'GW',
      leaseMs: 10_000,
      maxAttempts: (member: ConsumerRef | undefined) => member?.retry?.attempts ?? 5,
      held: () => [],
      now: () => Date.now(),
    } as unknown as Leases;
    const log = { error: (_message: string, fields: { error: unknown }) => void errors.push(fields.error) } as unknown as Logger;
    const backlog = new Backlog(() => ledger, consumers, leases, log, () => undefined);
    await backlog.join(lenient, {});
    await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toEqual([]);
    expect(claims).toHaveLength(1);
    expect(claims[0]).toMatchObject({ limit: 4, maxAttempts: 9 });
  });
});
