/**
 * Refuses event data that JSON.stringify would not carry unchanged. Left alone, a BigInt throws a
 * raw TypeError, functions, symbols and Map contents vanish, NaN and Infinity become null, a Date
 * becomes a string, and a class instance loses its prototype: the stored event would not be what
 * the caller published. An own `__proto__` key is refused too (data-keys.ts says why), in the same
 * walk. Kept apart from validate.ts so that each stays small and one job; the messages are short
 * because this ships in every browser bundle.
 */
import { FORBIDDEN_DATA_KEY, forbiddenKeyMessage } from './data-keys.js';

/** Deeper data is refused at the client (the gateway may set a lower limit of its own). */
export const DATA_MAX_DEPTH = 256;

/**
 * Where `value` (found at `path`) stops being JSON, as "path: what is wrong", or undefined when it
 * is JSON. An `undefined` property is allowed (JSON drops it, which reads back as the same absent
 * property); `undefined` in an array, which would turn into null, is not.
 */
export function jsonProblem(value: unknown, path: string): string | undefined {
  return walk(value, [], [path]);
}

/**
 * `keys` is the path walked so far: the root's name, then object keys (strings) and array indexes
 * (numbers). The message's path is made from it only when there is a problem: building each
 * child's path as the walk went was most of the check's cost on wide data. `item`: `value` is an
 * array's (where `undefined`, or a hole, would become null).
 */
function walk(value: unknown, ancestors: object[], keys: Array<string | number>, item?: boolean): string | undefined {
  const type = typeof value;
  const object = value as object;
  const composite = type === 'object' && value !== null;
  const why =
    type === 'number' ? (Number.isFinite(value) ? '' : `${value} is not JSON (it would be stored as null)`)
    : type === 'bigint' ? 'a bigint is not JSON; pass a string or a number'
    : type === 'function' || type === 'symbol' ? `a ${type} is not JSON (it would be dropped)`
    : type === 'undefined' && item ? 'undefined in an array is not JSON (it would be stored as null)'
    : !composite ? ''
    : ancestors.includes(object) ? 'a circular reference is not JSON'
    : ancestors.length >= DATA_MAX_DEPTH ? `nested deeper than ${DATA_MAX_DEPTH} levels`
    : Array.isArray(object) || isPlainObject(object) ? (Object.getOwnPropertySymbols(object).length ? 'symbol keys are not JSON' : '')
    : `a ${(object.constructor as { name?: string } | undefined)?.name || 'class instance'} is not JSON; convert it to a plain object, array or string`;
  if (why) return `${pathOf(keys)}: ${why}`;
  if (!composite) return undefined;
  // The gateway's name for the path: dotted (`list.2.__proto__`).
  if (Object.hasOwn(object, FORBIDDEN_DATA_KEY)) return `${[...keys, FORBIDDEN_DATA_KEY].join('.')}: ${forbiddenKeyMessage}`;
  ancestors.push(object);
  let problem: string | undefined;
  const array = Array.isArray(object);
  // An array's every index, holes included; an object's own enumerable keys.
  // Array.prototype's keys, not the array's own: data may hold an array with a `keys` property of its own (JSON drops it).
  for (const key of array ? [].keys.call(object) : Object.keys(object)) {
    keys.push(key);
    problem = walk((object as Record<string | number, unknown>)[key], ancestors, keys, array);
    keys.pop();
    if (problem) break;
  }
  ancestors.pop();
  return problem;
}

/** An object made by `{}`, JSON.parse or Object.create(null): not an array, not a class instance. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** A path for a message: dotted where a key is an identifier, else bracketed; indexes bracketed. */
function pathOf(keys: ReadonlyArray<string | number>): string {
  let path = String(keys[0]);
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i] as string | number;
    path += typeof key === 'number' ? `[${key}]` : /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
  }
  return path;
}
