/**
 * The frames the gateway sends (protocol.ts re-exports them). A module of their own because the
 * gateway writes them without checking them: the package declares no side effects (package.json),
 * so a bundle that imports none of these, as the gateway's, leaves the module out and builds none
 * of its schemas (bench/README.md › start).
 */
import * as z from 'zod/mini';
import { count, handle, position, storedEvent } from './protocol-base.js';

const requestId = count();

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
