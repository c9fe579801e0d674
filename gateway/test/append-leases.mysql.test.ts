import { describe, expect, it } from 'vitest';
import type { AppendClaimer, Claimed, GroupRecord } from '../src/store/ledger.js';
import type { MysqlStore } from '../src/store/mysql/mysql.js';
import { newEvent } from './store-suite.js';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { storeOpener } from './mysql-stores.js';

/** What the store told a claimer: per committed batch the leases handed over and how many it asked for; per rolled back one how many. */
interface Told {
  committed: Array<{ ids: string[]; given: number }>;
  claimed: Claimed[];
  abandoned: number[];
}

/** A claimer (store/ledger.ts AppendClaimer) with `credit.left` leases to give, as v4 consumer `APPEND`. */
function claimerWith(credit: { left: number }): { claimer: AppendClaimer; told: Told } {
  const told: Told = { committed: [], claimed: [], abandoned: [] };
  const claimer: AppendClaimer = {
    lease: () => (credit.left-- > 0 ? { owner: 'gw', consumer: 'APPEND', deadline: Date.now() + 10_000, now: Date.now() } : undefined),
    committed: (claimed, given) => {
      told.committed.push({ ids: claimed.map((c) => c.event.id), given });
      told.claimed.push(...claimed);
    },
    abandoned: (given) => void told.abandoned.push(given),
  };
  return { claimer, told };
}

describe.skipIf(mysqlUnavailable !== undefined)('MySQL leases at append', () => {
  const databases = useTestDatabases();
  const open = storeOpener(databases);
  const claimOn = (store: MysqlStore, group: GroupRecord) => async (): Promise<string[]> => {
    const now = Date.now();
    const result = await store.ledger().claim({ group, owner: 'gw', consumer: 'CLAIM', secret: 's', deadline: now + 10_000, now, limit: 10, maxAttempts: 5 });
    return result.claimed.map((c) => c.event.id);
  };

  it("leases a waiting group's new events in their append, in position order and up to what it takes; the rest wait for a claim", async () => {
    const db = await databases.fresh();
    const store = await open(db);
    const ledger = store.ledger();
    const group = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: '' });
    const claim = claimOn(store, group);
    const publish = (name = 'created') => store.append(newEvent({ name }), { publisher: 's' });
    const { claimer, told } = claimerWith({ left: 2 });
    expect(await claim()).toEqual([]);
    // Appended after the claim read the head: the next batch writes its row first (free), then leases its own.
    const unseen = await publish();
    ledger.claimAtAppend?.(group, claimer);
    const batch = await Promise.all([publish(), publish('other'), publish(), publish()]);
    const [first, other, second, third] = batch.map((appended) => appended.event.id) as [string, string, string, string];
    expect(told.committed).toEqual([{ ids: [first, second], given: 2 }]);
    // Leased once: a claim takes only the free ones, in position order.
    expect(await claim()).toEqual([unseen.event.id, third]);
    // The default group's lease is v4's claim: written with the append for the leased ones, by the claim for the rest.
    const claims = await db.query<{ event_id: string; consumer: string | null; spoke: number | string }>(
      `SELECT event_id, consumer, consumed_spoke IS NOT NULL AS spoke FROM event_published WHERE event_id IN (?, ?, ?, ?, ?)`,
      [unseen.event.id, first, other, second, third],
    );
    expect(Object.fromEntries(claims.map((row) => [row.event_id, `${row.consumer ?? '-'} ${Number(row.spoke)}`]))).toEqual({
      [unseen.event.id]: 'CLAIM 1',
      [first]: 'APPEND 1',
      [other]: '- 0',
      [second]: 'APPEND 1',
      [third]: 'CLAIM 1',
    });
    // A lease taken at append settles by the delivery id handed over, as a claim's does.
    const [ended] = await ledger.apply([{ kind: 'outcome', delivery: told.claimed[0]!.delivery, outcome: 'success' }]);
    expect(ended).toMatchObject({ eventId: first, attempts: 1 });
    expect(await db.query(`SELECT success IS NOT NULL AS done FROM event_published WHERE event_id = ?`, [first])).toEqual([{ done: 1 }]);
    // Disarmed: appends are claimed as before.
    ledger.claimAtAppend?.(group, undefined);
    const later = await publish();
    expect(told.committed).toHaveLength(1);
    expect(await claim()).toEqual([later.event.id]);
  });

  it("writes the rows of another gateway's events first, and a batch rolled back gives its leases up", async () => {
    const db = await databases.fresh();
    const [store, peer] = [await open(db), await open(db)];
    const ledger = store.ledger();
    const group = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: 'billing' });
    const claim = claimOn(store, group);
    const credit = { left: 5 };
    const { claimer, told } = claimerWith(credit);
    expect(await claim()).toEqual([]);
    ledger.claimAtAppend?.(group, claimer);
    const theirs = await peer.append(newEvent(), { publisher: 's' });
    const event = newEvent();
    const stored = await store.append(event, { publisher: 's' });
    expect(told.committed).toEqual([{ ids: [stored.event.id], given: 1 }]);
    // A retried publish (an id stored already) rolls the first attempt back (which took it for new), leases and all; run
    // again, the batch leases its one new event.
    const [retried, fresh] = await Promise.all([store.append(event, { publisher: 's' }), store.append(newEvent(), { publisher: 's' })]);
    expect(retried.created).toBe(false);
    expect(told.abandoned).toEqual([2]);
    expect(told.committed.at(-1)).toEqual({ ids: [fresh.event.id], given: 1 });
    expect(credit.left).toBe(1);
    expect(await claim()).toEqual([theirs.event.id]);
  });

  it('gives two groups that lease one event each a delivery of its own', async () => {
    const db = await databases.fresh();
    const store = await open(db);
    const ledger = store.ledger();
    const told = await Promise.all(
      ['', 'billing'].map(async (name) => {
        const group = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: name });
        expect(await claimOn(store, group)()).toEqual([]);
        const { claimer, told } = claimerWith({ left: 1 });
        ledger.claimAtAppend?.(group, claimer);
        return told;
      }),
    );
    const stored = await store.append(newEvent(), { publisher: 's' });
    const [mine, theirs] = told.map(({ claimed }) => claimed[0]);
    expect([mine?.event.id, theirs?.event.id]).toEqual([stored.event.id, stored.event.id]);
    expect(mine?.delivery).not.toBe(theirs?.delivery);
    const ended = await ledger.apply([{ kind: 'outcome', delivery: mine!.delivery, outcome: 'success' }, { kind: 'outcome', delivery: theirs!.delivery, outcome: 'failed' }]);
    expect(ended.map((ref) => (ref instanceof Error ? ref : ref?.key.group))).toEqual(['', 'billing']);
  });

  it('leases nothing to an ordered group', async () => {
    const db = await databases.fresh();
    const store = await open(db);
    const ledger = store.ledger();
    const group = await ledger.ensureGroup({ domain: 'orders', name: 'created', group: 'billing' }, { ordered: true });
    const claim = claimOn(store, group);
    const { claimer, told } = claimerWith({ left: 5 });
    expect(await claim()).toEqual([]);
    ledger.claimAtAppend?.(group, claimer);
    const stored = await store.append(newEvent(), { publisher: 's' });
    expect(told.committed).toEqual([]);
    expect(await claim()).toEqual([stored.event.id]);
  });
});
