/**
 * GroupCommit's turn: a writer that releases its batch (the MySQL store, as it sends COMMIT) lets the
 * next batch start while it commits; one that never releases (SQLite) sees one batch at a time; and
 * batches are answered in the order they were cut, whichever write returns first.
 */
import { describe, expect, it } from 'vitest';
import { GroupCommit, SPLIT_FROM, type BatchTurn } from '../src/store/group-commit.js';
import type { AppendOutcome, AppendRequest } from '../src/store/store.js';

interface Write {
  requests: readonly AppendRequest[];
  turn: BatchTurn;
  finish(): void;
}

/** A writer whose batches finish when the test says; `writes` lists them in the order they started. */
function controlledWriter(): { writes: Write[]; write: (requests: readonly AppendRequest[], turn: BatchTurn) => Promise<AppendOutcome[]> } {
  const writes: Write[] = [];
  const write = (requests: readonly AppendRequest[], turn: BatchTurn): Promise<AppendOutcome[]> =>
    new Promise((resolve) => {
      const outcomes = requests.map((request, i): AppendOutcome => ({
        ok: true,
        result: { event: { ...request.event, id: request.event.id ?? `e${i}`, rid: null, timestamp: '', position: 0 }, created: true },
      }));
      writes.push({ requests, turn, finish: () => resolve(outcomes) });
    });
  return { writes, write };
}

const event = (pid: string) => ({ id: pid, domain: 'd', name: 'n', pid, data: {} });
/** Lets setImmediate callbacks (the batch cut) and promise reactions run. */
const turnOfTheLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('GroupCommit turns', () => {
  it('starts no second batch until the first releases, and one then, with what arrived meanwhile', async () => {
    const { writes, write } = controlledWriter();
    const group = new GroupCommit(write);
    const answered: string[] = [];
    const append = (pid: string) => group.append(event(pid), undefined).then(({ event }) => void answered.push(event.pid));
    const first = [append('a1'), append('a2')];
    await turnOfTheLoop();
    const second = [append('b1'), append('b2')];
    await turnOfTheLoop();
    expect(writes.map((w) => w.requests.length)).toEqual([2]);

    writes[0]?.turn.release();
    await turnOfTheLoop();
    expect(writes.map((w) => w.requests.map((r) => r.event.pid))).toEqual([['a1', 'a2'], ['b1', 'b2']]);
    const third = append('c1');
    await turnOfTheLoop();
    // The second batch has not released: the third waits although the first is still writing too.
    expect(writes).toHaveLength(2);

    // The second batch's write returns first; its appends are still answered after the first batch's.
    writes[1]?.finish();
    await turnOfTheLoop();
    expect(answered).toEqual([]);
    writes[0]?.finish();
    await Promise.all([...first, ...second]);
    expect(answered).toEqual(['a1', 'a2', 'b1', 'b2']);

    await turnOfTheLoop();
    expect(writes).toHaveLength(3);
    writes[2]?.finish();
    await third;
    await group.idle();
  });

  it('with overlap, splits a large queue cut while nothing is written, so that its second half overlaps the first', async () => {
    const { writes, write } = controlledWriter();
    const group = new GroupCommit(write, { overlap: true });
    const window = Array.from({ length: SPLIT_FROM * 2 }, (_, i) => group.append(event(`w${i}`), undefined));
    await turnOfTheLoop();
    expect(writes.map((w) => w.requests.length)).toEqual([SPLIT_FROM]);
    writes[0]?.turn.release();
    await turnOfTheLoop();
    // The second half was cut while the first is still writing: whole, even though it is as long.
    expect(writes.map((w) => w.requests.length)).toEqual([SPLIT_FROM, SPLIT_FROM]);
    for (const w of writes) w.finish();
    await Promise.all(window);

    // A short queue is not split.
    const few = Array.from({ length: SPLIT_FROM - 1 }, (_, i) => group.append(event(`f${i}`), undefined));
    await turnOfTheLoop();
    expect(writes.slice(2).map((w) => w.requests.length)).toEqual([SPLIT_FROM - 1]);
    writes[2]?.finish();
    await Promise.all(few);
  });

  it('writes one batch at a time for a writer that never releases', async () => {
    const { writes, write } = controlledWriter();
    // Without overlap (SQLite) a long queue stays one batch too.
    const group = new GroupCommit(write);
    const first = Promise.all(Array.from({ length: SPLIT_FROM * 2 }, (_, i) => group.append(event(`a${i}`), undefined)));
    await turnOfTheLoop();
    const second = group.append(event('b'), undefined);
    await turnOfTheLoop();
    expect(writes.map((w) => w.requests.length)).toEqual([SPLIT_FROM * 2]);
    writes[0]?.finish();
    await first;
    await turnOfTheLoop();
    expect(writes).toHaveLength(2);
    let idle = false;
    void group.idle().then(() => (idle = true));
    await turnOfTheLoop();
    expect(idle).toBe(false);
    writes[1]?.finish();
    await second;
    await group.idle();
  });
});
