/**
 * The eventflow WebSocket protocol: every frame in both directions, as zod/mini schemas.
 * This file (with its parts: protocol-base.ts, the event and the shared schemas; protocol-catalog.ts
 * and protocol-work.ts, operations; protocol-server-frames.ts, the gateway's frames) is the single
 * source of truth; every other module imports the inferred types.
 * PROTOCOL.md documents each frame with an example.
 *
 * Published as `@eventflow/core/protocol`, for servers and tools. The package's main entry
 * re-exports only its types (`import type`): zod's top-level schema calls are not known to be
 * pure, so any bundler that reaches this module keeps them, and zod with them (~40 kB minified).
 * The client checks its input with validate.ts instead.
 *
 * Requests are two-level on purpose: the envelope (`type`, `id`, `op`) is parsed first, so an
 * error reply can always carry the request id even when the operation's params are invalid.
 */
import * as z from 'zod/mini';
import { catalogOperations } from './protocol-catalog.js';
import { workOperations } from './protocol-work.js';
import {
  identifier,
  count,
  position,
  isoTimestamp,
  tracedEventInput,
  storedEvent,
  events,
  empty,
  deleted,
  appended,
  write,
  registered,
  handle,
  eventNames,
  namespacePattern,
  pidPattern,
  operation,
} from './protocol-base.js';

export { PROTOCOL_VERSION } from './protocol-version.js';
/** For servers' own checks of event data (the gateway's fast frame path). */
export { FORBIDDEN_DATA_KEY } from './data-keys.js';
export { identifier, jsonValue, jsonObject, position, traceparent, tracestate, eventInput, storedEvent } from './protocol-base.js';
export type { JsonValue, JsonObject, Position, EventInput, StoredEvent } from './protocol-base.js';

/**
 * Every request operation: its params and its result, each schema built when first read
 * (`operation`), so that importing the protocol builds none of them.
 */
export const operations = {
  publish: operation(
    /** `requireConsumer`: refuse with E_EVENTFLOW_NO_CONSUMER (nothing stored) when no consumer group takes (domain, name). */
    () => z.extend(write, { requireConsumer: z.optional(z.boolean()) }),
    () => appended,
  ),
  persist: { params: write, result: appended },
  schedule: operation(
    () => z.strictObject({ at: isoTimestamp, event: tracedEventInput }),
    () => appended,
  ),
  subscribe: operation(
    /**
     * `after`: replay the published events after this position first. `last`: replay the newest
     * `last` published events first (ignored with `after`); `after` in the result says where that began.
     */
    () => z.strictObject({ domain: identifier, name: identifier, after: z.optional(position), last: z.optional(z.int().check(z.positive(), z.maximum(10_000))) }),
    () => z.object({ head: position, after: z.optional(position) }),
  ),
  unsubscribe: operation(
    () => z.strictObject({ domain: identifier, name: identifier }),
    () => empty,
  ),
  /**
   * Subscribes to every domain `pattern` matches, now and created later, filtered (AND) by event
   * `names` (absent: every name) and a `pid` pattern. `subscription` is the client's handle, named
   * in the `matched` frames. With `after`, the matching events after that position are replayed
   * first, in position order across all matched domains. Needs the token's `wildcard` grant for
   * the pattern; each event is delivered only if the token may `subscribe` to its domain.
   */
  subscribePattern: operation(
    () =>
      z.strictObject({
        subscription: handle,
        pattern: namespacePattern,
        names: z.optional(eventNames(64)),
        pid: z.optional(pidPattern),
        after: z.optional(position),
      }),
    () => registered,
  ),
  unsubscribePattern: operation(
    () => z.strictObject({ subscription: handle }),
    () => empty,
  ),
  wait: operation(
    () =>
      z.strictObject({
        wait: handle,
        domain: identifier,
        pid: identifier,
        names: eventNames(64),
        /** Also match events already stored after this event id or position. */
        afterId: z.optional(identifier),
        afterPosition: z.optional(position),
        /** The id of the event this wait answers (request()): fails with E_EVENTFLOW_CONSUMER_FAILED when its consume ends failed. */
        request: z.optional(identifier),
      }),
    () => registered,
  ),
  cancelWait: operation(
    () => z.strictObject({ wait: handle }),
    () => empty,
  ),
  delete: operation(
    () => z.strictObject({ id: identifier }),
    () => deleted,
  ),
  deleteEventlog: operation(
    () => z.strictObject({ domain: identifier, pid: identifier }),
    () => deleted,
  ),
  read: operation(
    () => z.strictObject({ id: identifier }),
    () => z.object({ event: storedEvent }),
  ),
  readEventlog: operation(
    () => z.strictObject({ domain: identifier, pid: identifier, after: z.optional(position) }),
    /**
     * `count` is the number of events the eventlog has in all: a cache holding the events up to
     * `after` detects deletions made elsewhere when its count plus `events.length` differs.
     */
    () => z.object({ events: z.array(storedEvent), count: count() }),
  ),
  /**
   * The composed state of (domain, pid): composeEventlogState over its eventlog, answered by the
   * gateway from its latest snapshot plus the events after it. `count`: the events folded.
   */
  readEventlogState: operation(
    () => z.strictObject({ domain: identifier, pid: identifier }),
    () => z.object({ state: z.record(z.string(), z.unknown()), count: count() }),
  ),
  readEventlogByTimestamp: operation(
    () => z.strictObject({ domain: identifier, pid: identifier, from: isoTimestamp, to: isoTimestamp }),
    () => events,
  ),
  readEventlogFilteredByNames: operation(
    () => z.strictObject({ domain: identifier, pid: identifier, names: eventNames(256) }),
    () => events,
  ),
  readEventlogByChildProcess: operation(
    () => z.strictObject({ domain: identifier, cpid: identifier }),
    () => events,
  ),
  readEventlogByEid: operation(
    () => z.strictObject({ eid: identifier }),
    () => events,
  ),
  readEventlogByDomainAndEid: operation(
    () => z.strictObject({ domain: identifier, eid: identifier }),
    () => events,
  ),
  readDistinctPidByDomain: operation(
    () => z.strictObject({ domain: identifier }),
    () => z.object({ pids: z.array(z.string()) }),
  ),
  persistEntityAssociation: operation(
    () => z.strictObject({ eventId: identifier, eid: identifier }),
    () => empty,
  ),
  persistChildProcessAssociation: operation(
    () => z.strictObject({ eventId: identifier, domain: identifier, cpid: identifier }),
    () => empty,
  ),
  /** Consumer groups of the store (domain filter optional), with counts; needs `consume` on the domain. */
  ping: operation(
    () => z.strictObject({}),
    () => empty,
  ),
  /** Replaces the connection's credentials with a fresh token (EVENTFLOW_AUTH=jwt); a bad one gets E_EVENTFLOW_UNAUTHORIZED and the old ones stay. */
  authenticate: operation(
    () => z.strictObject({ token: z.string().check(z.minLength(1), z.maxLength(8192)) }),
    () => empty,
  ),
  ...workOperations({ identifier, handle, registered, empty, deleted, position }),
  ...catalogOperations(storedEvent),
} as const;

export type Operations = typeof operations;
export type OperationName = keyof Operations;
export type Params<O extends OperationName> = z.input<Operations[O]['params']>;
export type Result<O extends OperationName> = z.infer<Operations[O]['result']>;
export const operationNames = Object.keys(operations) as OperationName[];

export function isOperationName(op: string): op is OperationName {
  return Object.hasOwn(operations, op);
}

const requestId = count();

// ── client → gateway ────────────────────────────────────────────────────────────────────────

export const helloFrame = z.strictObject({
  type: z.literal('hello'),
  protocol: z.int(),
  /** Free-form client label, shown in gateway logs. */
  client: z.optional(z.string().check(z.maxLength(128))),
  /** Credentials: a JWT, checked when the gateway runs with EVENTFLOW_AUTH=jwt. Absent: anonymous. */
  token: z.optional(z.string().check(z.maxLength(8192))),
});

export const requestFrame = z.strictObject({
  type: z.literal('request'),
  id: requestId,
  op: z.string().check(z.maxLength(64)),
  /** May be omitted for operations without params (e.g. ping). */
  params: z.optional(z.unknown()),
});

export const clientFrame = z.discriminatedUnion('type', [helloFrame, requestFrame]);
export type HelloFrame = z.infer<typeof helloFrame>;
export type RequestFrame = z.infer<typeof requestFrame>;
export type ClientFrame = z.infer<typeof clientFrame>;

// ── gateway → client: protocol-server-frames.ts ──────────────────────────────────────────

export {
  welcomeFrame,
  resultFrame,
  errorFrame,
  eventFrame,
  matchedFrame,
  deliveryFrame,
  revokedFrame,
  consumerEndedFrame,
  deletedFrame,
  waitedFrame,
  waitFailedFrame,
  serverFrame,
} from './protocol-server-frames.js';
export type {
  WelcomeFrame,
  ResultFrame,
  ErrorFrame,
  EventFrame,
  MatchedFrame,
  DeliveryFrame,
  WaitedFrame,
  WaitFailedFrame,
  DeletedFrame,
  RevokedFrame,
  ConsumerEndedFrame,
  ServerFrame,
} from './protocol-server-frames.js';

/**
 * Turns zod issues into one readable line that names each offending field. Takes any zod error
 * (zod/mini's `$ZodError` as well as classic zod's `ZodError`): only `issues` is read.
 */
export function describeIssues(
  error: { readonly issues: ReadonlyArray<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }> },
  prefix = '',
): string {
  return error.issues
    .map((issue) => {
      const path = [prefix, ...issue.path.map(String)].filter(Boolean).join('.');
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join('; ');
}
