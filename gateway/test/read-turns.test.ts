/**
 * The gateway's turns for replay reads (connection/read-turns.ts): one read handed out per turn of
 * the event loop, round-robin over connections (not over replays), at most `atOnce` in flight.
 */
import { describe, expect, it } from 'vitest';
import { ReadTurns } from '../src/connection/read-turns.js';

describe('ReadTurns', () => {
  it('hands out turns round-robin over owners, so that an owner with many reads waiting gets the share of one with one', async () => {
    const turns = new ReadTurns(1);
    const a = {};
    const b = {};
    const order: string[] = [];
    const read = async (owner: object, name: string): Promise<void> => {
      const done = await turns.take(owner);
      order.push(name);
      done();
    };
    await Promise.all([read(a, 'a1'), read(a, 'a2'), read(a, 'a3'), read(b, 'b1'), read(b, 'b2')]);
    expect(order).toEqual(['a1', 'b1', 'a2', 'b2', 'a3']);
  });

  it('never hands out a turn in the turn it was asked for, and holds the next one until a read in flight is done', async () => {
    const turns = new ReadTurns(1);
    let granted = false;
    const first = turns.take({}).then((done) => {
      granted = true;
      return done;
    });
    await Promise.resolve();
    expect(granted).toBe(false);
    const done = await first;
    let second = false;
    const next = turns.take({}).then((release) => {
      second = true;
      release();
    });
    // Several turns of the event loop pass: the turn stays held.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(second).toBe(false);
    done();
    done(); // twice: counted once
    await next;
    expect(second).toBe(true);
  });
});
