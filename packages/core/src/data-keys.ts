/**
 * Keys that event data may not hold. JSON.parse makes `"__proto__"` an own key, but everything that
 * copies an object by assignment (`out[key] = value`: zod, object spread targets, caches, state
 * folds) sets the copy's prototype instead, so the key would vanish from the stored event (or, in
 * careless code, pollute a prototype). Such data is refused, naming the path, rather than dropped.
 * `constructor` and `prototype` are ordinary own keys on assignment and stay plain data.
 */

/** The one key whose assignment changes an object's prototype instead of adding a property. */
export const FORBIDDEN_DATA_KEY = '__proto__';

export const forbiddenKeyMessage = `"${FORBIDDEN_DATA_KEY}" cannot be a key of event data (JavaScript reads it as the object's prototype); rename it`;

interface Step {
  readonly value: unknown;
  readonly key: string | number | undefined;
  readonly parent: Step | undefined;
}

/**
 * The path (keys and array indexes) of the first own `__proto__` key in `value`, or undefined when
 * there is none. Iterative with parent links (the path is built only when found), so that deep
 * nesting costs neither stack nor a copy of the path per level.
 */
export function forbiddenKeyPath(value: unknown): Array<string | number> | undefined {
  const stack: Step[] = [{ value, key: undefined, parent: undefined }];
  for (let step = stack.pop(); step; step = stack.pop()) {
    const current = step.value;
    if (current === null || typeof current !== 'object') continue;
    if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--) stack.push({ value: current[index], key: index, parent: step });
      continue;
    }
    if (Object.hasOwn(current, FORBIDDEN_DATA_KEY)) return [...pathOf(step), FORBIDDEN_DATA_KEY];
    const record = current as Record<string, unknown>;
    const keys = Object.keys(record);
    for (let index = keys.length - 1; index >= 0; index--) {
      const key = keys[index] as string;
      stack.push({ value: record[key], key, parent: step });
    }
  }
  return undefined;
}

function pathOf(step: Step): Array<string | number> {
  const path: Array<string | number> = [];
  for (let at: Step | undefined = step; at?.key !== undefined; at = at.parent) path.push(at.key);
  return path.reverse();
}
