/**
 * The client's own checks of what a caller passes, so that mistakes fail at once with the field
 * named. They apply protocol.ts's rules without zod, which keeps zod out of the browser bundle;
 * a test holds them to the zod schemas, and the gateway validates every frame with those.
 */
import { closedError, EventflowError } from './errors.js';
import { generateEventId } from './ids.js';
import { isPlainObject, jsonProblem } from './json-check.js';

// Its home is json-check.ts (which validate.ts imports, not the reverse); validate.ts is where callers look for it.
export { isPlainObject };
import type { EventInput } from './protocol.js';
import type { TraceOptions } from './client-tracing.js';

export const IDENTIFIER_MAX_LENGTH = 64;
/** Printable ASCII: v4's ascii_bin columns, and no 0x1E/0x1F, which frame v4's wire records. */
export const IDENTIFIER_CHARACTERS = /^[\x20-\x7e]*$/;

/** Why `value` is not an identifier, or undefined when it is one. Messages match the zod schema's. */
export function identifierProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length === 0) return 'must not be empty';
  if (value.length > IDENTIFIER_MAX_LENGTH) return `must be at most ${IDENTIFIER_MAX_LENGTH} characters`;
  if (!IDENTIFIER_CHARACTERS.test(value)) return 'must contain printable ASCII characters only';
  // ascii_bin is PAD SPACE: 'a' and 'a ' would be the same key in MySQL.
  if (value.endsWith(' ')) return 'must not end with a space';
  return undefined;
}

export function assertIdentifier(value: unknown, field: string): asserts value is string {
  const problem = identifierProblem(value);
  if (problem) throw invalid(`${field}: ${problem}`);
}

const eventKeys = 'id domain name pid data rid'.split(' ');

/** Checks a publish/persist/schedule argument; data must be a plain JSON object. */
export function assertEventInput(event: unknown): asserts event is EventInput {
  if (!isPlainObject(event)) throw invalid('event: must be an object');
  const unknown = Object.keys(event).filter((key) => !eventKeys.includes(key));
  if (unknown.length > 0) throw invalid(`event: unrecognized key${unknown.length > 1 ? 's' : ''}: ${unknown.map((key) => JSON.stringify(key)).join(', ')}`);
  for (const field of 'domain name pid'.split(' ')) assertIdentifier(event[field], `event.${field}`);
  for (const field of ['id', 'rid'] as const) if (event[field] !== undefined) assertIdentifier(event[field], `event.${field}`);
  if (event.data !== undefined && !isPlainObject(event.data)) throw invalid('event.data: must be a JSON object');
  const problem = jsonProblem(event.data, 'event.data');
  if (problem) throw invalid(problem);
}

/**
 * The checked event, with its id (generated unless it has one) and the trace context `trace` gives
 * (the options' `traceparent` and `tracestate`; undefined ones do not reach the wire): what publish
 * and request send. The gateway checks the trace context (PROTOCOL.md › Event input), naming the
 * field; it is not checked here, so that browsers that never give one ship no W3C rules.
 */
export function withId(event: Partial<EventInput>, { traceparent, tracestate }: TraceOptions = {}): EventInput & { id: string } {
  assertEventInput(event);
  return { ...event, id: event.id ?? generateEventId(), traceparent, tracestate };
}

/** An object made by `{}`, JSON.parse or Object.create(null): not an array, not a class instance. */

export const invalid = (message: string, details?: Record<string, unknown>): EventflowError => new EventflowError('E_EVENTFLOW_INVALID_INPUT', message, { details });

/** Refuses new work of a closed client (E_EVENTFLOW_CLIENT_CLOSED) and checks a registration's domain and its `field`. */
export function assertRegistrable(closed: unknown, domain: string, value: string, field: string): void {
  if (closed) throw closedError();
  assertIdentifier(domain, 'domain');
  assertIdentifier(value, field);
}

/** Event names of a wait, a filtered read or a pattern subscription: a non-empty array of identifiers. */
export function assertNames(names: unknown): asserts names is string[] {
  if (!Array.isArray(names) || !names.length) throw invalid('names: must be a non-empty array of event names');
  names.forEach((name, i) => assertIdentifier(name, `names.${i}`));
}
