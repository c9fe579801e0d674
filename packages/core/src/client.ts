/**
 * The transport-agnostic eventflow client: v4.8.3's spoke API over the gateway protocol, without
 * v4's listener defects. This file is the API and its argument checks; the work is done by
 * registrations.ts (subscriptions, registered again on every connection), requests.ts
 * (correlation, timeouts, the send window within the gateway's limits) and connection.ts
 * (handshake, heartbeat, reconnect). Consuming, waiting, v4's rarer reads and events() are
 * features (features.ts): their methods are on every client (the interface below the class), their
 * code comes with the `consuming`, `waiting`, `v4Reads` and `iterating` values an application
 * passes in `options.features` (consumers.ts, waits.ts, v4-reads.ts, iterating.ts), so that
 * browsers without them ship none.
 */
import type { ClientOptions, Consumer, ConsumeHandler, ConsumeOptions, Deleted, DomainOf, EventMap, EventOf, Feature, Features, Listener, NameOf, PublishInput, PublishOptions, RequestEventOptions, SubscribeOptions, Subscription, WaitOptions } from './client-types.js';
import { assertFunction, assertNumber, assertOptionalFunction, assertSignal, refuse, toIso } from './arguments.js';
import { createConnection, notify, type Connection, type ConnectionState } from './connection.js';
import { DEFAULT_DRAIN_TIMEOUT, DEFAULT_REQUEST_TIMEOUT } from './defaults.js';
import type { DeliveryHandler } from './deliveries.js';
import { closedError, EventflowError, featureNotEnabled, logError } from './errors.js';
import type { FeatureHost, FeaturePart } from './features.js';
import type { V4Reads } from './v4-reads.js';
import { generatePid } from './ids.js';
import type { EventInput, OperationName, Params, Position, Result, StoredEvent } from './protocol.js';
import { Registrations, type AnyListener, type Send } from './registrations.js';
import type { NamespacePattern } from './namespace-pattern.js';
import type { PatternSubscriptions } from './pattern-subscriptions.js';
import { RequestManager, type RequestOptions } from './requests.js';
import { composeEventlogState, emptyState, freezeState, type State } from './state.js';
import { assertIdentifier, assertRegistrable, withId } from './validate.js';
import type { Connector } from './transport.js';
import type { ClientTracing, OutgoingEvent, TraceOptions } from './client-tracing.js';

export type {
  ClientOptions,
  Consumer,
  ConsumeContext,
  ConsumeHandler,
  EventflowEvent,
  EventMap,
  EventOf,
  Feature,
  Features,
  Listener,
  PublishInput,
  PublishOptions,
  RequestEventOptions,
  ConsumeOptions,
  ConsumeRetry,
  SubscribeOptions,
  Subscription,
  WaitOptions,
} from './client-types.js';

export class EventflowClient<M extends EventMap = EventMap> {
  readonly #connection: Connection;
  readonly #requests: RequestManager;
  readonly #registrations: Registrations;
  /** The features passed in options.features, by name. */
  readonly #features: Partial<Features> = {};
  readonly #parts: FeaturePart[];
  #patternSubscriptions: PatternSubscriptions | undefined;
  readonly #deletedListeners = new Set<(deleted: Deleted) => void>();
  /** Set by close(): the client takes no new work. */
  #closed: Promise<void> | undefined;
  /** ClientOptions.tracing: spans and trace context for writes, requests and consume handlers. */
  readonly #tracing: ClientTracing | undefined;

  constructor(connect: Connector, options: ClientOptions = {}) {
    assertFunction(connect, 'connect');
    checkClientOptions(options);
    const onError = options.onError ?? logError;
    this.#tracing = options.tracing || undefined;
    const requests = (this.#requests = new RequestManager((frame) => this.#connection.send(frame), options.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT));
    // A registration request: not resent after a reconnect, which registers anew instead.
    const send: Send = (op, params, requestOptions) => requests.request(op, params, requestOptions, false);
    const registrations = (this.#registrations = new Registrations(send, () => this.state === 'open', onError));
    const host: FeatureHost = {
      ...registrations.host,
      request: send,
      client: this as unknown as FeatureHost['client'],
      closed: () => !!this.#closed,
      tracing: this.#tracing,
    };
    for (const feature of options.features ?? []) (this.#features as Record<string, FeaturePart>)[feature.name] ??= feature.create(host);
    const parts: FeaturePart[] = (this.#parts = Object.values(this.#features));
    this.#connection = createConnection(connect, options, {
      open: (welcome, recovered) => {
        // Subscriptions first: they start the connection's generation, which the features' registrations check.
        registrations.opened();
        for (const part of parts) part.opened?.(welcome);
        requests.open(welcome.limits);
        // The default onError said when the outage began (logError); it says when it ends too.
        if (recovered && !options.onError) console.info('[eventflow] connected to the gateway again');
      },
      frame: (frame) => {
        if (frame.type === 'error' && frame.id === undefined) onError(new EventflowError('E_EVENTFLOW_INTERNAL', `gateway: ${frame.code}: ${frame.message}`));
        else if (frame.type === 'result' || frame.type === 'error') requests.settle(frame);
        else if (frame.type === 'event') registrations.dispatch(frame);
        else if (frame.type === 'deleted') {
          const { type: _type, ...deleted } = frame;
          notify(this.#deletedListeners, deleted, onError);
        } else for (const part of parts) part.frame?.(frame);
      },
      lost: () => {
        registrations.lost();
        for (const part of parts) part.lost?.();
        requests.lost();
      },
      error: onError,
      blocked: (error) => {
        requests.block(error);
        // ready() waits for a gateway that is not up yet, not for one that refused the handshake.
        if (error?.code != 'E_EVENTFLOW_OFFLINE') registrations.waiters.settle('open', error);
      },
      ping: (timeout) => send('ping', {}, { timeout }),
    });
  }

  // ── connection ──────────────────────────────────────────────────────────────────────────

  get state(): ConnectionState {
    return this.#connection.state;
  }

  onStateChange(listener: (state: ConnectionState) => void): () => void {
    assertFunction(listener, 'listener');
    return this.#connection.onStateChange(listener);
  }

  /**
   * Calls `listener` when events are deleted through the gateway in a domain this client
   * subscribes to (`id` absent: the whole eventlog of `pid`). Caches use it to drop what they hold.
   */
  onDeleted(listener: (deleted: Deleted) => void): () => void {
    assertFunction(listener, 'listener');
    this.#deletedListeners.add(listener);
    return () => this.#deletedListeners.delete(listener);
  }

  /** Resolves once the client is connected (immediately if it is). */
  async ready(signal?: AbortSignal): Promise<void> {
    this.#assertUsable();
    assertSignal(signal);
    if (this.state !== 'open') await this.#registrations.waiters.wait('open', 'ready', signal);
  }

  /**
   * Sends any operation of the protocol; the typed methods below are built on it. Made while
   * disconnected, it waits for the connection (up to its timeout, then E_EVENTFLOW_OFFLINE); sent
   * and cut off by a dropped connection, it is sent again on the next one.
   */
  async call<O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions): Promise<Result<O>> {
    // Not refused while close() drains: a handler finishing its work publishes its outcome. Once closed, the request
    // manager refuses every call (failAll).
    assertNumber(options?.timeout, 'options.timeout');
    assertSignal(options?.signal, 'options.signal');
    // Checked here too, so that a wrong argument fails at once, also while offline.
    for (const [key, value] of Object.entries(params ?? {})) if (identifierParams.includes(key)) assertIdentifier(value, key);
    return this.#requests.request(op, params, options);
  }

  /** `call`, resolving with one field of the result. */
  async #field<O extends OperationName, K extends keyof Result<O>>(op: O, params: Params<O>, field: K, options?: RequestOptions): Promise<Result<O>[K]> {
    return (await this.call(op, params, options))[field];
  }

  // ── publishing ──────────────────────────────────────────────────────────────────────────

  /** Stores and routes an event; resolves with its id once it is durably stored. Retrying is safe: the id makes it idempotent. */
  publish<D extends DomainOf<M>, N extends NameOf<M, D>>(event: PublishInput<M, D, N>, options?: PublishOptions): Promise<string> {
    return this.#write('publish', event, options);
  }

  /** Stores an event without routing it (v4's persist). */
  persist<D extends DomainOf<M>, N extends NameOf<M, D>>(event: PublishInput<M, D, N>, options?: PublishOptions): Promise<string> {
    return this.#write('persist', event, options);
  }

  // The writes return this promise as it is: a pipelined publisher pays for every hop.
  async #write(op: 'publish' | 'persist' | 'schedule', event: Partial<EventInput>, options?: PublishOptions, date?: unknown): Promise<string> {
    const params = writeParams(op, event, options, date) as Params<'schedule'> & { event: OutgoingEvent };
    const send = () => this.call(op, params, options);
    return (await (this.#tracing?.write(op, params.event, send) ?? send())).id;
  }

  /** Stores an event that is routed at `date` (exactly once); resolves with its id. */
  schedule<D extends DomainOf<M>, N extends NameOf<M, D>>(
    date: Date | number | string,
    event: PublishInput<M, D, N>,
    options?: RequestOptions & TraceOptions,
  ): Promise<string> {
    return this.#write('schedule', event, options, date);
  }

  // ── subscriptions ───────────────────────────────────────────────────────────────────────

  /**
   * Calls `listener` with every event of (domain, name) routed from now on (`*`: every name of the
   * domain, in addition to named subscriptions). Resolves once the gateway has the subscription.
   * `after` (a position) or `last` (a count, at most 10 000) replays published events first, to this
   * listener, also when others of this client follow (domain, name) already (see SubscribeOptions).
   *
   * With a namespace pattern (`namespacePattern('prod.>')`) instead of a domain: every domain it
   * matches, also those created later, filtered (AND) by `names` (a name, a list, or `*`) and
   * `options.pid` (`*` matches any run of characters); one position order across all of them.
   */
  subscribe(pattern: NamespacePattern, names: string | readonly string[], listener: Listener<StoredEvent>, options?: PatternOptions): Promise<Subscription>;
  subscribe<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, listener: Listener<EventOf<M, D, N>>, options?: SubscribeOptions): Promise<Subscription>;
  async subscribe(domain: string | NamespacePattern, name: string | readonly string[], listener: Listener<never>, options: PatternOptions & SubscribeOptions = {}): Promise<Subscription> {
    assertFunction(listener, 'listener');
    assertSignal(options.signal, 'options.signal');
    const unsubscribe = (): Promise<void> => (this.unsubscribe as (...args: unknown[]) => Promise<void>)(domain, name, listener, options);
    if (typeof domain === 'object') await this.#patterns(domain).subscribe(domain.params(name, options.pid), listener as AnyListener, options.signal);
    else {
      assertRegistrable(this.#closed, domain, name as string, 'name');
      assertNumber(options.after, 'options.after', true, 0);
      assertNumber(options.last, 'options.last', true, 1);
      await this.#registrations.subscribe(domain, name as string, listener as AnyListener, options);
    }
    return { unsubscribe };
  }

  /** Removes exactly this listener (of a pattern subscription: with the same names and `pid`); other listeners are untouched. */
  unsubscribe(pattern: NamespacePattern, names: string | readonly string[], listener: Listener<StoredEvent>, options?: { pid?: string }): Promise<void>;
  unsubscribe<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, listener: Listener<EventOf<M, D, N>>): Promise<void>;
  async unsubscribe(domain: string | NamespacePattern, name: string | readonly string[], listener: Listener<never>, options: { pid?: string } = {}): Promise<void> {
    assertFunction(listener, 'listener');
    if (typeof domain === 'object') await this.#patterns(domain).unsubscribe(domain.params(name, options.pid), listener as AnyListener);
    else await this.#registrations.unsubscribe(domain, name as string, listener as AnyListener);
  }

  /**
   * The async-iterator form of subscribe: `for await (const event of client.events('orders', '*'))`, or of a pattern subscription.
   * Needs the `iterating` feature (see ClientOptions.features); without it, throws E_EVENTFLOW_FEATURE_NOT_ENABLED, as it throws for a bad argument.
   */
  events(pattern: NamespacePattern, names: string | readonly string[], options?: PatternOptions & { bufferSize?: number }): AsyncIterableIterator<StoredEvent>;
  events<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, options?: { signal?: AbortSignal; bufferSize?: number }): AsyncIterableIterator<EventOf<M, D, N>>;
  events(domain: string | NamespacePattern, name: string | readonly string[], options?: PatternOptions & { bufferSize?: number }): AsyncIterableIterator<StoredEvent> {
    return this.#feature('iterating', 'events').events(domain, name, options);
  }

  // ── reads and writes ────────────────────────────────────────────────────────────────────

  delete(eventId: string): Promise<boolean> {
    return this.#field('delete', { id: eventId }, 'deleted');
  }

  deleteEventlog(domain: string, pid: string): Promise<boolean> {
    return this.#field('deleteEventlog', { domain, pid }, 'deleted');
  }

  /** Throws E_EVENTFLOW_EVENT_NOT_FOUND for an unknown id. */
  read(eventId: string): Promise<StoredEvent> {
    return this.#field('read', { id: eventId }, 'event');
  }

  /** The events of a process, oldest first; `after` returns only those after a position. */
  readEventlog<D extends DomainOf<M>>(domain: D, pid: string, options: { after?: Position } = {}): Promise<Array<EventOf<M, D>>> {
    return this.#field('readEventlog', { domain, pid, after: options.after }, 'events') as Promise<Array<EventOf<M, D>>>;
  }

  static {
    const methods: Record<Exclude<keyof Features, 'iterating'>, string> = {
      consuming: 'consume removeConsumer',
      waiting: 'wait request',
      v4Reads: 'readEventlogByTimestamp readEventlogFilteredByNames readEventlogByChildProcess readEventlogByEid readEventlogByDomainAndEid persistEntityAssociation persistChildProcessAssociation',
    };
    for (const [feature, names] of Object.entries(methods) as Array<[keyof typeof methods, string]>) {
      for (const method of names.split(' ')) {
        (this.prototype as unknown as Record<string, unknown>)[method] = async function (this: EventflowClient, ...args: unknown[]) {
          return (this.#feature(feature, method) as unknown as Record<string, (...args: unknown[]) => unknown>)[method]!(...args);
        };
      }
    }
  }

  // ── more reads ──────────────────────────────────────────────────────────────────────────

  /** The pids of a domain, as strings (v4 returned `{pid}` rows), in binary order. */
  readDistinctPidByDomain(domain: string): Promise<string[]> {
    return this.#field('readDistinctPidByDomain', { domain }, 'pids');
  }

  /**
   * The composed state of a process (v4's composeEventlogState over its eventlog, chunk size 10),
   * composed by the gateway from its latest snapshot plus the events after it.
   */
  async readEventlogState(domain: string, pid: string): Promise<State> {
    const state = await this.#field('readEventlogState', { domain, pid }, 'state');
    return Object.keys(state).length > 0 ? freezeState(state) : emptyState;
  }

  generatePid(): string {
    return generatePid();
  }

  /** v4's composeEventlogState (chunk size 10 by default). */
  composeEventlogState(eventlog: ReadonlyArray<{ data: unknown }>, size?: number): State {
    return composeEventlogState(eventlog, size);
  }

  /**
   * Lets in-flight consume handlers finish and settle (up to `drainTimeout`, default DEFAULT_DRAIN_TIMEOUT, 30 s), then
   * closes. Deliveries arriving meanwhile are released to other consumers. Handlers still running then have their
   * signal aborted (their events go to other consumers); pending requests and waits reject with E_EVENTFLOW_CLIENT_CLOSED.
   * Calls made while it drains (a handler's publish of its outcome) still go through; new registrations do not.
   */
  // async: a bad option rejects; #closed is still set in the call itself (before any await).
  async close(options: { drainTimeout?: number } = {}): Promise<void> {
    assertNumber(options.drainTimeout, 'options.drainTimeout');
    return (this.#closed ??= (async () => {
      const timeout = options.drainTimeout ?? DEFAULT_DRAIN_TIMEOUT;
      await Promise.all(this.#parts.map((part) => part.drain?.(timeout)));
      const error = closedError();
      for (const part of this.#parts) part.close?.(error);
      this.#registrations.waiters.rejectAll(error);
      this.#requests.failAll(error);
      this.#connection.close();
    })());
  }

  // ── internals ───────────────────────────────────────────────────────────────────────────

  #assertUsable(): void {
    if (this.#closed) throw closedError();
  }

  /**
   * The pattern subscriptions, made by the first pattern value subscribed (namespace-pattern.ts), so
   * that a bundle without patterns leaves their code out; a part like a feature's from then on.
   */
  #patterns(pattern: NamespacePattern): PatternSubscriptions {
    if (!this.#patternSubscriptions) this.#parts.push((this.#patternSubscriptions = pattern.subscriptions(this.#registrations.host)));
    return this.#patternSubscriptions;
  }

  /** The part of a feature, or E_EVENTFLOW_FEATURE_NOT_ENABLED naming what to pass. */
  #feature<K extends keyof Features>(name: K, method: string): Features[K] {
    const part = this.#features[name];
    if (!part) throw featureNotEnabled(name, method);
    return part;
  }
}

/**
 * The methods of the features (ClientOptions.features), on every client: EventflowClient's static
 * block installs each from its name, delegating to the feature's part, so that a bundle without
 * the feature carries names rather than methods. Without the feature, each rejects with
 * E_EVENTFLOW_FEATURE_NOT_ENABLED.
 */
export interface EventflowClient<M extends EventMap = EventMap> {
  // ── publishing and waiting for the outcome (the `waiting` feature) ─────────────────────
  /**
   * Registers a wait for the outcome, publishes the event, and resolves with the outcome event.
   * The wait exists before the event does, so a fast outcome cannot be missed. Fails fast: with
   * E_EVENTFLOW_NO_CONSUMER (nothing published) when no consumer group takes the event (unless
   * `requireConsumer: false`), and with E_EVENTFLOW_CONSUMER_FAILED (the handler's message and the
   * attempt in details) when its consume ends failed or dead-lettered on the same gateway.
   * Needs the `waiting` feature (see ClientOptions.features).
   */
  request<D extends DomainOf<M>, N extends NameOf<M, D>>(event: PublishInput<M, D, N>, options?: RequestEventOptions): Promise<EventOf<M, D>>;

  // ── consumers (the `consuming` feature) ─────────────────────────────────────────────────

  /**
   * Competes for the events of (domain, name): each event goes to exactly one consumer among all
   * clients. The handler resolving marks the event success, throwing marks it failed.
   * Needs the `consuming` feature (see ClientOptions.features).
   */
  consume<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, handler: ConsumeHandler<EventOf<M, D, N>>, options?: ConsumeOptions): Promise<Consumer>;

  /** Removes exactly this handler's consumer; nothing else in the domain is touched. */
  removeConsumer<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, handler: ConsumeHandler<EventOf<M, D, N>>): Promise<void>;

  // ── waits (the `waiting` feature) ───────────────────────────────────────────────────────

  /**
   * Resolves with the first event of (domain, pid) named one of `names` (default `success` and
   * `failed`), failing after `timeout` ms (default 10 000). The wait is registered at the gateway
   * before the timeout starts; with `after`, an outcome already stored after that event also
   * resolves it. Concurrent waits are independent of each other and of subscriptions.
   * Needs the `waiting` feature (see ClientOptions.features).
   */
  wait<D extends DomainOf<M>>(domain: D, pid: string, names?: string | string[], timeout?: number, options?: WaitOptions): Promise<EventOf<M, D>>;

  // ── v4's other reads and associations (the `v4Reads` feature) ───────────────────────────

  /** Events of a process with min ≤ timestamp ≤ max. Needs the `v4Reads` feature (see ClientOptions.features). */
  readEventlogByTimestamp<D extends DomainOf<M>>(domain: D, pid: string, min: Date | number | string, max: Date | number | string): Promise<Array<EventOf<M, D>>>;
  /** Needs the `v4Reads` feature. */
  readEventlogFilteredByNames<D extends DomainOf<M>>(domain: D, pid: string, names: string[]): Promise<Array<EventOf<M, D>>>;
  /** Events associated with the child process (domain, cpid); `domain` is the child's domain. Needs the `v4Reads` feature. */
  readEventlogByChildProcess(domain: string, cpid: string): Promise<StoredEvent[]>;
  /** Needs the `v4Reads` feature. */
  readEventlogByEid(eid: string): Promise<StoredEvent[]>;
  /** Needs the `v4Reads` feature. */
  readEventlogByDomainAndEid<D extends DomainOf<M>>(domain: D, eid: string): Promise<Array<EventOf<M, D>>>;
  /** Needs the `v4Reads` feature. */
  persistEntityAssociation(eventId: string, eid: string): Promise<true>;
  /** Needs the `v4Reads` feature. */
  persistChildProcessAssociation(eventId: string, domain: string, cpid: string): Promise<true>;

}

/**
 * The checked parameters of a write (publish, persist, schedule at `date`), with the event's id;
 * the browser outbox queues the same. `undefined` fields do not reach the wire.
 */
export function writeParams(op: 'publish' | 'persist' | 'schedule', event: unknown, options?: PublishOptions, date?: unknown): { event: EventInput & { id: string }; expectedVersion?: number; at?: string } {
  const scheduled = op === 'schedule';
  const at = scheduled ? toIso(date, 'date') : undefined;
  const expectedVersion = scheduled ? undefined : options?.expectedVersion;
  assertNumber(expectedVersion, 'options.expectedVersion', true);
  return { event: withId(event as Partial<EventInput>, options), expectedVersion, at };
}

/** ids, domains, pids… of the read and delete operations, checked before they are sent. */
const identifierParams = 'id domain pid cpid eid eventId'.split(' ');

function checkClientOptions(options: ClientOptions): void {
  for (const key of ['requestTimeout', 'handshakeTimeout', 'heartbeatInterval'] as const) assertNumber(options[key], `options.${key}`);
  assertOptionalFunction(options.onError, 'options.onError');
  const { features = [] } = options;
  if (!Array.isArray(features) || !features.every((feature: Partial<Feature> | undefined) => typeof feature?.create == 'function')) refuse('options.features', 'an array of features (consuming, waiting, v4Reads, iterating)', features);
  if (options.token !== undefined && typeof options.token !== 'string') assertFunction(options.token, 'options.token');
}

/** Options of a pattern subscription: `pid` filters by pid pattern (`*` matches any run of characters). */
export interface PatternOptions {
  signal?: AbortSignal;
  pid?: string;
}

/** The checked subscribePattern params of a pattern (checked by `namespacePattern`), names (`*`: all) and pid pattern. */
