/**
 * The protocol's building blocks (protocol.ts): identifiers, JSON data, positions, trace context,
 * the event as a client sends it and as the gateway stores it, and the small schemas operations
 * share. Apart so that protocol.ts holds the operations and the frames.
 */
import * as z from 'zod/mini';
import { forbiddenKeyMessage, forbiddenKeyPath } from './data-keys.js';
import { namespacePatternProblem } from './namespace-pattern.js';
import { TRACEPARENT, TRACESTATE_MAX_LENGTH } from './trace-context.js';

/**
 * `make`'s value, made at the first call and the same one from then on. The protocol has hundreds of
 * schemas, each some µs to build, and a process uses few of them: a gateway checks the params of
 * the operations its clients send and reads no result schema (bench/README.md › start).
 */
export function once<T extends object>(make: () => T): () => T {
  let made: T | undefined;
  return () => (made ??= make());
}

/** An operation's schemas, each built when first read (`once`). */
export function operation<P extends object, R extends object>(params: () => P, result: () => R): { readonly params: P; readonly result: R } {
  const builtParams = once(params);
  const builtResult = once(result);
  return {
    get params() {
      return builtParams();
    },
    get result() {
      return builtResult();
    },
  };
}

/**
 * v4 stores ids, domains, names and pids in VARCHAR(64) ascii_bin columns and frames them with
 * 0x1E/0x1F separators. Printable ASCII excludes those separators; a trailing space is refused
 * because ascii_bin is PAD SPACE, so 'a' and 'a ' would collide in MySQL.
 */
export const identifier = z.string({ error: 'must be a string' }).check(
  z.minLength(1, { error: 'must not be empty' }),
  z.maxLength(64, { error: 'must be at most 64 characters' }),
  z.regex(/^[\x20-\x7e]*$/, { error: 'must contain printable ASCII characters only' }),
  z.refine((value: string) => !value.endsWith(' '), { error: 'must not end with a space' }),
);

export const jsonValue = z.json();
export type JsonValue = z.infer<typeof jsonValue>;
/** Event data as publishers send it: refused (naming the path) rather than losing a `__proto__` key (data-keys.ts). */
export const jsonObject = z.pipe(
  z.unknown().check(
    z.superRefine((value, context) => {
      const path = forbiddenKeyPath(value);
      if (path) context.addIssue({ code: 'custom', message: forbiddenKeyMessage, path, input: value });
    }),
  ),
  z.record(z.string(), jsonValue, { error: 'must be a JSON object' }),
);
export type JsonObject = z.infer<typeof jsonObject>;

/** A non-negative safe integer (`z.number().int().nonnegative()`). */
export const count = () => z.int().check(z.nonnegative());

/** A store-assigned, strictly increasing number that orders events for resuming and caching. */
export const position = count();
export type Position = z.infer<typeof position>;

export const isoTimestamp = z.iso.datetime({ offset: true, error: 'must be an ISO-8601 date-time' });

/**
 * zod/mini has no locale built in: an issue without a message of its own reads "Invalid input"
 * unless the parse is given an error map (the gateway parses with zod's English locale). The two
 * issues an event object itself can raise get the English locale's exact words here, so that the
 * client's own check of `publish()` input fails with the same message everywhere.
 */
export const objectIssue = (issue: z.core.$ZodRawIssue): string =>
  issue.code === 'unrecognized_keys'
    ? `Unrecognized key${issue.keys.length > 1 ? 's' : ''}: ${z.util.joinValues(issue.keys, ', ')}`
    : `Invalid input: expected object, received ${receivedType(issue.input)}`;

/** The English locale's name for the type of an input. */
function receivedType(input: unknown): string {
  const type = z.util.parsedType(input);
  return type === 'nan' ? 'NaN' : type === 'number' && !Number.isFinite(input) ? String(input) : type;
}

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): `traceparent` of version 00 (the only one
 * defined: a later version's longer form is refused rather than cut), lowercase hex, trace and span ids
 * not all zeros. The regular expression is trace-context.ts's, which the clients check with.
 */
export const traceparent = z.string({ error: 'must be a string' }).check(
  z.regex(TRACEPARENT, { error: 'must be a W3C traceparent: 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, ids not all zeros' }),
);
/** `tracestate`: at most 512 printable ASCII characters (the W3C list of vendor entries, kept as sent). */
export const tracestate = z.string({ error: 'must be a string' }).check(
  z.maxLength(TRACESTATE_MAX_LENGTH, { error: `must be at most ${TRACESTATE_MAX_LENGTH} characters` }),
  z.regex(/^[\x20-\x7e]*$/, { error: 'must contain printable ASCII characters only' }),
);

/**
 * What a publisher sends. The store sets timestamp and position; `id` makes retries idempotent.
 * `traceparent`/`tracestate`: the trace context of whoever published it (clients take it from
 * OpenTelemetry's active span, or from the publish options); stored with the event and returned
 * with it. A `tracestate` without a `traceparent` is refused.
 */
export const eventInput = z.strictObject(
  {
    id: z.optional(identifier),
    domain: identifier,
    name: identifier,
    pid: identifier,
    data: z.optional(jsonObject),
    rid: z.optional(identifier),
    traceparent: z.optional(traceparent),
    tracestate: z.optional(tracestate),
  },
  { error: objectIssue },
);
export type EventInput = z.infer<typeof eventInput>;
/** A `tracestate` needs the `traceparent` it belongs to (W3C: a receiver drops it otherwise). */
export const tracedEventInput = eventInput.check(
  z.refine((event) => event.tracestate === undefined || event.traceparent !== undefined, { error: 'tracestate needs a traceparent', path: ['tracestate'] }),
);

/**
 * A stored event. `data` is any JSON value because events written by v4 spokes into a shared
 * database are not guaranteed to hold objects.
 */
export const storedEvent = z.object({
  id: z.string(),
  domain: z.string(),
  name: z.string(),
  pid: z.string(),
  data: jsonValue,
  timestamp: z.string(),
  rid: z.nullable(z.string()),
  position: position,
  /** The publisher's W3C trace context, when it sent one (absent otherwise, and on events of v4 spokes). */
  traceparent: z.optional(z.string()),
  tracestate: z.optional(z.string()),
});
export type StoredEvent = z.infer<typeof storedEvent>;

export const events = z.object({ events: z.array(storedEvent) });
export const empty = z.object({});
export const deleted = z.object({ deleted: z.boolean() });
export const appended = z.object({ id: z.string(), position: position, timestamp: z.string() });
/**
 * publish/persist params. `expectedVersion` (optimistic concurrency): the number of events the
 * eventlog of (event.domain, event.pid) must hold, unfired scheduled events not counted, for the
 * event to be stored; otherwise E_EVENTFLOW_VERSION_CONFLICT. An idempotent retry is not checked.
 */
export const write = z.strictObject({ event: tracedEventInput, expectedVersion: z.optional(count()) });
/** Positions let a resuming client skip what it already has; `head` is the newest stored position. */
export const registered = z.object({ head: position });

/** A client-chosen handle for a consumer or wait, unique within one connection. */
export const handle = z.string().check(z.minLength(1), z.maxLength(64));

/** 1..max identifiers naming events. */
export const eventNames = (max: number) =>
  z.array(identifier).check(z.minLength(1, { error: 'must name at least one event' }), z.maxLength(max));

/** A namespace pattern (namespace-pattern.ts): `*` one dot-separated token, `>` one or more trailing ones. */
export const namespacePattern = z.string({ error: 'must be a string' }).check(
  z.superRefine((value: string, context) => {
    const problem = namespacePatternProblem(value);
    if (problem !== undefined) context.addIssue({ code: 'custom', message: problem, input: value });
  }),
);

/** A pid pattern: `*` matches any run of characters (the empty one too), anything else itself. */
export const pidPattern = z.string({ error: 'must be a string' }).check(
  z.minLength(1, { error: 'must not be empty' }),
  z.maxLength(64, { error: 'must be at most 64 characters' }),
  z.regex(/^[\x20-\x7e]*$/, { error: 'must contain printable ASCII characters only' }),
  z.refine((value: string) => !value.endsWith(' '), { error: 'must not end with a space' }),
);
