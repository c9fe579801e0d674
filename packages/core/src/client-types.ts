/** The types of the client's API (client.ts): the application's event map, options, handles. */
import type { BackoffOptions } from './backoff.js';
import type { Consumers } from './consumers.js';
import type { ClientFeature } from './features.js';
import type { V4Reads } from './v4-reads.js';
import type { Iterating } from './iterating.js';
import type { Waits } from './waits.js';
import type { DeletedFrame, JsonObject, StoredEvent } from './protocol.js';
import type { RequestOptions } from './requests.js';
import type { ClientTracing, TraceOptions } from './client-tracing.js';

/** Describes the events of an application: domain → event name → data. Types only. */
export type EventMap = Record<string, Record<string, JsonObject>>;
export type DomainOf<M extends EventMap> = Extract<keyof M, string>;
export type NameOf<M extends EventMap, D extends DomainOf<M>> = Extract<keyof M[D], string>;

/** A stored event whose domain, name and data are typed by the application's EventMap. */
export type EventflowEvent<M extends EventMap, D extends DomainOf<M>, N extends NameOf<M, D>> = Omit<StoredEvent, 'domain' | 'name' | 'data'> & {
  domain: D;
  name: N;
  data: M[D][N];
};
/** The event type a subscription to (domain, name) receives; `*` gives the union of the domain's events. */
export type EventOf<M extends EventMap, D extends DomainOf<M>, N extends NameOf<M, D> | '*' = '*'> = N extends NameOf<M, D>
  ? EventflowEvent<M, D, N>
  : { [K in NameOf<M, D>]: EventflowEvent<M, D, K> }[NameOf<M, D>];

export type PublishInput<M extends EventMap, D extends DomainOf<M>, N extends NameOf<M, D>> = {
  id?: string;
  domain: D;
  name: N;
  pid: string;
  data?: M[D][N];
  rid?: string;
};

export type Listener<E> = (event: E) => void;

export interface ConsumeContext {
  /** 1 for the first delivery of this event, higher when it is redelivered. */
  attempt: number;
  /**
   * Aborted when the delivery is lost: the connection dropped, the lease expired (the gateway
   * sent `revoked`), or close() stopped waiting for the handler (its drainTimeout ran out). The gateway then redelivers the event. An outcome reached anyway is still sent
   * (to the same gateway, within the lease); the gateway accepts it or answers
   * E_EVENTFLOW_UNKNOWN_DELIVERY, which the client ends quietly.
   */
  signal: AbortSignal;
  /**
   * Extends the lease to `ms` from now (default: the gateway's EVENTFLOW_CONSUME_LEASE_MS, at most
   * ten of them); call it while working longer than the lease. Resolves with the lease granted,
   * rejects with E_EVENTFLOW_UNKNOWN_DELIVERY once the delivery is revoked, and at once with
   * E_EVENTFLOW_CONNECTION_FAILED once it was lost with its connection (signal aborted).
   */
  extend(ms?: number): Promise<{ ms: number }>;
  /**
   * Asks for the event to be delivered again after `ms` (default 0) instead of settling it, counted
   * as an attempt (NATS nak-with-delay): when the handler then resolves, the gateway redelivers the
   * event to the group after the delay, or makes it a dead letter after the last attempt. Throwing
   * still marks the event failed. `reason` (an Error or a message) is recorded as the last error,
   * which a dead letter carries. Called after the handler returned (its outcome is reported
   * already), it throws E_EVENTFLOW_UNKNOWN_DELIVERY.
   */
  retry(ms?: number, reason?: unknown): void;
}
/** Resolving marks the event success (or a retry, after context.retry); throwing (or rejecting) marks it failed. */
export type ConsumeHandler<E> = (event: E, context: ConsumeContext) => unknown;

/** The client's features by name, with the part each brings (features.ts): `consuming` (consumers.ts), `waiting` (waits.ts), `v4Reads` (v4-reads.ts), `iterating` (iterating.ts). */
export interface Features {
  consuming: Consumers;
  waiting: Waits;
  v4Reads: V4Reads;
  iterating: Iterating;
}
/** A feature value, as passed in ClientOptions.features: `consuming`, `waiting`, `v4Reads` or `iterating`. */
export type Feature = { [K in keyof Features]: ClientFeature<K, Features[K]> }[keyof Features];

export interface ClientOptions {
  /**
   * The features whose code comes only with them: `consuming` (consume, removeConsumer),
   * `waiting` (wait, request), `v4Reads` (v4's reads by timestamp, names, child process and entity
   * id, and its two associations) and `iterating` (events()), exported by '@eventflow/core' and
   * '@eventflow/browser/work'. Without one, its methods reject (events() throws) with
   * E_EVENTFLOW_FEATURE_NOT_ENABLED. createClient and createNodeClient pass all four (by default);
   * createBrowserClient and `new EventflowClient` none.
   */
  features?: readonly Feature[];
  /** Per-request timeout in ms (default DEFAULT_REQUEST_TIMEOUT, 10 000; defaults.ts), counted from the call. Past it, E_EVENTFLOW_REQUEST_TIMEOUT, or E_EVENTFLOW_OFFLINE when the client was not connected at all meanwhile. */
  requestTimeout?: number;
  /** Time allowed for the hello/welcome handshake in ms (default DEFAULT_HANDSHAKE_TIMEOUT, 10 000). */
  handshakeTimeout?: number;
  /** Idle time in ms after which the client pings the gateway; a missed answer forces a reconnect (default DEFAULT_HEARTBEAT_INTERVAL, 20 000; 0 disables). */
  heartbeatInterval?: number;
  /** Reconnect backoff (defaults DEFAULT_RECONNECT_*: 250 ms doubling up to 10 s, full jitter). */
  reconnect?: BackoffOptions;
  /** Shown in gateway logs. */
  clientName?: string;
  /** Credentials for a gateway with EVENTFLOW_AUTH=jwt: a JWT, or a callback asked for a fresh one before every (re)connect. */
  token?: string | (() => string | Promise<string>);
  /** Receives connection failures and exceptions thrown by listeners. Default: listener exceptions go to console.error. */
  onError?: (error: unknown) => void;
  /**
   * Trace context and spans (README › Tracing): `otelTracing(api)` over the application's
   * `@opentelemetry/api` (browsers: `tracing` from '@eventflow/browser/tracing'). Events then carry the
   * active span's W3C trace context, and consume handlers run in a span whose parent is the
   * publisher's. createNodeClient uses OpenTelemetry by itself once an SDK is registered; `false` turns
   * that off. Without it, no event carries a trace context unless its publish options give one.
   */
  tracing?: ClientTracing | false;
}

export interface WaitOptions {
  /** Only an event stored after this event id resolves the wait, one already stored included. */
  after?: string;
  signal?: AbortSignal;
}

/**
 * `publish`/`persist` options: `expectedVersion` fails the write with E_EVENTFLOW_VERSION_CONFLICT unless the eventlog of (domain, pid) holds exactly that many events;
 * `traceparent`/`tracestate` give the event's trace context (otherwise ClientOptions.tracing's, if any).
 */
export interface PublishOptions extends RequestOptions, TraceOptions {
  expectedVersion?: number;
}

export interface RequestEventOptions extends TraceOptions {
  /** Outcome names to wait for (default ['success', 'failed']). */
  outcomes?: string[];
  /** Milliseconds to wait for the outcome once the wait is registered (default DEFAULT_WAIT_TIMEOUT, 10 000). */
  timeout?: number;
  signal?: AbortSignal;
  /**
   * Fail at once with E_EVENTFLOW_NO_CONSUMER (nothing published) when no consumer group takes the
   * event's (domain, name) (default true). false: publish anyway and wait (v4's behaviour).
   */
  requireConsumer?: boolean;
}

export interface ConsumeOptions {
  signal?: AbortSignal;
  /**
   * The consumer group (default, or '': the default group of (domain, name)). Every group gets every event
   * published after it was created (its first registration); members of one group compete.
   */
  group?: string;
  /**
   * Deliveries open to this consumer at once, 1 to MAX_CONSUME_CONCURRENCY (default
   * DEFAULT_CONSUME_CONCURRENCY, 16): the gateway sends more only as handlers settle, so a slow worker
   * is never flooded and a worker that joins takes its share at once. Also the handlers running at
   * once: one still running after its delivery was lost or revoked keeps its slot (handler-slots.ts).
   * BullMQ's `concurrency` per worker; JetStream's MaxAckPending, per member rather than per consumer.
   */
  concurrency?: number;
  /**
   * The group delivers one event per process (domain, pid) at a time, in position order, across all
   * its members and gateways; other processes in parallel. Stored with the group: a registration
   * that says it (true or false) sets it for every member; one that leaves it out changes nothing.
   */
  ordered?: boolean;
  /**
   * What a thrown error leads to: the event is delivered again after a backoff, up to `attempts`
   * deliveries in all (expired leases count too), then it is failed for the group and becomes a dead
   * letter with the last error. Without it a throw records `failed` at once (eventflow v4's rule).
   */
  retry?: ConsumeRetry;
}

/** ConsumeOptions.retry: attempts in all, and the delay between them. */
export interface ConsumeRetry {
  /** Deliveries in all, the first included (1 to 100). */
  attempts: number;
  /** `exponential` (default): delayMs × 2^(attempt − 1) with jitter (half of it random), capped at maxDelayMs; `fixed`: delayMs. */
  backoff?: 'exponential' | 'fixed';
  /** Default 1,000 ms. */
  delayMs?: number;
  /** Default 60,000 ms. */
  maxDelayMs?: number;
}

export interface Subscription {
  unsubscribe(): Promise<void>;
}

/**
 * Where a subscription starts. Without either, with the events routed from now on. Each listener
 * gets the start it asked for, also one that joins a (domain, name) other listeners of this client
 * already follow (the client shares one gateway subscription among them). After a reconnect it
 * resumes where it was either way.
 */
export interface SubscribeOptions {
  signal?: AbortSignal;
  /** First the published events after this position (an event's `position`), oldest first. */
  after?: number;
  /** First the newest `last` published events (1 to 10 000), oldest first; ignored with `after`. */
  last?: number;
}
export interface Consumer {
  remove(): Promise<void>;
}

export type Deleted = Omit<DeletedFrame, 'type'>;
