/**
 * Composed process state: v4's `composeEventlogState` (eventflow-v4.md §8.12) with exactly its
 * results, plus `applyEvent` for live views that must not re-fold the whole log per event.
 *
 * Every result is deeply frozen and built with immer, so a view can compare subtrees by identity.
 * Only `.data` of an event is read; input events are never mutated and never shared with the
 * result (Dates, Maps and Sets included), because the caller may keep and reuse them.
 */
import { Immer, freeze } from 'immer';
import { invalid, isPlainObject } from './validate.js';

// SERDE-decoded data (v4 §5) can hold Maps and Sets. They are merged outside the draft (see
// assignInto) and only assigned into it, so immer never drafts one and its MapSet plugin, a
// kilobyte of every browser bundle, is not needed.

// A private instance (auto-freezing, immer's default): a global setAutoFreeze(false) elsewhere in
// the app must not unfreeze states.
const immer = new Immer();

export type State = Readonly<Record<string, unknown>>;

/** Only `data` is read, so a `StoredEvent` (or a decoded v4 row) fits. */
export interface StateEvent {
  readonly data: unknown;
}

export const emptyState: State = Object.freeze({});

type Plain = Record<string, unknown>;

// JSON.parse makes "__proto__" an own key. Writing it back with `obj[k] = v` (as immer drafts do)
// would swap the prototype, and reading a missing one walks into Object.prototype; v4 could even
// pollute it. Such keys are dropped instead.
function keysOf(value: Plain): string[] {
  return Object.keys(value).filter((key) => key !== '__proto__');
}

/** v4's clone: a structural copy. Anything immer cannot freeze is at least copied when known. */
function clone(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(clone);
  if (isPlainObject(value)) return Object.fromEntries(keysOf(value).map((key) => [key, clone(value[key])]));
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

/** MERGEs the data of a chunk (never empty) from left to right; the result shares nothing with it. */
const mergeChunk = (chunk: ReadonlyArray<StateEvent>): unknown => clone(chunk.map((event) => event.data).reduce((merged, data) => merge(merged, data)));

/** Keeps the old array or Set (and its identity) when a union added nothing and collapsed nothing. */
function unchanged(current: unknown, merged: unknown): boolean {
  if (Array.isArray(current) && Array.isArray(merged)) {
    return merged.length === current.length && merged.every((item, i) => Object.is(item, current[i]));
  }
  if (current instanceof Set && merged instanceof Set) return merged.size === current.size;
  return Object.is(current, merged);
}

/**
 * v4's ASSIGN, run on an immer draft. Values are read from `base` (the frozen previous state)
 * rather than from the draft, so only the path that actually changes gets drafted: the cost is
 * proportional to `update`, not to the state. Each path is visited once per call, so `base` is
 * always up to date.
 */
function assignInto(draft: Plain, base: Readonly<Plain>, update: Readonly<Plain>): void {
  for (const key of keysOf(update)) {
    const next = update[key];
    const current = base[key];
    if (!Object.hasOwn(base, key)) draft[key] = next; // taken as is: an array here is not de-duplicated, as in v4
    else if (isPlainObject(current) && isPlainObject(next)) assignInto(draft[key] as Plain, current, next);
    else {
      // On an existing key ASSIGN equals MERGE: arrays and Sets unite (existing items first),
      // Maps merge by key, `undefined` keeps the old value, anything else overwrites.
      const merged = merge(current, next);
      if (!unchanged(current, merged)) draft[key] = merged;
    }
  }
}

function assignState(state: State, update: unknown): State {
  // A non-object chunk result is silently ignored, as in v4.
  if (!isPlainObject(update)) return state;
  freeze(update, true);
  return immer.produce(state, (draft) => {
    assignInto(draft, state, update);
  });
}

/**
 * Folds an event log into a state with v4's exact semantics (§8.12): consecutive chunks of
 * `size` events are MERGEd, then each chunk result is ASSIGNed into the state. Unlike v4, which
 * loops forever, a `size` that is not a positive integer throws E_EVENTFLOW_INVALID_INPUT.
 */
export function composeEventlogState(eventlog: ReadonlyArray<StateEvent>, size = 10): State {
  if (!Number.isInteger(size) || size < 1) {
    throw invalid(`composeEventlogState: size must be a positive integer, got ${typeof size === 'number' ? size : typeof size}`, { size });
  }
  // A full fold owns every object it builds (each chunk's merge is a fresh clone), so it assigns in
  // place and freezes once; immer's copy-on-write pays off for applyEvent's steps on a shared state.
  // v4's trailing empty chunk merges to undefined, which ASSIGN ignores, so it is skipped.
  const state: Plain = {};
  for (let start = 0; start < eventlog.length; start += size) {
    const update = mergeChunk(eventlog.slice(start, start + size));
    // A non-object chunk result is silently ignored, as in v4.
    if (isPlainObject(update)) assignInto(state, state, update);
  }
  return Object.keys(state).length > 0 ? freeze(state, true) : emptyState;
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
  return assignState(state, clone(event.data));
}

/** Deep-freezes a state built elsewhere (e.g. read back from storage) the way core freezes its own. */
export const freezeState = <S extends State>(state: S): S => freeze(state, true);
