/**
 * The operators' read operations (the console's): domains, processes with their status, a
 * process's timeline with each event's fate, scheduled events and their cancellation, and the
 * gateway's own figures. Part of the protocol (protocol.ts merges them into `operations`); every
 * answer is filtered by the connection's rights (read), cancellation needs `schedule`.
 */
import * as z from 'zod/mini';
import { operation } from './protocol-base.js';

const count = () => z.int().check(z.nonnegative());
const id = z.string().check(z.minLength(1), z.maxLength(64), z.regex(/^[\x20-\x7e]*$/, { error: 'must contain printable ASCII characters only' }));
const iso = z.string();
/** A page size: at most `max`, the default when absent (see each operation). */
const pageSize = (max: number) => z.optional(z.int().check(z.positive(), z.maximum(max)));

const domainSummary = () =>
  z.object({
    domain: z.string(),
    events: count(),
    lastEvent: iso,
    /** The actions the connection may take on the domain (read, subscribe, publish, consume, schedule, delete, wildcard, manage). */
    actions: z.array(z.string()),
  });

const processSummary = () =>
  z.object({
    pid: z.string(),
    /**
     * First match wins: failed (a failed consume or a dead letter, or its newest outcome event is
     * `failed`), pending (claimed, not settled), scheduled, completed (its newest outcome event is
     * `success`, or a consume succeeded), open (no outcome yet).
     */
    status: z.enum(['failed', 'pending', 'scheduled', 'completed', 'open']),
    events: count(),
    firstEvent: iso,
    lastEvent: iso,
  });

const eventDelivery = () =>
  z.object({
    group: z.string(),
    name: z.string(),
    attempts: count(),
    outcome: z.optional(z.string()),
    lastError: z.optional(z.string()),
    /** When its current (or last) delivery began: the gateway's claim (ISO-8601, ms). Absent before the first claim. */
    claimedAt: z.optional(iso),
    /** When that delivery ended (settled, retried, released, expired). Absent while it is open. */
    settledAt: z.optional(iso),
  });

const eventFate = () =>
  z.object({
    eventId: z.string(),
    consumer: z.optional(z.string()),
    claimed: z.optional(iso),
    success: z.optional(iso),
    failed: z.optional(iso),
    orphan: z.optional(iso),
    published: z.boolean(),
    deadLetter: z.optional(z.object({ attempts: count(), reason: z.string(), at: iso })),
    /**
     * The consumer groups' deliveries of the event (the delivery ledger), one per group that took it:
     * `group` '' is the default group (`name` ''), else `name` is the group's filter name. `outcome`
     * absent: not settled yet (pending or in flight); else success, failed, dead or discarded.
     */
    deliveries: z.optional(z.array(eventDelivery())),
  });

/** Percentiles of a set of durations, in ms; absent when the set is empty. */
const percentiles = () => z.object({ p50: z.number(), p99: z.number(), max: z.number() });

/** One settled delivery of the latency view: its process, and its times (ISO-8601) and durations (ms). */
const latencySample = () =>
  z.object({
    eventId: z.string(),
    pid: z.string(),
    group: z.string(),
    outcome: z.string(),
    attempts: count(),
    storedAt: iso,
    claimedAt: iso,
    settledAt: iso,
    /** Stored → its last delivery's start (earlier attempts and retry delays included). */
    queueMs: z.number(),
    /** That delivery's start → its settle. */
    handlerMs: z.number(),
    /** Stored → settled. */
    totalMs: z.number(),
  });

const latencySummary = () => {
  const spread = percentiles();
  return z.object({
    /** The window read: deliveries settled from `from` to `to`. */
    from: iso,
    to: iso,
    /** Settled deliveries counted (at most the row budget). */
    count: count(),
    /** More deliveries settled in the window than one request reads (LATENCY_SCAN_ROWS): the figures are of the newest `count`. */
    truncated: z.boolean(),
    queue: z.optional(spread),
    handler: z.optional(spread),
    total: z.optional(spread),
    /** The slowest of them end to end, slowest first. */
    slowest: z.array(latencySample()),
  });
};

const scheduledSummary = () => z.object({ id: z.string(), domain: z.string(), name: z.string(), pid: z.string(), due: iso, timestamp: iso });
const scheduledCursor = () => z.strictObject({ due: z.string().check(z.maxLength(40)), id });

const gatewayStats = () =>
  z.object({
    gateway: z.string(),
    /** When the figures were taken (ISO-8601); rates are differences of the totals over time. */
    at: iso,
    uptimeMs: count(),
    connections: count(),
    /** Events written by clients since start (publish, persist, schedule). */
    published: count(),
    /** Events sent to subscriptions, consumers and waits since start. */
    delivered: count(),
    /** The 99th percentile of store call latency over the last minute, in ms; null without metrics (EVENTFLOW_METRICS=off). */
    storeLatencyP99Ms: z.nullable(z.number()),
    /** Deliveries claimed by a consumer and not settled yet (the store's count). */
    backlog: count(),
    /** Deliveries open on this gateway. */
    inFlight: count(),
    ready: z.boolean(),
    /** EVENTFLOW_TRACE_LINK: the operator's tracing UI for a trace id (`{traceId}` in it), for the console's links. */
    traceLink: z.optional(z.string()),
  });

/** The operations, given the stored event's schema (protocol.ts's: imported from there it would be a cycle). */
export const catalogOperations = <E extends z.ZodMiniType>(storedEvent: E) =>
  ({
    /** The domains with events that the connection may know of, with what it may do there. */
    /** `actions`: what the connection may do on at least one domain (e.g. publish to a domain without events yet). */
    listDomains: operation(
      () => z.strictObject({}),
      () => z.object({ domains: z.array(domainSummary()), actions: z.array(z.string()) }),
    ),
    /**
     * A page of a domain's processes, in binary pid order (`next`: pass it as `after` for the
     * following page) or with `order: 'recent'` the newest activity first (`cursor`: pass it as `cursor`).
     */
    listProcesses: operation(
      () =>
        z.strictObject({
          domain: id,
          // Pids are printable ASCII: another prefix matches none, and MariaDB's ASCII-bound comparison failed on it.
          prefix: z.optional(z.string().check(z.maxLength(64), z.regex(/^[\x20-\x7e]*$/, { error: 'must contain printable ASCII characters only, as pids do' }))),
          order: z.optional(z.enum(['pid', 'recent'])),
          after: z.optional(id),
          cursor: z.optional(z.string().check(z.maxLength(200))),
          limit: pageSize(1000),
        }),
      () => z.object({ processes: z.array(processSummary()), next: z.optional(z.string()), cursor: z.optional(z.string()) }),
    ),
    /**
     * A page of a process's events (position > `after`, at most `limit`, default 1000) with each
     * event's fate, the eventlog's length, and (on the first page) its associations.
     */
    readTimeline: operation(
      () => z.strictObject({ domain: id, pid: id, after: z.optional(count()), limit: pageSize(5000) }),
      () =>
        z.object({
          events: z.array(storedEvent),
          fates: z.array(eventFate()),
          count: count(),
          next: z.optional(count()),
          children: z.array(z.object({ eventId: z.string(), domain: z.string(), cpid: z.string() })),
          entities: z.array(z.object({ eventId: z.string(), eid: z.string() })),
        }),
    ),
    /** Scheduled events not fired yet, soonest first, of one domain or of every readable one. */
    listScheduled: operation(
      () => z.strictObject({ domain: z.optional(id), after: z.optional(scheduledCursor()), limit: pageSize(1000) }),
      () => z.object({ scheduled: z.array(scheduledSummary()), next: z.optional(z.object({ due: iso, id: z.string() })) }),
    ),
    /**
     * Where time goes for the events of (domain, name): p50, p99 and the maximum of queue, handler and
     * end-to-end time of the deliveries (every group's, or `group`'s) settled in the last `windowMs`
     * (default an hour, at most 30 days), and the `slowest` of them (default 10) with their processes.
     * Reads at most LATENCY_SCAN_ROWS deliveries, the newest first. Needs `read` on the domain.
     */
    readLatency: operation(
      () =>
        z.strictObject({
          domain: id,
          name: id,
          group: z.optional(z.union([z.literal(''), id])),
          windowMs: z.optional(z.int().check(z.positive(), z.maximum(30 * 86_400_000))),
          slowest: pageSize(100),
        }),
      latencySummary,
    ),
    /** Deletes a scheduled event before it fires (needs `schedule` on its domain). `cancelled` false: it fired already or is gone. */
    cancelScheduled: operation(
      () => z.strictObject({ id }),
      () => z.object({ cancelled: z.boolean() }),
    ),
    gatewayStats: operation(() => z.strictObject({}), gatewayStats),
  }) as const;

export type DomainSummary = z.infer<ReturnType<typeof domainSummary>>;
export type ProcessSummary = z.infer<ReturnType<typeof processSummary>>;
export type EventFate = z.infer<ReturnType<typeof eventFate>>;
export type EventDelivery = z.infer<ReturnType<typeof eventDelivery>>;
export type ScheduledSummary = z.infer<ReturnType<typeof scheduledSummary>>;
export type GatewayStats = z.infer<ReturnType<typeof gatewayStats>>;
export type LatencySummary = z.infer<ReturnType<typeof latencySummary>>;
export type LatencySample = z.infer<ReturnType<typeof latencySample>>;
