/**
 * The eventflow WebSocket protocol: every frame in both directions, as zod/mini schemas.
 * This file (with its parts: protocol-base.ts, the event and the shared schemas; protocol-catalog.ts
 * and protocol-work.ts, operations) is the single source of truth; every other module imports the
 * inferred types.
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
} from './protocol-base.js';

export { PROTOCOL_VERSION } from './protocol-version.js';
/** For servers' own checks of event data (the gateway's fast frame path). */
export { FORBIDDEN_DATA_KEY } from './data-keys.js';
export { identifier, jsonValue, jsonObject, position, traceparent, tracestate, eventInput, storedEvent } from './protocol-base.js';
export type { JsonValue, JsonObject, Position, EventInput, StoredEvent } from './protocol-base.js';

/** Every request operation: its params and its result. */
export const operations = {
  publish: {
    /** `requireConsumer`: refuse with E_EVENTFLOW_NO_CONSUMER (nothing stored) when no consumer group takes (domain, name). */
    params: z.extend(write, { requireConsumer: z.optional(z.boolean()) }),
    result: appended,
  },
  persist: { params: write, result: appended },
  schedule: {
    params: z.strictObject({ at: isoTimestamp, event: tracedEventInput }),
    result: appended,
  },
  subscribe: {
    /**
     * `after`: replay the published events after this position first. `last`: replay the newest
     * `last` published events first (ignored with `after`); `after` in the result says where that began.
     */
    params: z.strictObject({ domain: identifier, name: identifier, after: z.optional(position), last: z.optional(z.int().check(z.positive(), z.maximum(10_000))) }),
    result: z.object({ head: position, after: z.optional(position) }),
  },
  unsubscribe: { params: z.strictObject({ domain: identifier, name: identifier }), result: empty },
  /**
   * Subscribes to every domain `pattern` matches, now and created later, filtered (AND) by event
   * `names` (absent: every name) and a `pid` pattern. `subscription` is the client's handle, named
   * in the `matched` frames. With `after`, the matching events after that position are replayed
   * first, in position order across all matched domains. Needs the token's `wildcard` grant for
   * the pattern; each event is delivered only if the token may `subscribe` to its domain.
   */
  subscribePattern: {
    params: z.strictObject({
      subscription: handle,
      pattern: namespacePattern,
      names: z.optional(eventNames(64)),
      pid: z.optional(pidPattern),
      after: z.optional(position),
    }),
    result: registered,
  },
  unsubscribePattern: { params: z.strictObject({ subscription: handle }), result: empty },
  wait: {
    params: z.strictObject({
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
    result: registered,
  },
  cancelWait: { params: z.strictObject({ wait: handle }), result: empty },
  delete: { params: z.strictObject({ id: identifier }), result: deleted },
  deleteEventlog: { params: z.strictObject({ domain: identifier, pid: identifier }), result: deleted },
  read: { params: z.strictObject({ id: identifier }), result: z.object({ event: storedEvent }) },
  readEventlog: {
    params: z.strictObject({ domain: identifier, pid: identifier, after: z.optional(position) }),
    /**
     * `count` is the number of events the eventlog has in all: a cache holding the events up to
     * `after` detects deletions made elsewhere when its count plus `events.length` differs.
     */
    result: z.object({ events: z.array(storedEvent), count: count() }),
  },
  /**
   * The composed state of (domain, pid): composeEventlogState over its eventlog, answered by the
   * gateway from its latest snapshot plus the events after it. `count`: the events folded.
   */
  readEventlogState: {
    params: z.strictObject({ domain: identifier, pid: identifier }),
    result: z.object({ state: z.record(z.string(), z.unknown()), count: count() }),
  },
  readEventlogByTimestamp: {
    params: z.strictObject({ domain: identifier, pid: identifier, from: isoTimestamp, to: isoTimestamp }),
    result: events,
  },
  readEventlogFilteredByNames: {
    params: z.strictObject({ domain: identifier, pid: identifier, names: eventNames(256) }),
    result: events,
  },
  readEventlogByChildProcess: {
    params: z.strictObject({ domain: identifier, cpid: identifier }),
    result: events,
  },
  readEventlogByEid: { params: z.strictObject({ eid: identifier }), result: events },
  readEventlogByDomainAndEid: {
    params: z.strictObject({ domain: identifier, eid: identifier }),
    result: events,
  },
  readDistinctPidByDomain: {
    params: z.strictObject({ domain: identifier }),
    result: z.object({ pids: z.array(z.string()) }),
  },
  persistEntityAssociation: {
    params: z.strictObject({ eventId: identifier, eid: identifier }),
    result: empty,
  },
  persistChildProcessAssociation: {
    params: z.strictObject({ eventId: identifier, domain: identifier, cpid: identifier }),
    result: empty,
  },
  /** Consumer groups of the store (domain filter optional), with counts; needs `consume` on the domain. */
  ping: { params: z.strictObject({}), result: empty },
  /** Replaces the connection's credentials with a fresh token (EVENTFLOW_AUTH=jwt); a bad one gets E_EVENTFLOW_UNAUTHORIZED and the old ones stay. */
  authenticate: { params: z.strictObject({ token: z.string().check(z.minLength(1), z.maxLength(8192)) }), result: empty },
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

// ── gateway → client ────────────────────────────────────────────────────────────────────────

export const welcomeFrame = z.object({
  type: z.literal('welcome'),
  protocol: z.int(),
  connection: z.string(),
  gateway: z.string(),
  /** The newest stored position when the connection was accepted. */
  head: position,
  /**
   * What the connection may use (limits.ts of the gateway), so that the client keeps within it.
   * Only `maxFrameBytes` is always there: older gateways announced nothing else, and clients then
   * assume the gateway's defaults.
   */
  limits: z.object({
    maxFrameBytes: z.int().check(z.positive()),
    /** EVENTFLOW_MAX_IN_FLIGHT: requests sent and not answered yet. */
    maxInFlight: z.optional(z.int().check(z.positive())),
    /** EVENTFLOW_MAX_SUBSCRIPTIONS: subscriptions + consumers + waits. */
    maxSubscriptions: z.optional(z.int().check(z.positive())),
    /** EVENTFLOW_MAX_PUBLISH_RATE: publish/persist/schedule per second, burst as many; 0 = unlimited. */
    maxPublishRate: z.optional(count()),
    /** EVENTFLOW_MAX_RECEIVE_RATE: bytes per second read from the connection; 0 = unlimited. */
    maxReceiveRate: z.optional(count()),
    /** EVENTFLOW_CONSUME_LEASE_MS: how long a delivery stays open without `extend`. */
    leaseMs: z.optional(z.int().check(z.positive())),
    /** EVENTFLOW_CONSUME_MAX_ATTEMPTS: deliveries of an event before it is a dead letter. */
    maxAttempts: z.optional(z.int().check(z.positive())),
    /** Settles one `settleMany` may carry; absent: the gateway has no settleMany (older ones). */
    maxSettleBatch: z.optional(z.int().check(z.positive())),
  }),
  /**
   * The gateway registers a request()'s wait in the turn its frame is read, and refuses the publish
   * of the event it answers when it refused the wait: request() sends both at once. Absent (older
   * gateways): request() waits for the wait's answer before it publishes.
   */
  waitsInOrder: z.optional(z.literal(true)),
});

export const resultFrame = z.object({
  type: z.literal('result'),
  id: requestId,
  result: z.unknown(),
});

/** An error as every frame that reports one carries it: a stable code, a message saying what to do, optional details. */
const reportedError = {
  code: z.string(),
  message: z.string(),
  details: z.optional(z.record(z.string(), z.unknown())),
};

export const errorFrame = z.object({
  type: z.literal('error'),
  /** Absent when the failing frame had no readable request id. */
  id: z.optional(requestId),
  ...reportedError,
});

/**
 * An event for the connection's subscriptions, sent once per connection even if `x` and `*` both
 * match. `names` lists the subscribed names (the exact name and/or `*`) it is for, so that a client
 * resuming several subscriptions can track each one's position separately.
 */
export const eventFrame = z.object({
  type: z.literal('event'),
  names: z.array(z.string()).check(z.minLength(1)),
  event: storedEvent,
});

/**
 * An event for the connection's pattern subscriptions (subscribePattern), sent once per connection:
 * `subscriptions` lists the handles it matches, each receiving events in position order.
 */
export const matchedFrame = z.object({
  type: z.literal('matched'),
  subscriptions: z.array(z.string()).check(z.minLength(1)),
  event: storedEvent,
});

/** An event handed to exactly one consumer; settle it with the `settle` operation. */
export const deliveryFrame = z.object({
  type: z.literal('delivery'),
  consumer: handle,
  delivery: handle,
  attempt: z.int().check(z.positive()),
  event: storedEvent,
});

/**
 * The delivery's lease expired (or it was otherwise taken back): it is no longer open on this
 * connection and the event goes to a consumer again. The client aborts the handler's signal.
 */
export const revokedFrame = z.object({ type: z.literal('revoked'), delivery: handle });

/**
 * The gateway ended the consumer `consumer`: it is no longer registered on this connection, and no
 * delivery comes to it any more (those open were revoked first). `code` says why:
 * E_EVENTFLOW_GROUP_DELETED, its group was deleted on another gateway (details: domain, name,
 * group). The client does not register it again; registering it anew (consume) is the
 * application's choice.
 */
export const consumerEndedFrame = z.object({
  type: z.literal('consumerEnded'),
  consumer: handle,
  ...reportedError,
});

/**
 * Events were deleted through this gateway: one (`id`) or a whole eventlog (no `id`). Sent to
 * every connection subscribed to anything in the domain, so that caches can drop what they hold.
 */
export const deletedFrame = z.object({
  type: z.literal('deleted'),
  domain: z.string(),
  pid: z.string(),
  id: z.optional(z.string()),
});

/** The outcome a `wait` was registered for. Sent once; the wait is then gone. */
export const waitedFrame = z.object({ type: z.literal('waited'), wait: handle, event: storedEvent });

/**
 * The wait's request event was consumed and its consume ended failed (the handler threw, or it
 * became a dead letter): `code` E_EVENTFLOW_CONSUMER_FAILED, the handler's message, the attempt.
 * Sent once; the wait is then gone.
 */
export const waitFailedFrame = z.object({
  type: z.literal('waitFailed'),
  wait: handle,
  ...reportedError,
});

export const serverFrame = z.discriminatedUnion('type', [
  waitFailedFrame,
  welcomeFrame,
  resultFrame,
  errorFrame,
  eventFrame,
  matchedFrame,
  deliveryFrame,
  waitedFrame,
  deletedFrame,
  revokedFrame,
  consumerEndedFrame,
]);
export type WelcomeFrame = z.infer<typeof welcomeFrame>;
export type ResultFrame = z.infer<typeof resultFrame>;
export type ErrorFrame = z.infer<typeof errorFrame>;
export type EventFrame = z.infer<typeof eventFrame>;
export type MatchedFrame = z.infer<typeof matchedFrame>;
export type DeliveryFrame = z.infer<typeof deliveryFrame>;
export type WaitedFrame = z.infer<typeof waitedFrame>;
export type WaitFailedFrame = z.infer<typeof waitFailedFrame>;
export type DeletedFrame = z.infer<typeof deletedFrame>;
export type RevokedFrame = z.infer<typeof revokedFrame>;
export type ConsumerEndedFrame = z.infer<typeof consumerEndedFrame>;
export type ServerFrame = z.infer<typeof serverFrame>;

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
