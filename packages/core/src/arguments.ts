/**
 * Checks of the arguments a caller passes besides events and identifiers (validate.ts): callbacks,
 * signals, durations, counts and URLs. A wrong type fails at the call with E_EVENTFLOW_INVALID_INPUT
 * naming the argument, instead of later and elsewhere ("listener is not a function", a NaN timer).
 */
import { EventflowError } from './errors.js';
import { invalid } from './validate.js';

const refuse = (field: string, expected: string, value: unknown): never => {
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

/** An optional number of at least `min`: of milliseconds (finite), or an integer. */
export function assertNumber(value: unknown, field: string, integer = false, min = 0): void {
  if (value !== undefined && !(typeof value === 'number' && value >= min && (integer ? Number.isSafeInteger(value) : value < Infinity))) {
    refuse(field, integer ? `an integer ≥ ${min}` : 'a number of ms ≥ 0', value);
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
