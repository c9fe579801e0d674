// A plain-JS re-implementation of eventflow v4's composeEventlogState (spec §8.12), the baseline
// of bench/compose.mjs. Written the straightforward way v4's @superhero/deep does it: MERGE the
// chunk's data left to right (pure, recursive, new arrays/objects), deep-clone the chunk result,
// then ASSIGN it into the state by recursive mutation. No immer, no structural sharing.

const isPlainObject = (v) => {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/** Deep clone: arrays, plain objects, Dates, Maps, Sets; frozen/sealed status preserved. */
export function clone(v) {
  let out;
  if (Array.isArray(v)) out = v.map(clone);
  else if (v instanceof Date) return new Date(v.getTime());
  else if (v instanceof Map) out = new Map([...v].map(([k, x]) => [k, clone(x)]));
  else if (v instanceof Set) out = new Set([...v].map(clone));
  else if (isPlainObject(v)) {
    out = Object.create(Object.getPrototypeOf(v));
    for (const k of Object.keys(v)) out[k] = clone(v[k]);
  } else return v;
  if (Object.isFrozen(v)) Object.freeze(out);
  else if (Object.isSealed(v)) Object.seal(out);
  return out;
}

/**
 * MERGE(a, b): pure, returns a new value. "The same value" (§8.12) is SameValue, Object.is, as in
 * @superhero/deep (`===` would keep 0 over a later -0). "Keys that exist only in a" are own keys:
 * with `k in b`, a data key named like an Object.prototype member ("constructor", "toString")
 * would vanish from the merge whenever a later object lacks it, which §8.12 does not allow.
 */
export function merge(a, b) {
  if (b === undefined) return a;
  if (Object.is(a, b)) return a;
  if (Array.isArray(a) && Array.isArray(b)) return [...new Set([...a, ...b])];
  if (isPlainObject(a) && isPlainObject(b)) {
    const out = {};
    for (const k of Object.keys(a)) if (!Object.hasOwn(b, k)) out[k] = a[k];
    for (const k of Object.keys(b)) out[k] = Object.hasOwn(a, k) ? merge(a[k], b[k]) : b[k];
    return out;
  }
  if (a instanceof Set && b instanceof Set) return new Set([...a, ...b]);
  if (a instanceof Map && b instanceof Map) {
    const out = new Map(a);
    for (const [k, v] of b) out.set(k, a.has(k) ? merge(a.get(k), v) : v);
    return out;
  }
  return b;
}

/** ASSIGN(state, m): mutates state. */
export function assign(state, m) {
  if (m === undefined || !isPlainObject(m)) return state;
  for (const k of Object.keys(m)) {
    const cur = state[k];
    const next = m[k];
    if (isPlainObject(cur) && isPlainObject(next)) assign(cur, next);
    else if (!(k in state)) state[k] = next;
    else if (Array.isArray(cur) && Array.isArray(next)) {
      const union = [...new Set([...cur, ...next])];
      cur.length = 0;
      cur.push(...union);
    } else if (cur instanceof Set && next instanceof Set) for (const x of next) cur.add(x);
    else if (cur instanceof Map && next instanceof Map) for (const [mk, mv] of next) cur.set(mk, cur.has(mk) ? merge(cur.get(mk), mv) : mv);
    else state[k] = next;
  }
  return state;
}

/** v4 composeEventlogState(eventlog, size = 10). */
export function composeEventlogStateV4(eventlog, size = 10) {
  const state = {};
  for (let i = 0; i <= eventlog.length; i += size) {
    // The last chunk may be empty (length mod size === 0): it merges to undefined, a no-op.
    const chunk = eventlog.slice(i, i + size);
    if (chunk.length === 0) {
      assign(state, undefined);
      continue;
    }
    let merged = chunk[0].data;
    for (let j = 1; j < chunk.length; j++) merged = merge(merged, chunk[j].data);
    assign(state, clone(merged));
  }
  return state;
}
