/**
 * What composeEventlogState and applyEvent (state.ts) do with the values JSON has no form for:
 * Maps, Sets, Dates and Errors, as v4's SERDE decodes them (and as an application may hold in
 * memory). Browser builds replace this module with state-collections.browser.ts (the package's
 * "browser" field): every event a browser folds comes from JSON (the gateway's frames, the
 * outbox's checked data, the cache), so this code would only weigh on the bundle.
 */

/** The steps of state.ts that differ for such values; each gets state.ts's own recursion. */
export interface Collections {
  /** A copy of a value that is neither an array nor a plain object (class instances: the value itself). */
  clone(value: object, clone: (value: unknown) => unknown): unknown;
  /** MERGE where `a` and `b` are not both arrays or plain objects: Sets unite, Maps merge by key, anything else is `b`. */
  merge(a: unknown, b: unknown, merge: (a: unknown, b: unknown) => unknown): unknown;
  /** Deep-freezes a Map or a Set (its mutators locked too); other values are left alone. */
  freeze(value: object, freeze: (value: unknown) => unknown): void;
}

function mutateFrozen(): never {
  throw new TypeError('eventflow: a composed state is frozen');
}

export const collections: Collections | undefined = {
  clone(value, clone) {
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
  },

  merge(a, b, merge) {
    if (a instanceof Set && b instanceof Set) {
      // A union that adds nothing keeps the old Set (and its identity, for applyEvent's views).
      const union = new Set([...a, ...b]);
      return union.size === a.size ? a : union;
    }
    if (a instanceof Map && b instanceof Map) {
      const out = new Map<unknown, unknown>(a);
      for (const [key, value] of b) out.set(key, out.has(key) ? merge(out.get(key), value) : value);
      return out;
    }
    return b;
  },

  // Object.freeze alone leaves a Map's or a Set's methods working.
  freeze(value, freeze) {
    if (!(value instanceof Map || value instanceof Set)) return;
    const locked = { value: mutateFrozen };
    Object.defineProperties(value, { set: locked, add: locked, clear: locked, delete: locked });
    Object.freeze(value);
    for (const item of value.values()) freeze(item);
  },
};
