/**
 * State snapshots, written once and run against both stores: for random eventlogs, deletes and
 * snapshot intervals, readEventlogState (latest snapshot + the events after it) equals
 * composeEventlogState over the whole eventlog, key order included.
 */
import { describe, expect, it } from 'vitest';
import { composeEventlogState, type JsonObject, type JsonValue } from '@eventflow/core';
import { prng } from '@eventflow/test-support/prng';
import { readEventlogState, snapshotsOf } from '../src/store/snapshots.js';
import { openedStores } from './store-suite.js';
import type { EventStore } from '../src/store/store.js';

/** Random JSON objects that collide on few keys, switch types at a path, repeat array items and vary key order. */
export function randomData(random: () => number): JsonObject {
  const pick = <T,>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const keys = ['a', 'b', 'c', 'l', 'm', 'z', '10', '2'];
  const value = (depth: number): JsonValue => {
    const r = random();
    if (depth > 2 || r < 0.35) return pick<JsonValue>([0, 1, 2, 'x', 'y', true, false, null]);
    if (r < 0.6) return Array.from({ length: Math.floor(random() * 4) }, () => (random() < 0.15 ? object(depth + 1) : pick<JsonValue>([1, 2, 'x', 'x', null])));
    return object(depth + 1);
  };
  const object = (depth: number): JsonObject => {
    const out: JsonObject = {};
    for (let i = Math.floor(random() * 4); i > 0; i--) out[pick(keys)] = value(depth);
    return out;
  };
  return object(0);
}

/** Exact equality, key order included. */
export function expectSameState(actual: unknown, expected: unknown): void {
  expect(JSON.stringify(actual)).toBe(JSON.stringify(expected));
  expect(actual).toEqual(expected);
}

/** `create` returns a fresh, initialised store; closed after each test. */
export function describeSnapshots(name: string, create: () => Promise<EventStore>, rounds = 12): void {
  describe(`state snapshots: ${name}`, () => {
    const open = openedStores(create);

    it('answers from the latest snapshot plus the events after it, equal to the full fold for random logs, deletes and intervals', async () => {
      const store = await open();
      let used = 0;
      for (let seed = 1; seed <= rounds; seed++) {
        const random = prng(seed * 7919);
        const every = [1, 3, 10, 17, 40][seed % 5] as number;
        const pid = `p${seed}`;
        const ids: string[] = [];
        for (let step = 0; step < 60; step++) {
          const batch = Array.from({ length: 1 + Math.floor(random() * 12) }, (_, i) => {
            const id = `s${seed}-${step}-${i}`;
            ids.push(id);
            return { event: { id, domain: 'snap', name: 'updated', pid, data: randomData(random) }, options: { publisher: 'test' } };
          });
          await store.appendBatch(batch);
          const r = random();
          if (r < 0.12 && ids.length > 0) await store.delete(ids.splice(Math.floor(random() * ids.length), 1)[0] as string);
          else if (r < 0.14) {
            await store.deleteEventlog('snap', pid);
            ids.length = 0;
          }
          if (random() < 0.5) {
            const before = await snapshotsOf(store).readSnapshot('snap', pid);
            if (before.snapshot) used++;
            const read = await readEventlogState(snapshotsOf(store), 'snap', pid, { every });
            const log = await store.readEventlog('snap', pid);
            expectSameState(read.state, composeEventlogState(log));
            expect(read.count).toBe(log.length);
          }
        }
      }
      // The snapshot path was taken, not only the full fold.
      expect(used).toBeGreaterThan(rounds * 5);
    }, 120_000);

    it('keeps a snapshot on a chunk boundary, drops it when a covered event is deleted, and does not snapshot with every = 0', async () => {
      const store = await open();
      const append = (i: number, pid = 'p1') => store.append({ id: `b-${pid}-${i}`, domain: 'snap', name: 'n', pid, data: { [`k${i % 7}`]: [i % 3], last: i } });
      for (let i = 0; i < 25; i++) await append(i);
      await readEventlogState(snapshotsOf(store), 'snap', 'p1', { every: 5 });
      const first = await snapshotsOf(store).readSnapshot('snap', 'p1');
      expect(first.snapshot?.count).toBe(20);
      expect(first.events.map((event) => event.id)).toEqual([20, 21, 22, 23, 24].map((i) => `b-p1-${i}`));

      await store.delete('b-p1-3');
      const afterDelete = await snapshotsOf(store).readSnapshot('snap', 'p1');
      expect(afterDelete.snapshot).toBeUndefined();
      expect(afterDelete.events).toHaveLength(24);
      expectSameState((await readEventlogState(snapshotsOf(store), 'snap', 'p1', { every: 5 })).state, composeEventlogState(afterDelete.events));
      expect((await snapshotsOf(store).readSnapshot('snap', 'p1')).snapshot?.count).toBe(20);

      for (let i = 0; i < 30; i++) await append(i, 'p2');
      await readEventlogState(snapshotsOf(store), 'snap', 'p2', { every: 0 });
      expect((await snapshotsOf(store).readSnapshot('snap', 'p2')).snapshot).toBeUndefined();
    });
  });
}
