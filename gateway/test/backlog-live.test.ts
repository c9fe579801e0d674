import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '@eventflow/core';
import { Backlog } from '../src/delivery/backlog.js';
import { Consumers, type ConsumerRef } from '../src/delivery/consumers.js';
import { Interest } from '../src/delivery/interest.js';
import type { Leases } from '../src/delivery/leases.js';
import type { Peer } from '../src/delivery/peer.js';
import type { Logger } from '../src/log.js';
import type { AppendClaimer, ClaimRequest, ClaimResult, DeliveryLedger, GroupRecord } from '../src/store/ledger.js';

const key = { domain: 'orders', name: 'created', group: 'billing' };
const record: GroupRecord = { ...key, ordered: false, createdPosition: 0, createdAt: new Date(0).toISOString() };
const event = (position: number): StoredEvent => ({ id: `e${position}`, domain: 'orders', name: 'created', pid: 'p', rid: null, data: {}, timestamp: new Date(0).toISOString(), position });
const short: ClaimResult = { claimed: [], dead: [], nextDue: undefined, missing: false };
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A backlog over a ledger whose claims the test answers, and one member with credit 4. */
function setUp() {
  const claims: Array<{ request: ClaimRequest; answer: (result: ClaimResult) => void }> = [];
  let claimer: AppendClaimer | undefined;
  const ledger = {
    ensureGroup: async () => record,
    claim: (request: ClaimRequest) => new Promise<ClaimResult>((answer) => claims.push({ request, answer })),
    claimAtAppend: (_group: GroupRecord, armed: AppendClaimer | undefined) => void (claimer = armed),
  } as unknown as DeliveryLedger;
  const consumers = new Consumers(new Interest({ setInterest: () => undefined }));
  const opened: string[] = [];
  const leases = {
    owner: 'gw',
    consumerId: 'GW',
    leaseMs: 10_000,
    maxAttempts: () => 5,
    supersede: () => undefined,
    held: () => [],
    now: () => Date.now(),
    open: (member: ConsumerRef, _key: unknown, claimed: { event: StoredEvent }) => {
      member.open += 1;
      opened.push(claimed.event.id);
      return true;
    },
    giveBack: async () => undefined,
    deadLettered: () => undefined,
  } as unknown as Leases;
  const log = { error: () => undefined } as unknown as Logger;
  const backlog = new Backlog(() => ledger, consumers, leases, log, () => undefined);
  const member = consumers.add({ id: 'peer' } as Peer, 'c1', 'orders', 'created', { group: 'billing', concurrency: 4, retry: undefined });
  return { backlog, member, claims, opened, claimer: () => claimer };
}

describe('Backlog: a group waiting for work', () => {
  it('claims only the events routed and not leased at their append, and appends go on leasing while that claim is under way', async () => {
    const { backlog, claims, opened, claimer } = setUp();
    await backlog.join(backlog.consumers.members(key)[0]!, {});
    await tick();
    expect(claims).toHaveLength(1);
    claims[0]!.answer(short);
    await tick();
    // Waiting for work: the store leases at append, and the route of an event so leased makes no claim.
    const armed = claimer()!;
    expect(armed.lease(event(1))).toBeDefined();
    armed.committed([{ event: event(1), delivery: 'd1', attempt: 1 }], 1, undefined);
    backlog.route(event(1));
    await tick();
    expect(claims).toHaveLength(1);
    expect(opened).toEqual(['e1']);
    // An event its append did not lease: a claim of one, and the next append still leases meanwhile.
    backlog.route(event(2));
    await tick();
    expect(claims.map((claim) => claim.request.limit)).toEqual([4, 1]);
    expect(armed.lease(event(3))).toBeDefined();
    armed.committed([{ event: event(3), delivery: 'd3', attempt: 1 }], 1, undefined);
    claims[1]!.answer({ ...short, claimed: [{ event: event(2), delivery: 'd2', attempt: 1 }] });
    backlog.route(event(3));
    await tick();
    expect(opened).toEqual(['e1', 'e3', 'e2']);
    // Credit used up (4 open): no lease.
    expect(armed.lease(event(4))).toBeDefined();
    armed.committed([{ event: event(4), delivery: 'd4', attempt: 1 }], 1, undefined);
    expect(armed.lease(event(5))).toBeUndefined();
    expect(claims).toHaveLength(2);
  });

  it('stops leasing at append once something other than a route may have made work (a release, the timer)', async () => {
    const { backlog, claims, claimer } = setUp();
    await backlog.join(backlog.consumers.members(key)[0]!, {});
    await tick();
    claims[0]!.answer(short);
    await tick();
    backlog.signalLedger(key);
    await tick();
    expect(claims.map((claim) => claim.request.limit)).toEqual([4, 4]);
    expect(claimer()!.lease(event(1))).toBeUndefined();
    claims[1]!.answer(short);
    await tick();
    expect(claimer()!.lease(event(1))).toBeDefined();
  });

  it('does not lease at append for a group whose members left while its claim was under way', async () => {
    const { backlog, member, claims, claimer } = setUp();
    await backlog.join(member, {});
    await tick();
    backlog.consumers.remove(member.peer, member.handle);
    backlog.left(key);
    await tick();
    claims[0]!.answer(short);
    await tick();
    expect(claimer()).toBeUndefined();
  });
});

describe('Backlog: credit freed by a batch of settles', () => {
  it('makes one claim for the credit a whole batch freed, not a claim of one for the first settle of it', async () => {
    const { backlog, member, claims, opened } = setUp();
    await backlog.join(member, {});
    await tick();
    const full = [1, 2, 3, 4].map((position) => ({ event: event(position), delivery: `d${position}`, attempt: 1 }));
    claims[0]!.answer({ ...short, claimed: full });
    await tick();
    expect(opened).toHaveLength(4);
    // The ledger writer answers a batch's settles in one turn: each ends its delivery (credit back) in turn.
    for (let i = 0; i < 4; i++) {
      member.open -= 1;
      backlog.ended(member, key, 'settled');
    }
    await tick();
    expect(claims.map((claim) => claim.request.limit)).toEqual([4, 4]);
  });
});
