/**
 * Composed process state: v4's `composeEventlogState` (eventflow-v4.md §8.12) with exactly its
 * results, plus `applyEvent` for live views that must not re-fold the whole log per event.
 *
 * Every result is deeply frozen, and `applyEvent` copies only the path it changes, so a view can
 * compare subtrees by identity. Only `.data` of an event is read; input events are never mutated
 * and never shared with the result (Dates, Maps and Sets included, except in browser builds: see
 * state-collections.browser.ts), because the caller may keep and reuse them.
 */
import { foldDirect } from './fast-fold.js';
import { collections } from './state-collections.js';
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

/**
 * Deep freeze of what a state can hold. Like Object.freeze it stops at frozen values (shared
 * subtrees of an earlier state are frozen already); Maps and Sets are frozen with their methods
 * locked (state-collections.ts). Class instances (kept by reference) are left alone.
 */
function deepFreeze<T>(value: T): T {
  if (!isObject(value) || Object.isFrozen(value)) return value;
  if (Array.isArray(value) || isPlainObject(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  } else if (collections) collections.freeze(value, deepFreeze);
  return value;
}

/** v4's clone: a structural copy. Anything that cannot be frozen in depth is at least copied when known (state-collections.ts). */
function clone(value: unknown): unknown {
  if (!isObject(value)) return value;
  if (Array.isArray(value)) return value.map(clone);
  if (isPlainObject(value)) {
    const out: Plain = {};
    for (const key of keysOf(value)) out[key] = clone(value[key]);
    return out;
  }
  return collections ? collections.clone(value, clone) : value;
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
  return collections ? collections.merge(a, b, merge) : b;
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
  // A Set's union that added nothing is the old Set (state-collections.ts).
  return merge(current, next);
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
  // The direct fold where it is proven equal (not in browser builds: see fast-fold.browser.ts).
  const state = (foldDirect && foldDirect(eventlog, size, start())) ?? foldChunks(eventlog, size, start());
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
