/**
 * The direct fold of composeEventlogState (state.ts): the same result as v4's chunked fold where
 * that is proven, several times faster. Browser builds replace this module with
 * fast-fold.browser.ts (the package's "browser" field): they fold with the exact chunked fold
 * only, which gives the same results and keeps the browser client within its size budget.
 */
import { isPlainObject } from './validate.js';

type Plain = Record<string, unknown>;

/** Only `data` is read. */
interface StateEvent {
  readonly data: unknown;
}

const isObject = (value: unknown): value is object => typeof value === 'object' && value !== null;
const keysOf = (value: object): string[] => Object.keys(value).filter((key) => key !== '__proto__');

/** The state folded into `state`, or undefined where the direct fold is not proven equal (the caller folds in chunks). */
export const foldDirect = (eventlog: ReadonlyArray<StateEvent>, size: number, state: Plain): Plain | undefined => {
  try {
    return fold(eventlog, size, state);
  } catch (error) {
    if (error === NOT_DIRECT) return undefined;
    throw error;
  }
};

/** Thrown by `foldDirect` for input whose direct fold is not proven equal to the chunked one. */
const NOT_DIRECT = Symbol('not direct');

/**
 * The same result as `foldChunks` without merging and cloning chunks: each event's data is
 * assigned straight into one mutable state, copying only what it adds. ASSIGN of a chunk's MERGE
 * equals ASSIGNing its events one by one (MERGE is associative where types agree) except in the
 * cases below, which this fold follows or detects, throwing NOT_DIRECT so that the caller falls
 * back to `foldChunks`:
 * - a data that is not a plain object wins over everything before it in its chunk, and a chunk
 *   whose MERGE is not a plain object is ignored: only the events after a chunk's last such data
 *   are applied;
 * - a mergeable value replaced by another type and then a mergeable value again, in one chunk:
 *   v4 merges the last one into the value the chunk started from, which is gone here. Detected
 *   (conservatively) as a replacement by an object or array after any such "wipe" in the chunk;
 * - MERGE keeps a value merged with itself (an array taken as is stays un-de-duplicated) and
 *   de-duplicates objects in arrays by reference: one array seen twice at a path of a chunk is
 *   skipped, an object item seen twice anywhere is not proven;
 * - values that are not JSON (Dates, Maps, Sets, Errors, instances) and `undefined` values.
 */
function fold(eventlog: ReadonlyArray<StateEvent>, size: number, state: Plain): Plain {
  const items = new Set<object>(); // object items of arrays seen so far
  const members = new Map<unknown[], Set<unknown>>(); // state arrays that were united → their items
  const takenAsIs = new Map<unknown[], unknown>(); // arrays copied in this chunk → their input
  const fresh = new Set<object>(); // objects copied in this chunk: all their keys are new in it
  const added = new Map<object, Set<string>>(); // older objects → keys they got in this chunk
  let wiped = false;

  const fail = (): never => {
    throw NOT_DIRECT;
  };
  const copyItem = (item: unknown): unknown => {
    if (!isObject(item)) return item;
    if (items.has(item)) fail();
    items.add(item);
    return copy(item);
  };
  const copy = (value: unknown): unknown => {
    if (!isObject(value)) return value;
    if (Array.isArray(value)) {
      const out = value.map(copyItem);
      if (out.length > 0) takenAsIs.set(out, value);
      return out;
    }
    if (!isPlainObject(value)) return fail();
    const out: Plain = {};
    for (const key of keysOf(value)) out[key] = value[key] === undefined ? fail() : copy(value[key]);
    fresh.add(out);
    return out;
  };
  const unite = (current: unknown[], next: unknown[]): void => {
    if (takenAsIs.get(current) === next) return;
    let set = members.get(current);
    if (!set) {
      // v4's union goes through a Set: duplicates collapse and -0 becomes 0.
      set = new Set(current);
      current.length = 0;
      for (const item of set) current.push(item);
      members.set(current, set);
    }
    for (const item of next) {
      // A copied object never equals an existing item.
      if (isObject(item)) current.push(copyItem(item));
      else if (!set.has(item)) {
        set.add(item);
        current.push(item === 0 ? 0 : item);
      }
    }
  };
  const assign = (target: Plain, data: Plain): void => {
    for (const key of Object.keys(data)) {
      if (key === '__proto__') continue;
      const next = data[key];
      const current = target[key];
      if (!Object.hasOwn(target, key)) {
        target[key] = next === undefined ? fail() : copy(next);
        if (!fresh.has(target)) {
          const keys = added.get(target);
          if (keys) keys.add(key);
          else added.set(target, new Set([key]));
        }
        continue;
      }
      let value = next;
      if (!isObject(next)) {
        if (next === undefined) fail();
        wiped ||= isObject(current);
      } else if (isPlainObject(next) && isPlainObject(current)) {
        assign(current, next);
        value = current;
      } else if (Array.isArray(next) && Array.isArray(current)) {
        unite(current, next);
        value = current;
      } else {
        if (wiped) fail();
        wiped = isObject(current);
        value = copy(next);
      }
      // In a chunk's MERGE, a key of a later event moves behind the keys that only earlier events
      // have; ASSIGN keeps the place of a key the state had before the chunk.
      if ((fresh.size > 0 && fresh.has(target)) || (added.size > 0 && added.get(target)?.has(key))) {
        delete target[key];
        target[key] = value;
      } else if (!Object.is(value, current)) target[key] = value;
    }
  };

  for (let start = 0; start < eventlog.length; start += size) {
    const end = Math.min(start + size, eventlog.length);
    let from = start;
    for (let i = start; i < end; i++) {
      const data = (eventlog[i] as StateEvent).data;
      if (data !== undefined && !isPlainObject(data)) from = i + 1;
    }
    wiped = false;
    takenAsIs.clear();
    fresh.clear();
    added.clear();
    for (let i = from; i < end; i++) {
      const data = (eventlog[i] as StateEvent).data;
      if (isPlainObject(data)) assign(state, data);
    }
  }
  return state;
}

