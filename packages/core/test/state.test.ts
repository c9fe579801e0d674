import { describe, it, expect } from 'vitest';
import { applyEvent, composeEventlogState, emptyState, type State } from '../src/state.js';
import { isEventflowError } from '../src/errors.js';
import type { JsonValue, StoredEvent } from '../src/protocol.js';
import { prng } from './prng.js';

/** Wraps data values as events; `undefined` stands for an event without data. */
const log = (...data: unknown[]) => data.map((value) => ({ data: value }));

const foldApply = (events: ReadonlyArray<{ data: unknown }>, from: State = emptyState) =>
  events.reduce(applyEvent, from);

function expectDeepFrozen(value: unknown): void {
  if (typeof value !== 'object' || value === null) return;
  expect(Object.isFrozen(value)).toBe(true);
  if (value instanceof Map || value instanceof Set) {
    for (const item of value.values()) expectDeepFrozen(item);
  } else {
    for (const item of Object.values(value)) expectDeepFrozen(item);
  }
}


/**
 * With `stable`, a key's kind never changes (o* objects, l* arrays, p* primitives or null), which is
 * when v4's result does not depend on the chunk size. Otherwise paths change type freely, objects
 * get overwritten by null, and some data is not an object at all.
 */
function randomLog(seed: number, length: number, stable: boolean): Array<{ data: JsonValue }> {
  const random = prng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const keys = ['o1', 'o2', 'l1', 'l2', 'p1', 'p2'];
  const primitive = (): JsonValue => pick<JsonValue>([0, 1, 2, 'x', 'y', true, null, null]);
  const array = (depth: number): JsonValue[] =>
    Array.from({ length: Math.floor(random() * 5) }, () =>
      random() < 0.2 ? object(depth + 1) : pick([1, 1, 2, 3, 'x', 'x']),
    );
  const value = (key: string, depth: number): JsonValue => {
    const kind = stable ? key[0] : pick(['o', 'l', 'p', 'p']);
    if (kind === 'p' || depth > 3) return primitive();
    return kind === 'l' ? array(depth) : object(depth + 1);
  };
  const object = (depth: number): { [key: string]: JsonValue } => {
    const out: { [key: string]: JsonValue } = {};
    const count = 1 + Math.floor(random() * 3);
    for (let i = 0; i < count; i += 1) {
      const key = depth > 3 ? pick(['p1', 'p2']) : pick(keys);
      out[key] = value(key, depth);
    }
    return out;
  };
  return Array.from({ length }, () => ({
    data: !stable && random() < 0.1 ? pick<JsonValue>([[1, 2], 'str', 7, null, []]) : object(0),
  }));
}

describe('MERGE rules (§8.12, within one chunk)', () => {
  it('b undefined gives a', () => {
    expect(composeEventlogState(log({ a: 1 }, undefined))).toStrictEqual({ a: 1 });
    expect(composeEventlogState(log({ v: { x: 1 } }, { v: undefined }))).toStrictEqual({ v: { x: 1 } });
  });

  it('a and b the same value gives a (a shared array is not even de-duplicated)', () => {
    const shared = [1, 1];
    const state = composeEventlogState(log({ v: shared }, { v: shared }));
    expect(state).toStrictEqual({ v: [1, 1] });
    expect(state['v']).not.toBe(shared);
  });

  it('both arrays: concatenation de-duplicated by SameValueZero, first occurrence kept', () => {
    const state = composeEventlogState(log({ v: [3, 1, 1, NaN, 0] }, { v: [2, 3, NaN, -0, 4] }));
    expect(state).toStrictEqual({ v: [3, 1, NaN, 0, 2, 4] });
  });

  it('both arrays: objects compare by reference, equal objects are kept twice', () => {
    const state = composeEventlogState(log({ v: [{ k: 1 }] }, { v: [{ k: 1 }] }));
    expect(state).toStrictEqual({ v: [{ k: 1 }, { k: 1 }] });
    const same = { k: 1 };
    expect(composeEventlogState(log({ v: [same] }, { v: [same] }))).toStrictEqual({ v: [{ k: 1 }] });
  });

  it('both plain objects: recursive; keys only in a first, then b in its order', () => {
    const state = composeEventlogState(
      log({ a: 1, b: { x: 1, z: 0 }, c: 3 }, { d: 4, b: { y: 2, x: 5 }, a: 5 }),
    );
    expect(state).toStrictEqual({ a: 5, b: { x: 5, y: 2, z: 0 }, c: 3, d: 4 });
    expect(Object.keys(state)).toEqual(['c', 'd', 'b', 'a']);
    expect(Object.keys(state['b'] as object)).toEqual(['z', 'y', 'x']);
  });

  it('both Sets: the union', () => {
    const state = composeEventlogState(log({ s: new Set([1, 2]) }, { s: new Set([2, 3]) }));
    expect(state).toStrictEqual({ s: new Set([1, 2, 3]) });
  });

  it('both Maps: merged key by key, recursively on shared keys', () => {
    const state = composeEventlogState(
      log(
        { m: new Map<string, unknown>([['x', { a: 1 }], ['y', 1]]) },
        { m: new Map<string, unknown>([['x', { b: 2 }], ['z', 3]]) },
      ),
    );
    expect(state).toStrictEqual({
      m: new Map<string, unknown>([['x', { a: 1, b: 2 }], ['y', 1], ['z', 3]]),
    });
  });

  it.each([
    ['type mismatch array → object', [1], { a: 1 }],
    ['type mismatch object → array', { a: 1 }, [1]],
    ['null', { a: 1 }, null],
    ['null replaced', null, { a: 1 }],
    ['primitives', 1, 'two'],
    ['Dates', new Date(1), new Date(2)],
    ['Errors', new Error('first'), new Error('second')],
  ])('anything else (%s): b wins', (_name, a, b) => {
    expect(composeEventlogState(log({ v: a }, { v: b }))).toStrictEqual({ v: b });
  });

  it('a one-element chunk gives a deep clone', () => {
    const data = { v: { w: [1, 1] }, d: new Date(5) };
    const state = composeEventlogState(log(data));
    expect(state).toStrictEqual({ v: { w: [1, 1] }, d: new Date(5) });
    expect(state['v']).not.toBe(data.v);
    expect(state['d']).not.toBe(data.d);
  });

  it('an empty chunk gives undefined, which changes nothing', () => {
    expect(composeEventlogState([])).toStrictEqual({});
    const ten = log(...Array.from({ length: 10 }, (_, i) => ({ [`k${i}`]: i })));
    expect(composeEventlogState(ten, 10)).toStrictEqual(composeEventlogState(ten, 1));
    expect(composeEventlogState(ten, 5)).toStrictEqual(composeEventlogState(ten, 1));
  });
});

describe('ASSIGN rules (§8.12, across chunks: size 1)', () => {
  it('M undefined: no-op', () => {
    expect(composeEventlogState(log({ a: 1 }, undefined), 1)).toStrictEqual({ a: 1 });
    expect(composeEventlogState([{ data: { a: 1 } }, {} as { data: unknown }], 1)).toStrictEqual({ a: 1 });
  });

  it.each([
    ['an array', [1, 2]],
    ['a string', 'str'],
    ['a number', 5],
    ['null', null],
    ['a boolean', true],
    ['a Date', new Date(0)],
    ['a Map', new Map([['a', 2]])],
    ['a Set', new Set(['a'])],
  ])('M not a plain object (%s): silently ignored', (_name, data) => {
    expect(composeEventlogState(log({ a: 1 }, data), 1)).toStrictEqual({ a: 1 });
    expect(composeEventlogState(log(data), 1)).toStrictEqual({});
  });

  it('both plain objects: ASSIGN recursively', () => {
    const state = composeEventlogState(log({ a: { x: 1, n: { p: 1 } } }, { a: { y: 2, n: { q: 2 } } }), 1);
    expect(state).toStrictEqual({ a: { x: 1, y: 2, n: { p: 1, q: 2 } } });
  });

  it('existing key, both arrays: de-duplicated union, existing items first', () => {
    const state = composeEventlogState(log({ n: [3, 1, 1] }, { n: [2, 1, 2] }), 1);
    expect(state).toStrictEqual({ n: [3, 1, 2] });
  });

  it('existing key, both Sets: union', () => {
    const state = composeEventlogState(log({ s: new Set([1]) }, { s: new Set([1, 2]) }), 1);
    expect(state).toStrictEqual({ s: new Set([1, 2]) });
  });

  it('existing key, both Maps: merged key by key', () => {
    const state = composeEventlogState(
      log(
        { m: new Map<string, unknown>([['x', { a: 1 }], ['l', [1]]]) },
        { m: new Map<string, unknown>([['x', { b: 2 }], ['l', [1, 2]], ['z', 3]]) },
      ),
      1,
    );
    expect(state).toStrictEqual({
      m: new Map<string, unknown>([['x', { a: 1, b: 2 }], ['l', [1, 2]], ['z', 3]]),
    });
  });

  it.each([
    ['object → number', { x: 1 }, 5],
    ['number → object', 5, { x: 1 }],
    ['array → object', [1], { x: 1 }],
    ['object → null', { x: 1 }, null],
    ['null → array', null, [1, 1]],
    ['string → string', 'old', 'new'],
    ['Date → Date', new Date(1), new Date(2)],
  ])('existing key, anything else (%s): overwritten', (_name, before, after) => {
    expect(composeEventlogState(log({ k: before }, { k: after }), 1)).toStrictEqual({ k: after });
  });

  it('existing key, M[k] undefined (in-memory data only): keeps the old value, as v4 deep/assign does', () => {
    expect(composeEventlogState(log({ a: 1, o: { x: 1 } }, { a: undefined, o: { x: undefined } }), 1)).toStrictEqual({
      a: 1,
      o: { x: 1 },
    });
  });

  it('new key: taken as is, an array is not de-duplicated', () => {
    const state = composeEventlogState(log({ a: 1 }, { n: [1, 1], o: { l: [2, 2] } }), 1);
    expect(state).toStrictEqual({ a: 1, n: [1, 1], o: { l: [2, 2] } });
  });
});

describe('effective semantics (§8.12)', () => {
  it('all-object logs: the result is a left fold of MERGE whatever the chunk size', () => {
    const events = log({ a: { x: 1 } }, { l: [1, 1] }, { a: { y: 2 } }, { l: [2] }, { a: 3 });
    const expected = { a: 3, l: [1, 2] };
    for (const size of [1, 2, 3, 4, 5, 10]) expect(composeEventlogState(events, size)).toStrictEqual(expected);
  });

  it('nothing deletes a key; null overwrites', () => {
    const events = log({ a: 1, b: 2 }, {}, { a: null });
    expect(composeEventlogState(events)).toStrictEqual({ a: null, b: 2 });
    expect(composeEventlogState(events, 1)).toStrictEqual({ a: null, b: 2 });
  });

  it('arrays are grow-only sets', () => {
    expect(composeEventlogState(log({ l: [1, 2] }, { l: [2] }))).toStrictEqual({ l: [1, 2] });
    expect(composeEventlogState(log({ l: [1, 2] }, { l: [] }), 1)).toStrictEqual({ l: [1, 2] });
  });

  it('a change of type replaces: object → 5 → object gives the last object only', () => {
    const events = log({ a: { deep: 1 } }, { a: 5 }, { a: { other: 2 } });
    expect(composeEventlogState(events, 1)).toStrictEqual({ a: { other: 2 } });
  });

  it('[{a:1}, [1,2]] gives {} with size 10', () => {
    expect(composeEventlogState(log({ a: 1 }, [1, 2]), 10)).toStrictEqual({});
  });

  it('[{a:1}, [1,2]] gives {a:1} with size 1', () => {
    expect(composeEventlogState(log({ a: 1 }, [1, 2]), 1)).toStrictEqual({ a: 1 });
  });

  it('[{a:1}, "str", {b:2}] gives {b:2} with size 10', () => {
    expect(composeEventlogState(log({ a: 1 }, 'str', { b: 2 }), 10)).toStrictEqual({ b: 2 });
    expect(composeEventlogState(log({ a: 1 }, 'str', { b: 2 }), 1)).toStrictEqual({ a: 1, b: 2 });
  });

  it('a replacement inside a chunk is lost when an earlier chunk set the path (unlike a MERGE fold)', () => {
    const events = log({ a: { x: 1 }, l: [1] }, { a: null, l: 5 }, { a: { y: 2 }, l: [2] });
    expect(composeEventlogState(events, 10)).toStrictEqual({ a: { y: 2 }, l: [2] });
    expect(composeEventlogState(events, 1)).toStrictEqual({ a: { y: 2 }, l: [2] });
    expect(composeEventlogState(events, 2)).toStrictEqual({ a: { y: 2 }, l: [2] });
    expect(composeEventlogState(log({ a: { deep: 1 } }, { a: 5 }, { a: { other: 2 } }), 2)).toStrictEqual({
      a: { other: 2 },
    });
    const shifted = log({}, ...events.map((event) => event.data));
    expect(composeEventlogState(shifted, 2)).toStrictEqual({ a: { x: 1, y: 2 }, l: [1, 2] });
    expect(composeEventlogState(shifted, 1)).toStrictEqual({ a: { y: 2 }, l: [2] });
  });

  it('a non-object only wipes its own chunk', () => {
    const events = log({ a: 1 }, { b: 2 }, 'str', { c: 3 });
    expect(composeEventlogState(events, 2)).toStrictEqual({ a: 1, b: 2, c: 3 });
    expect(composeEventlogState(events, 3)).toStrictEqual({ c: 3 });
  });
});

describe('more examples (chunk size 10)', () => {
  it('{a:1,b:{x:1},arr:[1,2]}, {b:{y:2},arr:[2,3],a:null}, {b:{x:5}}', () => {
    const events = log({ a: 1, b: { x: 1 }, arr: [1, 2] }, { b: { y: 2 }, arr: [2, 3], a: null }, { b: { x: 5 } });
    expect(composeEventlogState(events)).toStrictEqual({ a: null, b: { x: 5, y: 2 }, arr: [1, 2, 3] });
  });

  it('{l:[{k:1}]}, {l:[{k:1}]}', () => {
    expect(composeEventlogState(log({ l: [{ k: 1 }] }, { l: [{ k: 1 }] }))).toStrictEqual({
      l: [{ k: 1 }, { k: 1 }],
    });
  });

  it('{n:[1,1]} (a single event is not de-duplicated)', () => {
    expect(composeEventlogState(log({ n: [1, 1] }))).toStrictEqual({ n: [1, 1] });
  });

  it('{n:[1,1]}, {n:[2]}', () => {
    expect(composeEventlogState(log({ n: [1, 1] }, { n: [2] }))).toStrictEqual({ n: [1, 2] });
  });

  it('{a:{deep:1}}, {a:5}, {a:{other:2}}', () => {
    expect(composeEventlogState(log({ a: { deep: 1 } }, { a: 5 }, { a: { other: 2 } }))).toStrictEqual({
      a: { other: 2 },
    });
  });
});

describe('composeEventlogState', () => {
  it('chunk boundaries do not matter for 25 object events', () => {
    const events = log(
      ...Array.from({ length: 25 }, (_, i) => ({
        [`k${i % 7}`]: { [`n${i % 3}`]: i, l: [i % 4, i % 2] },
        count: i,
        ...(i % 5 === 0 ? { k1: { n0: null } } : {}),
      })),
    );
    const bySize = [1, 2, 3, 10, 24, 25, 26, 1000].map((size) => composeEventlogState(events, size));
    for (const state of bySize) expect(state).toStrictEqual(bySize[0]);
    expect(composeEventlogState(events, 10)).toStrictEqual(composeEventlogState(events, 3));
  });

  it('defaults to size 10', () => {
    const events = log(...Array.from({ length: 10 }, () => ({})), { a: 1 }, [1]);
    expect(composeEventlogState(events)).toStrictEqual({});
    expect(composeEventlogState(events, 10)).toStrictEqual({});
    expect(composeEventlogState(events, 11)).toStrictEqual({ a: 1 });
  });

  it('returns deeply frozen results, Maps and Sets included', () => {
    const state = composeEventlogState(
      log(
        { a: { b: [{ c: 1 }] }, m: new Map([['k', { v: 1 }]]), d: new Date(0) },
        { s: new Set([{ x: 1 }]), e: new Error('boom') },
      ),
    );
    expectDeepFrozen(state);
    expect(() => (state['m'] as Map<string, unknown>).set('z', 1)).toThrow();
    expect(() => (state['s'] as Set<unknown>).add(1)).toThrow();
    expect(Object.isFrozen(emptyState)).toBe(true);
    expect(composeEventlogState([])).toBe(emptyState);
  });

  it('never mutates or freezes the input events, nor shares values with them', () => {
    const events = log(
      { a: { b: [1, 1] }, m: new Map([['k', { v: 1 }]]), s: new Set([1]), d: new Date(7) },
      { a: { b: [2], c: { x: 1 } }, m: new Map([['k', { w: 2 }]]), s: new Set([2]), d: new Date(8) },
      [1, 2],
      { a: { c: null } },
    );
    const before = structuredClone(events);
    for (const size of [1, 2, 3, 10]) composeEventlogState(events, size);
    const state = foldApply(events);
    expect(events).toStrictEqual(before);
    const first = events[0]?.data as { a: { b: number[] }; m: Map<string, unknown> };
    expect(Object.isFrozen(first)).toBe(false);
    expect(Object.isFrozen(first.a.b)).toBe(false);
    expect(Object.isFrozen(first.m)).toBe(false);
    first.m.set('other', 1); // still a working Map
    expect((state['a'] as { b: unknown }).b).not.toBe(first.a.b);
  });

  it.each([0, -1, 1.5, NaN, Infinity, -Infinity])('size %s throws E_EVENTFLOW_INVALID_INPUT', (size) => {
    let caught: unknown;
    try {
      composeEventlogState(log({ a: 1 }), size);
    } catch (error) {
      caught = error;
    }
    expect(isEventflowError(caught, 'E_EVENTFLOW_INVALID_INPUT')).toBe(true);
    expect((caught as Error).message).toBe(`composeEventlogState: size must be a positive integer, got ${size}`);
  });

  it('a non-numeric size throws instead of looping forever', () => {
    expect(() => composeEventlogState([], '10' as unknown as number)).toThrow(
      'composeEventlogState: size must be a positive integer, got string',
    );
  });

  it('accepts stored events', () => {
    const stored: StoredEvent[] = [
      { id: '1', domain: 'd', name: 'n', pid: 'p', data: { a: 1 }, timestamp: 't', rid: null, position: 1 },
    ];
    expect(composeEventlogState(stored)).toStrictEqual({ a: 1 });
  });

  it('drops "__proto__" keys instead of touching prototypes', () => {
    const data: unknown = JSON.parse('{"__proto__":{"polluted":true},"a":{"__proto__":{"x":1}}}');
    for (const state of [composeEventlogState(log(data, data)), foldApply(log(data, data))]) {
      expect(state).toStrictEqual({ a: {} });
      expect(Object.getPrototypeOf(state)).toBe(Object.prototype);
    }
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });
});

describe('composeEventlogState: inputs where folding event by event could differ from v4 chunks', () => {
  it('keys named like Object.prototype members are kept', () => {
    // Compared as JSON: toStrictEqual takes an own "constructor" key for the class.
    const events = log({ constructor: { x: 1 }, toString: 1 }, { a: 1 }, { constructor: { y: 2 } });
    const expected = JSON.stringify({ constructor: { x: 1, y: 2 }, toString: 1, a: 1 });
    expect(JSON.stringify(composeEventlogState(events, 1))).toBe(expected);
    expect(JSON.stringify(composeEventlogState(events))).toBe(JSON.stringify({ toString: 1, a: 1, constructor: { x: 1, y: 2 } }));
    expect(JSON.stringify(foldApply(events))).toBe(expected);
  });

  it('a union turns -0 into 0 (through a Set), a taken array and an overwrite keep -0', () => {
    expect(Object.is((composeEventlogState(log({ l: [-0] }))['l'] as number[])[0], -0)).toBe(true);
    expect(Object.is((composeEventlogState(log({ l: [-0] }, { l: [1] }))['l'] as number[])[0], 0)).toBe(true);
    expect(Object.is((composeEventlogState(log({ l: [1] }, {}, { l: [-0] }), 1)['l'] as number[])[1], 0)).toBe(true);
    expect(Object.is(composeEventlogState(log({ n: 0 }, { n: -0 }))['n'], -0)).toBe(true);
  });

  it('an array shared by two events of a chunk is merged with itself: kept as is', () => {
    const shared = [1, 1, -0];
    const state = composeEventlogState(log({ l: shared }, { l: shared }, { m: 1 }));
    expect(state['l']).toStrictEqual([1, 1, -0]);
    expect(composeEventlogState(log({ l: shared }, { l: shared }), 1)['l']).toStrictEqual([1, 0]);
  });

  it('an object shared by arrays of one chunk is one item, of two chunks two', () => {
    const item = { k: 1 };
    expect(composeEventlogState(log({ l: [item] }, { l: [item] }))).toStrictEqual({ l: [{ k: 1 }] });
    expect(composeEventlogState(log({ l: [item] }, { l: [item] }), 1)).toStrictEqual({ l: [{ k: 1 }, { k: 1 }] });
  });

  it('a key new in a chunk moves behind the keys of later events, an older key keeps its place', () => {
    const state = composeEventlogState(log({ x: 0 }, {}, {}, { a: 1 }, { b: 1 }, { a: 2, x: 1 }), 3);
    expect(Object.keys(state)).toEqual(['x', 'b', 'a']);
    expect(Object.keys(composeEventlogState(log({ x: 0 }, { a: 1 }, { b: 1 }, { a: 2, x: 1 }), 10))).toEqual(['b', 'a', 'x']);
  });

  it('a Date or Map anywhere still composes exactly', () => {
    const events = log({ a: { x: 1 } }, { a: null }, { a: { y: 2 }, d: new Date(3), m: new Map([['k', 1]]) });
    expect(composeEventlogState(events)).toStrictEqual({ a: { y: 2 }, d: new Date(3), m: new Map([['k', 1]]) });
    expect(composeEventlogState(log({ a: { x: 1 } }, ...events.map((event) => event.data)), 2)).toStrictEqual({
      a: { x: 1, y: 2 },
      d: new Date(3),
      m: new Map([['k', 1]]),
    });
  });
});

describe('applyEvent', () => {
  it.each([1, 3, 10])('folded over 500 random type-stable events deep-equals compose with size %i', (size) => {
    const events = randomLog(42, 500, true);
    expect(foldApply(events)).toStrictEqual(composeEventlogState(events, size));
  });

  it('folded over 500 random events with type changes, nulls and non-objects equals size 1', () => {
    const events = randomLog(7, 500, false);
    const state = foldApply(events);
    expect(state).toStrictEqual(composeEventlogState(events, 1));
    // The log really exercises the divergence: some prefixes compose differently with size 10.
    const canonical = (value: unknown) =>
      JSON.stringify(value, (_key, item: unknown) =>
        item && typeof item === 'object' && !Array.isArray(item) ? Object.fromEntries(Object.entries(item).sort()) : item,
      );
    const diverging = Array.from({ length: 50 }, (_, i) => events.slice(0, 10 * i + 7)).filter(
      (prefix) => canonical(foldApply(prefix)) !== canonical(composeEventlogState(prefix, 10)),
    );
    expect(diverging.length).toBeGreaterThan(0);
  });

  it('continues from a composed state like compose with size 1', () => {
    const events = randomLog(99, 100, false);
    const prefix = composeEventlogState(events.slice(0, 60), 1);
    expect(foldApply(events.slice(60), prefix)).toStrictEqual(composeEventlogState(events, 1));
    const stable = randomLog(99, 100, true);
    expect(foldApply(stable.slice(60), composeEventlogState(stable.slice(0, 60)))).toStrictEqual(
      composeEventlogState(stable),
    );
  });

  it('keeps the identity of untouched subtrees', () => {
    const state = composeEventlogState(log({ a: { x: 1, y: { z: 1 } }, b: { c: [1, 2] }, l: [1, 2], n: 1 }));
    const next = applyEvent(state, { data: { a: { x: 2 } } });
    expect(next).toStrictEqual({ a: { x: 2, y: { z: 1 } }, b: { c: [1, 2] }, l: [1, 2], n: 1 });
    expect(next).not.toBe(state);
    expect(next['a']).not.toBe(state['a']);
    expect((next['a'] as { y: unknown }).y).toBe((state['a'] as { y: unknown }).y);
    expect(next['b']).toBe(state['b']);
    expect(next['l']).toBe(state['l']);
    expectDeepFrozen(next);
    expect(state).toStrictEqual({ a: { x: 1, y: { z: 1 } }, b: { c: [1, 2] }, l: [1, 2], n: 1 });
  });

  it('returns the same state when nothing changes', () => {
    const state = composeEventlogState(log({ a: { x: 1 }, l: [1, 2], s: new Set([1]), n: null }));
    for (const data of [{ a: { x: 1 } }, { l: [2, 1] }, { s: new Set([1]) }, { n: null }, {}, [1], 'str', undefined]) {
      expect(applyEvent(state, { data })).toBe(state);
    }
  });

  it('returns deeply frozen results from an unfrozen event', () => {
    const data = { a: { b: [{ c: 1 }] }, s: new Set([{ d: 1 }]) };
    const next = applyEvent(emptyState, { data });
    expectDeepFrozen(next);
    expect(Object.isFrozen(data.a)).toBe(false);
  });

  it('handles Maps, Sets and Dates', () => {
    const date = new Date(1000);
    let state = applyEvent(emptyState, { data: { m: new Map([['k', { a: 1 }]]), s: new Set([1]), d: date } });
    state = applyEvent(state, { data: { m: new Map([['k', { b: 2 }], ['j', [1]]]), s: new Set([2]) } });
    state = applyEvent(state, { data: { m: new Map([['j', [1, 2]]]) } });
    expect(state).toStrictEqual({
      m: new Map<string, unknown>([['k', { a: 1, b: 2 }], ['j', [1, 2]]]),
      s: new Set([1, 2]),
      d: new Date(1000),
    });
    expect(state['d']).not.toBe(date);
    expectDeepFrozen(state);
    const later = applyEvent(state, { data: { d: new Date(2000) } });
    expect(later['d']).toStrictEqual(new Date(2000));
    expect(later['m']).toBe(state['m']);
    expect(date.getTime()).toBe(1000);
  });

  it('copies Errors (as SERDE decodes them) instead of sharing them', () => {
    const error = Object.assign(new Error('boom'), { code: 'E_X' });
    const state = applyEvent(emptyState, { data: { e: error } });
    const copy = state['e'] as Error & { code: string };
    expect(copy).not.toBe(error);
    expect(copy).toBeInstanceOf(Error);
    expect(Object.prototype.toString.call(copy)).toBe('[object Error]');
    expect([copy.message, copy.code]).toEqual(['boom', 'E_X']);
    expect(Object.isFrozen(copy)).toBe(true);
    expect(Object.isFrozen(error)).toBe(false);
  });
});
