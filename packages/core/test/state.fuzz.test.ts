/**
 * Property test: composeEventlogState (any chunk size) and an applyEvent fold (chunk size 1) equal
 * the plain v4 re-implementation the compose bench uses as its baseline, on random event logs
 * made to hit every §8.12 row and every case where a direct fold could differ from v4's chunked
 * one: type switches inside a chunk, non-object data, arrays unioned across chunk boundaries,
 * duplicates inside one array, values shared between events, prototype-named keys.
 *
 * The one documented deviation: core drops "__proto__" keys (v4 would swap prototypes or pollute
 * Object.prototype), so the reference composes the same log with those keys removed.
 */
import { describe, expect, it } from 'vitest';
import { composeEventlogStateV4 } from '@eventflow/test-support/v4-compose';
import { applyEvent, composeEventlogState, emptyState, type State } from '../src/state.js';
import { collections } from '../src/state-collections.js';
import { prng } from './prng.js';

type Event = { data: unknown };


interface Options {
  /** Reuse earlier objects and arrays by reference (in-memory data; JSON never shares). */
  shared: boolean;
  /** Dates, Maps and Sets, as SERDE decodes them. */
  exotic: boolean;
  /** How often a path switches type (object, array, scalar). */
  switches: number;
}

function randomLog(seed: number, length: number, options: Options): Event[] {
  const random = prng(seed);
  const chance = (p: number) => random() < p;
  const pick = <T,>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const pool: object[] = [];
  const keep = <T extends object>(value: T): T => (pool.push(value), value);
  // Few keys, so that paths collide across events; some named like Object.prototype members.
  const keys = ['a', 'b', 'c', 'l', 'm', 'constructor', 'toString', '__proto__'];
  const primitive = () => pick<unknown>([0, 1, 2, -0, NaN, 'x', 'y', true, false, null, null]);
  const kindOf = new Map<string, string>(); // a stable kind per key name, unless it switches
  const array = (depth: number): unknown[] => {
    const items = Array.from({ length: Math.floor(random() * 5) }, () =>
      chance(0.15) && depth < 3 ? value('o', depth + 1) : pick<unknown>([1, 2, 3, 'x', 'x', NaN, 0, -0, null]),
    );
    return keep(items);
  };
  const value = (key: string, depth: number): unknown => {
    if (options.shared && pool.length > 0 && chance(0.1)) return pick(pool);
    let kind = kindOf.get(key) ?? pick(['o', 'o', 'l', 'p']);
    if (chance(options.switches)) kind = pick(['o', 'l', 'p', 'p']);
    kindOf.set(key, kind);
    if (depth > 3 || kind === 'p') return primitive();
    if (options.exotic && chance(0.15)) {
      return pick([
        () => new Date(Math.floor(random() * 3)),
        () => new Set([pick([1, 2, 3]), pick([1, 2, 3])]),
        () => new Map<unknown, unknown>([[pick(['k', 'j']), value('m', depth + 1)]]),
      ])();
    }
    return kind === 'l' ? array(depth) : object(depth + 1);
  };
  const object = (depth: number): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    const count = Math.floor(random() * 4);
    for (let i = 0; i < count; i += 1) {
      const key = pick(keys);
      // As JSON.parse makes it: an own "__proto__" key, not a prototype.
      Object.defineProperty(out, key, { value: value(key, depth), enumerable: true, writable: true, configurable: true });
    }
    return keep(out);
  };
  return Array.from({ length }, (): Event => {
    if (options.shared && pool.length > 0 && chance(0.05)) return { data: pick(pool) };
    const r = random();
    if (r < 0.04) return { data: pick<unknown>([[1, 2], 'str', 7, null, [], true]) };
    if (r < 0.06) return { data: undefined };
    if (r < 0.1) return { data: {} };
    return { data: object(0) };
  });
}

/** The log with "__proto__" keys removed, sharing kept (one copy per original object). */
function withoutProtoKeys(events: Event[]): Event[] {
  const copies = new Map<object, unknown>();
  const strip = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    if (copies.has(value)) return copies.get(value);
    if (Array.isArray(value)) {
      const out: unknown[] = [];
      copies.set(value, out);
      for (const item of value) out.push(strip(item));
      return out;
    }
    if (value instanceof Map) {
      const out = new Map<unknown, unknown>();
      copies.set(value, out);
      for (const [k, v] of value) out.set(k, strip(v));
      return out;
    }
    if (value instanceof Set) {
      const out = new Set<unknown>();
      copies.set(value, out);
      for (const item of value) out.add(strip(item));
      return out;
    }
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return value; // Dates: kept as is
    const out: Record<string, unknown> = {};
    copies.set(value, out);
    for (const key of Object.keys(value)) if (key !== '__proto__') out[key] = strip((value as Record<string, unknown>)[key]);
    return out;
  };
  return events.map((event) => ({ data: strip(event.data) }));
}

/**
 * What toStrictEqual compares, key order included (v4 defines it within a chunk). Comparing the
 * states directly would not do: vitest takes an own "constructor" key for the object's class.
 */
function shape(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return ['array', value.map(shape)];
  if (value instanceof Date) return ['date', value.getTime()];
  if (value instanceof Set) return ['set', [...value].map(shape)];
  if (value instanceof Map) return ['map', [...value].map(([k, v]) => [shape(k), shape(v)])];
  const proto: unknown = Object.getPrototypeOf(value);
  const kind = proto === Object.prototype ? 'object' : proto === null ? 'null-prototype object' : 'instance';
  return [kind, Object.entries(value).map(([k, v]) => [k, shape(v)])];
}

const foldApply = (events: Event[]): State => events.reduce<State>((state, event) => applyEvent(state, event), emptyState);

// The browser build's state-collections module (state.browser-build.test.ts) composes JSON only.
const scenarios = ([
  ['JSON, stable kinds', { shared: false, exotic: false, switches: 0 }],
  ['JSON, type switches', { shared: false, exotic: false, switches: 0.15 }],
  ['shared references', { shared: true, exotic: false, switches: 0.05 }],
  ['Dates, Maps and Sets', { shared: false, exotic: true, switches: 0.05 }],
  ['everything at once', { shared: true, exotic: true, switches: 0.15 }],
] satisfies Array<[string, Options]>).filter(([, options]) => collections || !options.exotic);

describe('composeEventlogState and applyEvent equal the v4 reference (random logs)', () => {
  it.each(scenarios)('%s', (_name, options) => {
    for (let seed = 1; seed <= 150; seed += 1) {
      const events = randomLog(seed * 7919 + options.switches * 1000, 1 + (seed % 45), options);
      const reference = withoutProtoKeys(events);
      for (const size of [1, 2, 3, 10]) {
        const expected = composeEventlogStateV4(reference, size);
        const actual = composeEventlogState(events, size);
        expect(shape(actual), `seed ${seed}, size ${size}`).toStrictEqual(shape(expected));
      }
      const folded = foldApply(events);
      const expected = composeEventlogStateV4(reference, 1);
      expect(shape(folded), `applyEvent fold, seed ${seed}`).toStrictEqual(shape(expected));
      expect(Object.keys(Object.prototype), 'Object.prototype polluted').toEqual([]);
    }
  });

  it('long logs (chunk boundaries every 10 events over 2,000 events)', () => {
    for (const [index, [, options]] of scenarios.entries()) {
      const events = randomLog(4242 + index, 2000, options);
      const reference = withoutProtoKeys(events);
      expect(shape(composeEventlogState(events))).toStrictEqual(shape(composeEventlogStateV4(reference)));
      expect(shape(foldApply(events))).toStrictEqual(shape(composeEventlogStateV4(reference, 1)));
    }
  });

  it('never mutates the input log', () => {
    const events = randomLog(99, 300, scenarios.at(-1)![1]);
    const before = shape(events.map((event) => event.data));
    for (const size of [1, 3, 10]) composeEventlogState(events, size);
    foldApply(events);
    expect(shape(events.map((event) => event.data))).toStrictEqual(before);
  });
});
