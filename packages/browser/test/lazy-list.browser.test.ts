import { describe, expect, it } from 'vitest';
import { concat, lazyList } from '../src/lazy-list.js';

type Item = { i: number };

/** A lazy list of `length` items `{ i }` and the indexes it made, in order. */
function counted(length: number): { list: Item[]; made: number[]; plain: Item[] } {
  const made: number[] = [];
  const list = lazyList(length, (i) => (made.push(i), { i }));
  return { list, made, plain: Array.from({ length }, (_, i) => ({ i })) };
}

describe('lazyList', () => {
  it('makes an item only when it is first used, once', () => {
    const { list, made } = counted(1000);
    expect(Array.isArray(list)).toBe(true);
    expect(list.length).toBe(1000);
    expect(made).toEqual([]);
    expect(list[3]).toEqual({ i: 3 });
    expect(list[3]).toBe(list[3]);
    expect(list.at(-1)).toEqual({ i: 999 });
    expect(list.slice(10, 12)).toEqual([{ i: 10 }, { i: 11 }]);
    for (const item of list) if (item.i === 1) break;
    expect(made).toEqual([3, 999, 10, 11, 0, 1]);
    expect(list[1000]).toBeUndefined();
    expect(list[-1 as number]).toBeUndefined();
    expect((list as unknown as Record<string, unknown>)['1.5']).toBeUndefined();
    expect(made).toHaveLength(6);
  });

  it('behaves like the array it stands for', () => {
    const { list, plain } = counted(7);
    expect(list).toEqual(plain);
    expect(JSON.stringify(list)).toBe(JSON.stringify(plain));
    expect([...list]).toEqual(plain);
    expect(Array.from(list)).toEqual(plain);
    expect(list.map((item) => item.i)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(list.filter((item) => item.i % 2)).toEqual([{ i: 1 }, { i: 3 }, { i: 5 }]);
    expect(list.reduce((sum, item) => sum + item.i, 0)).toBe(21);
    expect(list.findLast((item) => item.i < 3)).toEqual({ i: 2 });
    expect(list.indexOf(list[4]!)).toBe(4);
    expect(list.includes(list[6]!)).toBe(true);
    expect([[] as Item[]].concat(list)).toHaveLength(8);
    expect(list.concat([{ i: 7 }])).toEqual([...plain, { i: 7 }]);
    expect(2 in list && !(7 in list)).toBe(true);
    expect(Object.keys(list)).toEqual(['0', '1', '2', '3', '4', '5', '6']);
    expect(Object.prototype.toString.call(list)).toBe('[object Array]');
    const forIn: string[] = [];
    for (const key in list) forIn.push(key);
    expect(forIn).toHaveLength(7);
  });

  it('can be changed like an array (every item is made first)', () => {
    const { list, made } = counted(5);
    list.reverse();
    expect(made).toHaveLength(5);
    expect(list.map((item) => item.i)).toEqual([4, 3, 2, 1, 0]);
    list.push({ i: 9 });
    expect([...list].map((item) => item.i)).toEqual([4, 3, 2, 1, 0, 9]);
    list.sort((a, b) => a.i - b.i);
    expect(list.map((item) => item.i)).toEqual([0, 1, 2, 3, 4, 9]);
    list.length = 2;
    expect(list).toEqual([{ i: 0 }, { i: 1 }]);
    expect(list[3]).toBeUndefined(); // not made again
    expect(made).toHaveLength(5);
    expect(Object.isFrozen(Object.freeze(counted(3).list))).toBe(true);
  });

  it('lets a failing item fail every read of it, and no other', () => {
    const list = lazyList(3, (i) => {
      if (i === 2) throw new SyntaxError('unparsable');
      return { i };
    });
    expect(list[0]).toEqual({ i: 0 });
    expect(() => list[2]).toThrow(SyntaxError);
    expect(() => list[2]).toThrow(SyntaxError);
    expect(() => JSON.stringify(list)).toThrow(SyntaxError);
    expect(list.slice(0, 2)).toEqual([{ i: 0 }, { i: 1 }]);
  });

  it('needs a copy for structuredClone (a Proxy cannot be cloned)', () => {
    const { list, plain } = counted(3);
    expect(() => structuredClone(list)).toThrow();
    expect(structuredClone([...list])).toEqual(plain);
  });
});

describe('concat', () => {
  it('joins two lists, or a prefix of them, reading them only when used', () => {
    const a = counted(3);
    const b: Item[] = [{ i: 3 }, { i: 4 }];
    const joined = concat(a.list, b);
    expect(joined).toHaveLength(5);
    expect(joined[4]).toBe(b[1]);
    expect(a.made).toEqual([]);
    expect(joined[1]).toBe(a.list[1]);
    expect(concat(a.list, b, 4)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
    // A copy of its own: changing it changes neither source.
    joined.length = 0;
    expect(a.list).toHaveLength(3);
    expect(b).toHaveLength(2);
  });
});
