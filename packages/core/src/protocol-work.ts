/**
 * The work operations: consumers and their deliveries (consume, settle, settleMany, extend), and
 * the operators' view of consumer groups and dead letters. Part of the protocol (protocol.ts merges
 * them into `operations`, handing in the schemas they share with it).
 */
import * as z from 'zod/mini';
import { MAX_CONSUME_ATTEMPTS, MAX_CONSUME_CONCURRENCY, MAX_SETTLE_BATCH } from './defaults.js';
import { isWellFormedText, WELL_FORMED_MESSAGE } from './unicode-text.js';
import { once, operation } from './protocol-base.js';

type Schema = z.ZodMiniType;

/** The schemas of protocol.ts the work operations use. */
export interface Shared<I extends Schema, H extends Schema, R extends Schema, E extends Schema, D extends Schema, P extends Schema> {
  identifier: I;
  handle: H;
  registered: R;
  empty: E;
  deleted: D;
  position: P;
}

const count = () => z.int().check(z.nonnegative());

export function workOperations<I extends Schema, H extends Schema, R extends Schema, E extends Schema, D extends Schema, P extends Schema>({ identifier, handle, registered, empty, deleted, position }: Shared<I, H, R, E, D, P>) {
  /**
   * A consumer group's name; absent (or '') for the default group of (domain, name). Otherwise an
   * identifier: exact in every store (MySQL's ascii_bin would make 'a' and 'a ' one group).
   */
  const groupName = once(() => z.union([z.literal(''), identifier]));
  /**
   * A consumer's retry policy for thrown errors (README › consumer options): up to `attempts`
   * deliveries in all, `backoff` between them (exponential with jitter from `delayMs`, capped at
   * `maxDelayMs`; or fixed), then a dead letter with the last error.
   */
  const retryPolicy = () => {
    /** The longest retry delay the gateway takes (a day). */
    const retryMs = z.int().check(z.nonnegative(), z.maximum(86_400_000));
    return (
      z
        .strictObject({
          attempts: z.int().check(z.minimum(1), z.maximum(MAX_CONSUME_ATTEMPTS)),
          backoff: z.optional(z.enum(['exponential', 'fixed'])),
          delayMs: z.optional(retryMs),
          maxDelayMs: z.optional(retryMs),
        })
        // Both given and contradictory: the cap would be raised to delayMs without a word. One given alone keeps the other's default (the cap, then, at least delayMs).
        .check(z.refine((policy) => policy.delayMs === undefined || policy.maxDelayMs === undefined || policy.maxDelayMs >= policy.delayMs, { error: 'must not be below delayMs', path: ['maxDelayMs'] }))
    );
  };
  /** A consumer group: (domain, name, group); `group` '' is the default group. */
  const groupKey = () => z.strictObject({ domain: identifier, name: identifier, group: groupName() });
  const groupSummary = () =>
    z.object({
      domain: z.string(),
      name: z.string(),
      group: z.string(),
      createdPosition: position,
      createdAt: z.string(),
      /** Connections of this gateway registered as members. */
      members: count(),
      pending: count(),
      inFlight: count(),
      redelivered: count(),
      deadLetters: count(),
      /** Timestamp of the oldest event of its backlog with no outcome, if any. */
      oldestPendingAt: z.optional(z.string()),
    });
  const deadLetter = () =>
    z.object({
      eventId: z.string(),
      domain: z.string(),
      name: z.string(),
      pid: z.string(),
      /** The name its group consumes (the event's name, or `*`): with domain and group, the group's key, as requeue and discard take it. */
      consumes: z.string(),
      group: z.string(),
      attempts: count(),
      lastError: z.string(),
      at: z.string(),
    });
  const deadLetterKey = once(() => z.strictObject({ eventId: identifier, domain: identifier, name: identifier, group: groupName() }));

  /** Text the ledger stores (unicode-text.ts says why it must be well-formed). */
  const storedText = (max: number) => z.string().check(z.maxLength(max), z.refine(isWellFormedText, { error: WELL_FORMED_MESSAGE }));
  /** A consumer's report on one delivery: the `settle` operation's params, and each of `settleMany`'s. */
  const settleParams = once(() =>
    z
      .strictObject({
        delivery: handle,
        /**
         * `release` hands the event back for another consumer (e.g. this one is shutting down);
         * `retry` delivers it again after `delayMs`, counted as an attempt (NATS nak-with-delay).
         */
        outcome: z.enum(['success', 'failed', 'release', 'retry']),
        delayMs: z.optional(z.int().check(z.nonnegative(), z.maximum(86_400_000))),
        error: z.optional(z.strictObject({ message: storedText(4096), code: z.optional(storedText(128)) })),
      })
      .check(z.refine((settle) => settle.delayMs === undefined || settle.outcome === 'retry', { error: 'is taken only with outcome "retry"', path: ['delayMs'] })),
  );
  return {
    consume: operation(
      /**
       * A member of the group (domain, name, `group`; '' or absent: the default group), which gets the
       * group's backlog from the store, then live events (PROTOCOL.md › consume). `after` is accepted
       * for older clients and not needed: the delivery ledger says what is pending.
       */
      () =>
        z.strictObject({
          consumer: handle,
          domain: identifier,
          name: identifier,
          after: z.optional(position),
          group: z.optional(groupName()),
          /**
           * Deliveries open to this consumer at once (its credit); the gateway's default when absent. 0
           * pauses it: no new deliveries, the open ones may still settle (a closing client registers its
           * consumers again so).
           */
          concurrency: z.optional(z.int().check(z.minimum(0), z.maximum(MAX_CONSUME_CONCURRENCY))),
          /** The group delivers at most one event per (domain, pid) at a time, in position order; stored with the group (absent: unchanged). */
          ordered: z.optional(z.boolean()),
          /** What this consumer's thrown errors lead to; absent: the event is failed (v4's rule). */
          retry: z.optional(retryPolicy()),
        }),
      () => registered,
    ),
    removeConsumer: operation(
      () => z.strictObject({ consumer: handle }),
      () => empty,
    ),
    settle: operation(settleParams, () => empty),
    /**
     * Several settles in one request (what a worker's handlers finished in one turn), each recorded or
     * refused on its own: `refused` lists those that were not, by index, with the code and message a
     * `settle` of it would have had. The request is validated whole first: one malformed entry refuses
     * all of them (E_EVENTFLOW_INVALID_INPUT naming the entry), and none is recorded. A gateway that
     * takes it announces `limits.maxSettleBatch`.
     */
    settleMany: operation(
      () => z.strictObject({ settles: z.array(settleParams()).check(z.minLength(1), z.maxLength(MAX_SETTLE_BATCH)) }),
      () => z.object({ refused: z.array(z.object({ index: count(), code: z.string(), message: z.string() })) }),
    ),
    /**
     * Pushes an open delivery's lease deadline to now + `ms` (default: the gateway's lease; capped at
     * ten leases). `ms` in the result is the lease granted.
     */
    extend: operation(
      () => z.strictObject({ delivery: handle, ms: z.optional(z.int().check(z.positive())) }),
      () => z.object({ ms: count() }),
    ),
    groups: operation(
      () => z.strictObject({ domain: z.optional(identifier) }),
      () => z.object({ groups: z.array(groupSummary()) }),
    ),
    /** Removes a group and its ledger (named groups); needs `manage` on the domain. */
    deleteGroup: operation(groupKey, () => deleted),
    /** Dead letters, newest first, paged; needs `consume` on the domain (those of other domains are left out). */
    deadLetters: operation(
      () => z.strictObject({ domain: z.optional(identifier), limit: z.optional(z.int().check(z.positive(), z.maximum(1000))), offset: z.optional(count()) }),
      () => z.object({ deadLetters: z.array(deadLetter()) }),
    ),
    /** A dead letter back to its group's backlog with a new attempt cycle; needs `manage`. */
    requeueDeadLetter: operation(deadLetterKey, () => z.object({ requeued: z.boolean() })),
    /** Drops a dead letter from the list (the event stays failed); needs `manage`. */
    discardDeadLetter: operation(deadLetterKey, () => z.object({ discarded: z.boolean() })),
    /** Application heartbeat: browsers cannot send WebSocket pings. */
  };
}
