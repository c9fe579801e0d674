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

/**
 * The path (keys and array indexes) of the first own `__proto__` key in `value`, or undefined when
 * there is none. Iterative, so that deep nesting cannot overflow the stack here.
 */
export function forbiddenKeyPath(value: unknown): Array<string | number> | undefined {
  const stack: Array<{ value: unknown; path: Array<string | number> }> = [{ value, path: [] }];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const current = item.value;
    if (current === null || typeof current !== 'object') continue;
    if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--) stack.push({ value: current[index], path: [...item.path, index] });
      continue;
    }
    if (Object.hasOwn(current, FORBIDDEN_DATA_KEY)) return [...item.path, FORBIDDEN_DATA_KEY];
    const record = current as Record<string, unknown>;
    const keys = Object.keys(record);
    for (let index = keys.length - 1; index >= 0; index--) {
      const key = keys[index] as string;
      stack.push({ value: record[key], path: [...item.path, key] });
    }
  }
  return undefined;
}
