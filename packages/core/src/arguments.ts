/**
 * Checks of the arguments a caller passes besides events and identifiers (validate.ts): callbacks,
 * signals, durations, counts and URLs. A wrong type fails at the call with E_EVENTFLOW_INVALID_INPUT
 * naming the argument, instead of later and elsewhere ("listener is not a function", a NaN timer).
 */
import { EventflowError } from './errors.js';
import { invalid } from './validate.js';

/** Fails with E_EVENTFLOW_INVALID_INPUT: `<field>: must be <expected>, got <what it got>`. */
export const refuse = (field: string, expected: string, value: unknown): never => {
  throw invalid(`${field}: must be ${expected}, got ${typeof value === 'string' ? JSON.stringify(value) : typeof value === 'number' || value === null ? value : typeof value}`);
};

export function assertFunction(value: unknown, field: string): asserts value is (...args: never[]) => unknown {
  if (typeof value !== 'function') refuse(field, 'a function', value);
}

/** An optional callback. */
export const assertOptionalFunction = (value: unknown, field: string): void => void (value === undefined || assertFunction(value, field));

/** An optional AbortSignal (anything with `aborted` and `addEventListener`, so signals of other realms pass). */
export function assertSignal(value: unknown, field = 'signal'): void {
  const signal = value as { aborted?: unknown; addEventListener?: unknown } | undefined;
  if (value !== undefined && (typeof signal?.aborted !== 'boolean' || typeof signal.addEventListener !== 'function')) refuse(field, 'an AbortSignal', value);
}

/**
 * An options object with only `known` keys: a misspelt option (`concurrancy`, `timout`) would
 * otherwise be ignored without a word, and the call run with the default it meant to change.
 */
export function assertKeys(value: unknown, field: string, known: readonly string[]): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) refuse(field, `an object with any of ${known.join(', ')}`, value);
  const unknown = Object.keys(value as object).filter((key) => !known.includes(key));
  if (unknown.length) throw invalid(`${field}: unrecognized key${unknown.length > 1 ? 's' : ''} ${unknown.map((key) => JSON.stringify(key)).join(', ')}; known: ${known.join(', ')}`);
}

/**
 * An optional number of at least `min`: of milliseconds, or an integer. Milliseconds stop below 2³¹:
 * a timer given more fires at once (Node and browsers), so a huge timeout would time out at once.
 */
export function assertNumber(value: unknown, field: string, integer = false, min = 0): void {
  if (value !== undefined && !(typeof value === 'number' && value >= min && (integer ? Number.isSafeInteger(value) : value < 2 ** 31))) {
    refuse(field, integer ? `an integer ≥ ${min}` : 'a number of ms from 0 to 2147483647', value);
  }
}

/**
 * A WebSocket URL: a bad one would otherwise fail every reconnect attempt forever. http(s) and
 * relative URLs pass where the platform WebSocket takes them (browsers resolve them against the page).
 */
export function assertUrl(url: unknown): void {
  const base = (globalThis as { location?: { href?: string } }).location?.href;
  if (!((typeof url === 'string' || url instanceof URL) && URL.canParse(url, base) && /^(wss?|https?):$/.test(new URL(url, base).protocol))) {
    refuse('url', 'a ws:// or wss:// URL such as "ws://127.0.0.1:8080/"', url);
  }
}

/** A date argument as ISO-8601 (what the gateway takes), or E_EVENTFLOW_INVALID_DATE naming `field`. */
export function toIso(value: unknown, field: string): string {
  // new Date(null) is 1970 and new Date(true) 1 ms after: only the three documented types are dates.
  const date = value instanceof Date || typeof value === 'number' || typeof value === 'string' ? new Date(value) : new Date(NaN);
  if (Number.isNaN(date.getTime())) {
    throw new EventflowError('E_EVENTFLOW_INVALID_DATE', `${field}: ${JSON.stringify(value)} is not a date; pass a Date, epoch ms or ISO-8601 with an offset`);
  }
  return date.toISOString();
}
