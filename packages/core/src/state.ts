/**
 * Composed process state: v4's `composeEventlogState` (eventflow-v4.md §8.12) with exactly its
 * results, plus `applyEvent` for live views that must not re-fold the whole log per event.
 *
 * Every result is deeply frozen, and `applyEvent` copies only the path it changes, so a view can
 * compare subtrees by identity. Only `.data` of an event is read; input events are never mutated
 * and never shared with the result (Dates, Maps and Sets included), because the caller may keep
 * and reuse them.
 */
import { invalid, isPlainObject } from './validate.js';

export type State = Readonly<Record<string, unknown>>;

/** Only `data` is read, so a `StoredEvent` (or a decoded v4 row) fits. */
export interface StateEvent {
  readonly data: unknown;
}

export const emptyState: State = Object.freeze({});

type Plain = Record<string, unknown>;

const isObject = (value: unknown): value is object => typeof value === 'object' && value !== null;

// JSON.parse makes "__proto__" an own key. Writing it back with `obj[k] = v` would swap the
// prototype, and reading a missing one walks into Object.prototype; v4 could even pollute it.
// Such keys are dropped instead.
const keysOf = (value: object): string[] => Object.keys(value).filter((key) => key !== '__proto__');

function mutateFrozen(): never {
  throw new TypeError('eventflow: a composed state is frozen');
}

/**
 * Deep freeze of what a state can hold. Like Object.freeze it stops at frozen values (shared
 * subtrees of an earlier state are frozen already); Map and Set methods are locked too, which
 * Object.freeze alone does not do. Class instances (kept by reference) are left alone.
 */
function deepFreeze<T>(value: T): T {
  if (!isObject(value) || Object.isFrozen(value)) return value;
  const collection = value instanceof Map || value instanceof Set;
  if (!collection && !Array.isArray(value) && !isPlainObject(value)) return value;
  if (collection) {
    const locked = { value: mutateFrozen };
    Object.defineProperties(value, { set: locked, add: locked, clear: locked, delete: locked });
  }
  Object.freeze(value);
  for (const item of collection ? value.values() : Object.values(value)) deepFreeze(item);
  return value;
}

/** v4's clone: a structural copy. Anything that cannot be frozen in depth is at least copied when known. */
function clone(value: unknown): unknown {
  if (!isObject(value)) return value;
  if (Array.isArray(value)) return value.map(clone);
  if (isPlainObject(value)) {
    const out: Plain = {};
    for (const key of keysOf(value)) out[key] = clone(value[key]);
    return out;
  }
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [clone(k), clone(v)]));
  if (value instanceof Set) return new Set([...value].map(clone));
  // Freezing a Date does not stop setTime(); the copy is what protects the caller's Date.
  if (value instanceof Date) return Object.freeze(new Date(value.getTime()));
  if (value instanceof Error) {
    // A real Error (not Object.create) so the copy keeps its internal slot and stays an Error.
    const copy = Object.defineProperties(new Error(), Object.getOwnPropertyDescriptors(value));
    return Object.freeze(Object.setPrototypeOf(copy, Object.getPrototypeOf(value) as object));
  }
  // Other class instances cannot come out of JSON or SERDE; they are kept by reference.
  return value;
}

/**
 * v4's MERGE. Pure, but the result may share sub-values with `a` and `b` (the chunk result is
 * cloned once at the end), so arrays de-duplicate objects by reference exactly like v4 does.
 */
function merge(a: unknown, b: unknown): unknown {
  if (b === undefined || Object.is(a, b)) return a;
  if (Array.isArray(a) && Array.isArray(b)) return [...new Set([...a, ...b])];
  if (isPlainObject(a) && isPlainObject(b)) {
    const out: Plain = {};
    for (const key of keysOf(a)) if (!Object.hasOwn(b, key)) out[key] = a[key];
    for (const key of keysOf(b)) out[key] = Object.hasOwn(a, key) ? merge(a[key], b[key]) : b[key];
    return out;
  }
  if (a instanceof Set && b instanceof Set) return new Set([...a, ...b]);
  if (a instanceof Map && b instanceof Map) {
    const out = new Map<unknown, unknown>(a);
    for (const [key, value] of b) out.set(key, out.has(key) ? merge(out.get(key), value) : value);
    return out;
  }
  return b;
}

/** Arrays made by a union, or found free of duplicates by one, that nothing mutates. */
const unique = new WeakSet<unknown[]>();

/**
 * v4's ASSIGN of one key that exists in the target: there it equals MERGE (arrays and Sets
 * unite, existing items first; Maps merge by key; `undefined` keeps the old value; anything else
 * overwrites). The old array or Set (and its identity) is kept when the union added and collapsed
 * nothing.
 */
function assigned(current: unknown, next: unknown): unknown {
  if (Array.isArray(current) && Array.isArray(next)) {
    // Most unions of a live state add nothing; that is decided without building a Set when the
    // state array is known to hold no duplicates (a union made it, and it is frozen since).
    if (unique.has(current) && next.every((item) => !isObject(item) && current.includes(item))) return current;
    const merged = [...new Set([...current, ...next])];
    const result = merged.length === current.length && merged.every((item, i) => Object.is(item, current[i])) ? current : merged;
    if (result === merged || Object.isFrozen(current)) unique.add(result);
    return result;
  }
  const merged = merge(current, next);
  return current instanceof Set && merged instanceof Set && merged.size === current.size ? current : merged;
}

/** v4's ASSIGN by mutation, for the exact (chunked) fold. An array taken as a new key is not de-duplicated, as in v4. */
function assignInto(state: Plain, update: Readonly<Plain>): void {
  for (const key of keysOf(update)) {
    const next = update[key];
    const current = state[key];
    if (!Object.hasOwn(state, key)) state[key] = next;
    else if (isPlainObject(current) && isPlainObject(next)) assignInto(current, next);
    else state[key] = assigned(current, next);
  }
}

/** v4's algorithm as written: MERGE each chunk, clone it, ASSIGN it. Exact for every input. */
function foldChunks(eventlog: ReadonlyArray<StateEvent>, size: number, state: Plain = {}): Plain {
  for (let start = 0; start < eventlog.length; start += size) {
    const update = clone(eventlog.slice(start, start + size).map((event) => event.data).reduce(merge));
    // A non-object chunk result is silently ignored, as in v4. (So is v4's trailing empty chunk.)
    if (isPlainObject(update)) assignInto(state, update);
  }
  return state;
}

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
function foldDirect(eventlog: ReadonlyArray<StateEvent>, size: number, state: Plain = {}): Plain {
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

/**
 * Folds an event log into a state with v4's exact semantics (§8.12): consecutive chunks of
 * `size` events are MERGEd, then each chunk result is ASSIGNed into the state. Unlike v4, which
 * loops forever, a `size` that is not a positive integer throws E_EVENTFLOW_INVALID_INPUT.
 *
 * `from` continues a fold: `composeEventlogState(tail, size, composeEventlogState(head, size))`
 * equals `composeEventlogState([...head, ...tail], size)` when `head.length` is a multiple of
 * `size` (chunks then fall where the whole fold puts them). The gateway's snapshots rely on it.
 */
export function composeEventlogState(eventlog: ReadonlyArray<StateEvent>, size = 10, from?: State): State {
  if (!Number.isInteger(size) || size < 1) {
    throw invalid(`composeEventlogState: size must be a positive integer, got ${typeof size === 'number' ? size : typeof size}`, { size });
  }
  // Both folds mutate their state: each starts from its own copy of `from`.
  const start = (): Plain => (from === undefined ? {} : (clone(from) as Plain));
  let state: Plain;
  try {
    state = foldDirect(eventlog, size, start());
  } catch (error) {
    if (error !== NOT_DIRECT) throw error;
    state = foldChunks(eventlog, size, start());
  }
  return Object.keys(state).length > 0 ? deepFreeze(state) : emptyState;
}

/** ASSIGN without mutation: copies the objects on the changed paths only, and freezes them. */
function assignCopy(base: Readonly<Plain>, update: Readonly<Plain>): Readonly<Plain> {
  let out: Plain | undefined;
  for (const key of keysOf(update)) {
    const next = update[key];
    const current = base[key];
    const has = Object.hasOwn(base, key);
    // A one-event chunk is cloned before ASSIGN; only what is taken from it needs the copy.
    const value = !has ? clone(next) : isPlainObject(current) && isPlainObject(next) ? assignCopy(current, next) : assigned(current, clone(next));
    if (!has || !Object.is(value, current)) (out ??= { ...base })[key] = deepFreeze(value);
  }
  return out ? Object.freeze(out) : base;
}

/**
 * Applies one event to a state in O(size of the event's data), plus the length of any array, Set
 * or Map it unites with, never O(state). Unchanged subtrees keep their identity, and the input
 * state itself is returned when nothing changes.
 *
 * This is `composeEventlogState` with chunk size 1 continued from `state`, so folding it over a log
 * always equals `composeEventlogState(log, 1)`. It equals the default size 10 too when every
 * event's data is a plain object and no path switches between object, array and other values.
 * Otherwise v4's result depends on where chunk boundaries fall, which one event at a time cannot
 * know: a non-object data wipes what its chunk merged before it, and a replacement inside a chunk
 * (`{a:{x:1}}` | `{a:null}`, `{a:{y:2}}`) is lost because only the chunk's final value is ASSIGNed
 * (`{a:{x:1,y:2}}` instead of `{a:{y:2}}`). applyEvent follows the size-1 semantics there.
 */
export function applyEvent(state: State, event: StateEvent): State {
  // A non-object data is silently ignored, as in v4.
  return isPlainObject(event.data) ? assignCopy(state, event.data) : state;
}

/** Deep-freezes a state built elsewhere (e.g. read back from storage) the way core freezes its own. */
export const freezeState = <S extends State>(state: S): S => deepFreeze(state);
