/**
 * The transport-agnostic eventflow client: v4.8.3's spoke API over the gateway protocol, without
 * v4's listener defects. Registrations (subscriptions, consumers, waits) are kept here and
 * re-registered on every new connection, so callers never re-subscribe after a reconnect.
 */
import { createAsyncQueue } from './async-queue.js';
import { createConnection, notify, type Connection, type ConnectionState } from './connection.js';
import { EventflowError, isEventflowError } from './errors.js';
import { generateEventId, generatePid } from './ids.js';
import type { DeletedFrame, DeliveryFrame, EventFrame, EventInput, JsonObject, OperationName, Params, Position, Result, StoredEvent } from './protocol.js';
import { connectionLost, pending, RequestManager, type RequestOptions, type Settle } from './requests.js';
import { composeEventlogState, type State } from './state.js';
import { SubscriptionRegistry } from './subscriptions.js';
import { streamKey as keyOf } from './stream-key.js';
import { assertFunction, assertNumber, assertOptionalFunction, assertSignal } from './arguments.js';
import { assertEventInput, assertIdentifier, invalid } from './validate.js';
import { Waiters } from './waiters.js';
import type { BackoffOptions } from './backoff.js';
import type { Connector } from './transport.js';

/** Describes the events of an application: domain → event name → data. Types only. */
export type EventMap = Record<string, Record<string, JsonObject>>;
type DomainOf<M extends EventMap> = Extract<keyof M, string>;
type NameOf<M extends EventMap, D extends DomainOf<M>> = Extract<keyof M[D], string>;

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
   * Aborted when the delivery is lost: the connection dropped, or the lease expired (the gateway
   * sent `revoked`). The gateway then redelivers the event and refuses this delivery's outcome.
   */
  signal: AbortSignal;
  /**
   * Extends the lease to `ms` from now (default: the gateway's EVENTFLOW_CONSUME_LEASE_MS, at most
   * ten of them); call it while working longer than the lease. Resolves with the lease granted,
   * rejects with E_EVENTFLOW_UNKNOWN_DELIVERY once the delivery is revoked.
   */
  extend(ms?: number): Promise<{ ms: number }>;
}
/** Resolving marks the event success; throwing (or rejecting) marks it failed. */
export type ConsumeHandler<E> = (event: E, context: ConsumeContext) => unknown;

export interface ClientOptions {
  /** Per-request timeout in ms (default 10 000). */
  requestTimeout?: number;
  /** Time allowed for the hello/welcome handshake in ms (default 10 000). */
  handshakeTimeout?: number;
  /** Idle time in ms after which the client pings the gateway; a missed answer forces a reconnect (default 20 000, 0 disables). */
  heartbeatInterval?: number;
  /** Reconnect backoff (defaults: 250 ms doubling up to 10 s, full jitter). */
  reconnect?: BackoffOptions;
  /** Shown in gateway logs. */
  clientName?: string;
  /** Credentials for a gateway with EVENTFLOW_AUTH=jwt: a JWT, or a callback asked for a fresh one before every (re)connect. */
  token?: string | (() => string | Promise<string>);
  /** Receives connection failures and exceptions thrown by listeners. Default: listener exceptions go to console.error. */
  onError?: (error: unknown) => void;
}

export interface WaitOptions {
  /** Also resolve with a matching event already stored after this event id. */
  after?: string;
  signal?: AbortSignal;
}

/** `publish`/`persist` options: `expectedVersion` fails the write with E_EVENTFLOW_VERSION_CONFLICT unless the eventlog of (domain, pid) holds exactly that many events. */
export interface PublishOptions extends RequestOptions {
  expectedVersion?: number;
}

export interface RequestEventOptions {
  /** Outcome names to wait for (default ['success', 'failed']). */
  outcomes?: string[];
  /** Milliseconds to wait for the outcome once the wait is registered (default 10 000). */
  timeout?: number;
  signal?: AbortSignal;
}

export interface Subscription {
  unsubscribe(): Promise<void>;
}
export interface Consumer {
  remove(): Promise<void>;
}

type AnyListener = Listener<StoredEvent>;
type AnyHandler = ConsumeHandler<StoredEvent>;

/** A consumer or a wait, by its handle ('c…' or 'w…'). */
interface Registration {
  /** Registers it on the current connection (again after each reconnect). */
  register(): Promise<void>;
  /** A wait's: resolves it with `event`, or fails it with `error`. */
  settle?: Settle<StoredEvent>;
  /** A consumer's. */
  domain?: string;
  name?: string;
  handler?: AnyHandler;
  /** A consumer's position: it catches up on unclaimed events after it when it registers again. */
  after?: number;
  remove?(): Promise<void>;
}

type Deleted = Omit<DeletedFrame, 'type'>;

export class EventflowClient<M extends EventMap = EventMap> {
  readonly #connection: Connection;
  readonly #requests: RequestManager;
  readonly #onError: (error: unknown) => void;

  readonly #subscriptions = new SubscriptionRegistry<AnyListener>();
  /** Subscription keys and consumer handles registered on the current connection (they cannot collide). */
  readonly #registered = new Set<string>();
  /** Serialises subscribe/unsubscribe per key so mount/unmount/mount cannot double-subscribe. */
  readonly #chains = new Map<string, Promise<void>>();

  readonly #registrations = new Map<string, Registration>();
  /** Running consume handlers, by the controller that aborts them when their delivery is lost. */
  readonly #inFlight = new Map<AbortController, Promise<void>>();
  /** The same controllers by delivery, for `revoked` frames. */
  readonly #leases = new Map<string, AbortController>();

  readonly #deletedListeners = new Set<(deleted: Deleted) => void>();
  #nextHandle = 1;
  /** Incremented per connection, so that answers from a previous connection are not trusted. */
  #generation = 0;
  /** Set by close(): the client takes no new work. */
  #closed: Promise<void> | undefined;
  /** Callers waiting for the connection ('open'), a subscription key or a consumer handle. */
  readonly #waiters = new Waiters();

  constructor(connect: Connector, options: ClientOptions = {}) {
    assertFunction(connect, 'connect');
    checkClientOptions(options);
    this.#onError = options.onError ?? ((error) => isEventflowError(error, 'E_EVENTFLOW_CONNECTION_FAILED') || console.error('[eventflow]', error));
    this.#requests = new RequestManager((frame) => this.#connection.send(frame), options.requestTimeout ?? 10_000);
    this.#connection = createConnection(connect, options, {
      open: () => {
        this.#generation++;
        this.#waiters.settle('open');
        for (const key of this.#subscriptions.keys()) void this.#reconcile(key.domain, key.name);
        for (const entry of this.#registrations.values()) void entry.register();
        this.#requests.flush();
      },
      frame: (frame) => {
        if (frame.type === 'result' || frame.type === 'error') {
          if (frame.type === 'error' && frame.id === undefined) this.#onError(new EventflowError('E_EVENTFLOW_INTERNAL', `gateway: ${frame.code}: ${frame.message}`));
          this.#requests.settle(frame);
        } else if (frame.type === 'event') this.#dispatchEvent(frame);
        else if (frame.type === 'delivery') this.#handleDelivery(frame);
        else if (frame.type === 'waited') this.#registrations.get(frame.wait)?.settle?.(undefined, frame.event);
        else if (frame.type === 'revoked') this.#leases.get(frame.delivery)?.abort();
        else if (frame.type === 'deleted') {
          const { type: _type, ...deleted } = frame;
          notify(this.#deletedListeners, deleted, this.#onError);
        }
      },
      lost: () => {
        this.#registered.clear();
        // The gateway hands unsettled deliveries of a dropped connection to other consumers.
        const lost = new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', 'connection lost; the event will be redelivered');
        for (const controller of this.#inFlight.keys()) controller.abort(lost);
        this.#requests.lost();
      },
      error: this.#onError,
      ping: (timeout) => this.#send('ping', {}, { timeout }),
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
    return this.state === 'open' ? Promise.resolve() : this.#waiters.wait('open', 'ready', signal);
  }

  /** Sends any operation of the protocol; the typed methods below are built on it. */
  async call<O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions): Promise<Result<O>> {
    this.#assertUsable();
    checkRequestOptions(options);
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
  async publish<D extends DomainOf<M>, N extends NameOf<M, D>>(event: PublishInput<M, D, N>, options?: PublishOptions): Promise<string> {
    assertNumber(options?.expectedVersion, 'options.expectedVersion', true);
    return this.#field('publish', { event: withId(event), expectedVersion: options?.expectedVersion }, 'id', options);
  }

  /** Stores an event without routing it (v4's persist). */
  async persist<D extends DomainOf<M>, N extends NameOf<M, D>>(event: PublishInput<M, D, N>, options?: PublishOptions): Promise<string> {
    assertNumber(options?.expectedVersion, 'options.expectedVersion', true);
    return this.#field('persist', { event: withId(event), expectedVersion: options?.expectedVersion }, 'id', options);
  }

  /** Stores an event that is routed at `date` (exactly once); resolves with its id. */
  async schedule<D extends DomainOf<M>, N extends NameOf<M, D>>(
    date: Date | number | string,
    event: PublishInput<M, D, N>,
    options?: RequestOptions,
  ): Promise<string> {
    return this.#field('schedule', { at: toIso(date, 'date'), event: withId(event) }, 'id', options);
  }

  /**
   * Registers a wait for the outcome, publishes the event, and resolves with the outcome event.
   * The wait exists before the event does, so a fast outcome cannot be missed.
   */
  async request<D extends DomainOf<M>, N extends NameOf<M, D>>(
    event: PublishInput<M, D, N>,
    options: RequestEventOptions = {},
  ): Promise<EventOf<M, D>> {
    const input = withId(event);
    let outcome!: Promise<StoredEvent>;
    // Goes on once the wait is registered (or fails with it). The handlers also keep a rejection
    // of the outcome from going unhandled when publish fails first.
    await new Promise((resolve, reject) => {
      (outcome = this.#wait(input.domain, input.pid, options.outcomes, options.timeout, options, resolve)).then(resolve, reject);
    });
    await this.call('publish', { event: input }, { signal: options.signal });
    return (await outcome) as EventOf<M, D>;
  }

  // ── subscriptions ───────────────────────────────────────────────────────────────────────

  /**
   * Calls `listener` with every event of (domain, name) routed from now on (`*`: every name of the
   * domain, in addition to named subscriptions). Resolves once the gateway has the subscription.
   */
  async subscribe<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(
    domain: D,
    name: N,
    listener: Listener<EventOf<M, D, N>>,
    options: { signal?: AbortSignal } = {},
  ): Promise<Subscription> {
    this.#assertRegistrable(domain, name, 'name');
    assertFunction(listener, 'listener');
    assertSignal(options.signal, 'options.signal');
    this.#subscriptions.add(domain, name, listener as unknown as AnyListener);
    const key = keyOf(domain, name);
    const unsubscribe = (): Promise<void> => this.unsubscribe(domain, name, listener);
    // A pending chain may be about to unsubscribe the key: wait for the reconciliation instead.
    const registered = this.#registered.has(key) && !this.#chains.has(key) ? undefined : this.#waiters.wait(key, 'subscribe', options.signal);
    void this.#reconcile(domain, name);
    await registration(registered, unsubscribe);
    return { unsubscribe };
  }

  /** Removes exactly this listener; other listeners, also of the same domain, are untouched. */
  async unsubscribe<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, listener: Listener<EventOf<M, D, N>>): Promise<void> {
    assertFunction(listener, 'listener');
    if (this.#subscriptions.remove(domain, name, listener as unknown as AnyListener)) await this.#reconcile(domain, name);
  }

  /** The async-iterator form of subscribe: `for await (const event of client.events('orders', '*'))`. */
  events<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, options: { signal?: AbortSignal; bufferSize?: number } = {}): AsyncIterableIterator<EventOf<M, D, N>> {
    this.#assertRegistrable(domain, name, 'name');
    assertNumber(options.bufferSize, 'options.bufferSize', true, 1);
    assertSignal(options.signal, 'options.signal');
    const listener: Listener<EventOf<M, D, N>> = (event) => queue.push(event);
    const queue = createAsyncQueue<EventOf<M, D, N>>(() => void this.unsubscribe(domain, name, listener).catch(this.#onError), options.bufferSize, options.signal);
    this.subscribe(domain, name, listener).catch((error: unknown) => queue.fail(error));
    return queue;
  }

  #reconcile(domain: string, name: string): Promise<void> {
    const key = keyOf(domain, name);
    const next = (this.#chains.get(key) ?? Promise.resolve()).then(() => this.#reconcileNow(domain, name, key));
    this.#chains.set(key, next);
    void next.finally(() => this.#chains.get(key) === next && this.#chains.delete(key));
    return next;
  }

  async #reconcileNow(domain: string, name: string, key: string): Promise<void> {
    if (this.state !== 'open') return; // re-run on open
    const entry = this.#subscriptions.get(domain, name);
    try {
      if (entry && !this.#registered.has(key)) {
        const result = await this.#register('subscribe', { domain, name, after: entry.position });
        if (!result) return;
        // A resumed subscription keeps its position: the replay that follows starts there. A new
        // one starts at head, so older events published to others are not delivered.
        entry.position ??= result.head;
        this.#registered.add(key);
        this.#waiters.settle(key);
        // Listeners may all have left while the request was in flight.
        if (this.#subscriptions.get(domain, name) !== entry) await this.#reconcileNow(domain, name, key);
      } else if (entry) {
        this.#waiters.settle(key); // already registered: a later listener joined it
      } else if (this.#registered.has(key) && (await this.#register('unsubscribe', { domain, name }))) {
        this.#registered.delete(key);
      }
    } catch (error) {
      this.#refused(key, error);
    }
  }

  /** A registration failed: its waiters fail, and so does onError (unless only the connection was lost). */
  #refused(key: string, error: unknown): void {
    if (error === connectionLost) return;
    this.#waiters.settle(key, error);
    this.#onError(error);
  }

  #dispatchEvent({ event, names }: EventFrame): void {
    for (const name of names) {
      const key = this.#subscriptions.get(event.domain, name);
      // Resumed subscriptions may overlap with what was already delivered: skip by position.
      if (!key || event.position <= (key.position ?? -1)) continue;
      key.position = event.position;
      notify(key.listeners, event, this.#onError);
    }
  }

  // ── consumers ───────────────────────────────────────────────────────────────────────────

  /**
   * Competes for the events of (domain, name): each event goes to exactly one consumer among all
   * clients. The handler resolving marks the event success, throwing marks it failed.
   */
  async consume<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(
    domain: D,
    name: N,
    handler: ConsumeHandler<EventOf<M, D, N>>,
    options: { signal?: AbortSignal } = {},
  ): Promise<Consumer> {
    this.#assertRegistrable(domain, name, 'name');
    assertFunction(handler, 'handler');
    assertSignal(options.signal, 'options.signal');
    const consumer = `c${this.#nextHandle++}`;
    const remove = async (): Promise<void> => {
      if (!this.#registrations.delete(consumer)) return;
      this.#waiters.settle(consumer, new EventflowError('E_EVENTFLOW_ABORTED', 'consumer removed before it was registered'));
      if (!this.#registered.delete(consumer) || this.state !== 'open') return;
      await this.#send('removeConsumer', { consumer }).catch((error: unknown) => {
        if (error !== connectionLost) throw error;
      });
    };
    const register = async (): Promise<void> => {
      try {
        const entry = this.#registrations.get(consumer);
        const result = await this.#register('consume', { consumer, domain, name, after: entry?.after });
        if (!result) return;
        if (entry) entry.after ??= result.head;
        // Removed while registering: take it back off the gateway.
        if (!this.#registrations.has(consumer)) return void (await this.#send('removeConsumer', { consumer }));
        this.#registered.add(consumer);
        this.#waiters.settle(consumer);
      } catch (error) {
        this.#refused(consumer, error);
      }
    };
    this.#registrations.set(consumer, { domain, name, handler: handler as unknown as AnyHandler, register, remove });
    const registered = this.#waiters.wait(consumer, 'consume', options.signal);
    void register();
    await registration(registered, remove);
    return { remove };
  }

  /** Removes exactly this handler's consumer; nothing else in the domain is touched. */
  async removeConsumer<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, handler: ConsumeHandler<EventOf<M, D, N>>): Promise<void> {
    assertFunction(handler, 'handler');
    for (const entry of this.#registrations.values()) {
      if (entry.handler === (handler as unknown as AnyHandler) && entry.domain === domain && entry.name === name) return entry.remove?.();
    }
  }

  #handleDelivery({ consumer, delivery, event, attempt }: DeliveryFrame): void {
    const entry = this.#registrations.get(consumer);
    const handler = entry?.handler;
    if (!entry || !handler || this.#closed) return void this.#settle(delivery, 'release');
    entry.after = Math.max(entry.after ?? 0, event.position);
    const controller = new AbortController();
    const { signal } = controller;
    const run = (async () => {
      let error: { message: string; code?: string | undefined } | undefined;
      try {
        await handler(event, { attempt, signal, extend: (ms) => this.#send('extend', { delivery, ms }) });
      } catch (cause) {
        error = describeFailure(cause);
      }
      if (!signal.aborted) await this.#settle(delivery, error ? 'failed' : 'success', error);
    })();
    this.#inFlight.set(controller, run);
    this.#leases.set(delivery, controller);
    void run.finally(() => this.#inFlight.delete(controller) && this.#leases.delete(delivery));
  }

  #settle(delivery: string, outcome: 'success' | 'failed' | 'release', error?: { message: string; code?: string | undefined }): Promise<unknown> {
    return this.#send('settle', { delivery, outcome, error }).catch((cause: unknown) => {
      // A lost connection or an expired delivery: the gateway redelivers the event; nothing to do here.
      if (cause !== connectionLost && !isEventflowError(cause, 'E_EVENTFLOW_UNKNOWN_DELIVERY')) this.#onError(cause);
    });
  }

  // ── waits ───────────────────────────────────────────────────────────────────────────────

  /**
   * Resolves with the first event of (domain, pid) named one of `names` (default `success` and
   * `failed`), failing after `timeout` ms (default 10 000). The wait is registered at the gateway
   * before the timeout starts; with `after`, an outcome already stored after that event also
   * resolves it. Concurrent waits are independent of each other and of subscriptions.
   */
  wait<D extends DomainOf<M>>(domain: D, pid: string, names?: string | string[], timeout?: number, options: WaitOptions = {}): Promise<EventOf<M, D>> {
    return this.#wait(domain, pid, names, timeout, options) as Promise<EventOf<M, D>>;
  }

  async #wait(
    domain: string,
    pid: string,
    outcomes: string | string[] = ['success', 'failed'],
    timeout = 10_000,
    options: WaitOptions,
    onRegistered?: (registered?: unknown) => void,
  ): Promise<StoredEvent> {
    const { after, signal } = options;
    const names = [outcomes].flat();
    this.#assertRegistrable(domain, pid, 'pid');
    names.forEach((name, i) => assertIdentifier(name, `names.${i}`));
    if (!names.length) throw invalid('names: must name at least one event');
    if (after !== undefined) assertIdentifier(after, 'after');
    assertNumber(timeout, 'timeout');
    assertSignal(signal);
    return pending<StoredEvent>('wait', signal, (settle) => {
      const wait = `w${this.#nextHandle++}`;
      const params: Params<'wait'> = { wait, domain, pid, names, afterId: after };
      let timer: ReturnType<typeof setTimeout> | undefined;
      const register = async (): Promise<void> => {
        try {
          const result = await this.#register('wait', params);
          if (!result) return;
          // Re-registering after a reconnect asks for outcomes stored since the first registration,
          // which also starts the clock.
          params.afterPosition ??= result.head;
          params.afterId = undefined;
          if (timer || !this.#registrations.has(wait)) return;
          timer = setTimeout(
            () => settle(new EventflowError('E_EVENTFLOW_WAIT_TIMEOUT', `wait timed out (${timeout}) for ${domain} › ${pid} › ${names.join(' | ')}`, { details: { domain, pid, names, timeout } })),
            timeout,
          );
          onRegistered?.();
        } catch (error) {
          if (error !== connectionLost) settle(error);
        }
      };
      this.#registrations.set(wait, { register, settle });
      void register();
      return (error) => {
        clearTimeout(timer);
        this.#registrations.delete(wait);
        if (error && this.state === 'open') void this.#send('cancelWait', { wait }).catch(() => undefined);
      };
    });
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

  /** Events of a process with min ≤ timestamp ≤ max. */
  async readEventlogByTimestamp<D extends DomainOf<M>>(domain: D, pid: string, min: Date | number | string, max: Date | number | string): Promise<Array<EventOf<M, D>>> {
    return this.#field('readEventlogByTimestamp', { domain, pid, from: toIso(min, 'min'), to: toIso(max, 'max') }, 'events') as Promise<Array<EventOf<M, D>>>;
  }

  async readEventlogFilteredByNames<D extends DomainOf<M>>(domain: D, pid: string, names: string[]): Promise<Array<EventOf<M, D>>> {
    if (!Array.isArray(names) || !names.length) throw invalid('names: must be a non-empty array of event names');
    names.forEach((name, i) => assertIdentifier(name, `names.${i}`));
    return this.#field('readEventlogFilteredByNames', { domain, pid, names }, 'events') as Promise<Array<EventOf<M, D>>>;
  }

  /** Events associated with the child process (domain, cpid); `domain` is the child's domain. */
  readEventlogByChildProcess(domain: string, cpid: string): Promise<StoredEvent[]> {
    return this.#field('readEventlogByChildProcess', { domain, cpid }, 'events');
  }

  readEventlogByEid(eid: string): Promise<StoredEvent[]> {
    return this.#field('readEventlogByEid', { eid }, 'events');
  }

  readEventlogByDomainAndEid<D extends DomainOf<M>>(domain: D, eid: string): Promise<Array<EventOf<M, D>>> {
    return this.#field('readEventlogByDomainAndEid', { domain, eid }, 'events') as Promise<Array<EventOf<M, D>>>;
  }

  /** The pids of a domain, as strings (v4 returned `{pid}` rows), in binary order. */
  readDistinctPidByDomain(domain: string): Promise<string[]> {
    return this.#field('readDistinctPidByDomain', { domain }, 'pids');
  }

  /** The composed state of a process (v4's composeEventlogState over its eventlog, chunk size 10). */
  async readEventlogState(domain: string, pid: string): Promise<State> {
    return composeEventlogState(await this.readEventlog(domain as DomainOf<M>, pid));
  }

  async persistEntityAssociation(eventId: string, eid: string): Promise<true> {
    await this.call('persistEntityAssociation', { eventId, eid });
    return true;
  }

  async persistChildProcessAssociation(eventId: string, domain: string, cpid: string): Promise<true> {
    await this.call('persistChildProcessAssociation', { eventId, domain, cpid });
    return true;
  }

  generatePid(): string {
    return generatePid();
  }

  /** v4's composeEventlogState (chunk size 10 by default). */
  composeEventlogState(eventlog: ReadonlyArray<{ data: unknown }>, size?: number): State {
    return composeEventlogState(eventlog, size);
  }

  /**
   * Lets in-flight consume handlers finish and settle (up to `drainTimeout`, default 30 s), then
   * closes. Deliveries arriving meanwhile are released to other consumers. Pending requests and
   * waits reject with E_EVENTFLOW_CLIENT_CLOSED.
   */
  close(options: { drainTimeout?: number } = {}): Promise<void> {
    try {
      assertNumber(options.drainTimeout, 'options.drainTimeout');
    } catch (error) {
      return Promise.reject(error);
    }
    return (this.#closed ??= (async () => {
      await this.#drain(options.drainTimeout ?? 30_000);
      const error = closedError();
      for (const entry of this.#registrations.values()) entry.settle?.(error);
      this.#requests.failAll(error);
      this.#waiters.rejectAll(error);
      this.#connection.close();
    })());
  }

  /** Waits for handlers whose delivery is still ours; lost ones are redelivered elsewhere anyway. */
  async #drain(timeout: number): Promise<void> {
    const deadline = Date.now() + timeout;
    for (;;) {
      const live = [...this.#inFlight].filter(([{ signal }]) => !signal.aborted).map(([, run]) => run);
      const left = deadline - Date.now();
      if (!live.length || left <= 0) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([Promise.allSettled(live), new Promise((resolve) => (timer = setTimeout(resolve, Math.min(left, 100))))]);
      clearTimeout(timer);
    }
  }

  // ── internals ───────────────────────────────────────────────────────────────────────────

  /** A registration request: not resent after a reconnect, which registers anew instead. */
  #send<O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions): Promise<Result<O>> {
    return this.#requests.request(op, params, options, false);
  }

  /**
   * Sends a registration on the current connection. Undefined when there is none (the next one
   * registers anew), or when the answer came after a newer connection, which is not trusted.
   */
  async #register<O extends OperationName>(op: O, params: Params<O>): Promise<Result<O> | undefined> {
    if (this.state !== 'open') return undefined;
    const generation = this.#generation;
    const result = await this.#send(op, params);
    return generation === this.#generation ? result : undefined;
  }

  /** Closed clients refuse new work; registrations also check their domain and `field`. */
  #assertRegistrable(domain: string, value: string, field: string): void {
    this.#assertUsable();
    assertIdentifier(domain, 'domain');
    assertIdentifier(value, field);
  }

  #assertUsable(): void {
    if (this.#closed) throw closedError();
  }
}

/** Awaits a registration; when it is aborted or refused, `undo` takes it back so that it does not linger and come back on a later connection. */
const registration = (registered: Promise<void> | undefined, undo: () => Promise<void>): Promise<void> | undefined =>
  registered?.catch(async (error: unknown) => {
    await undo().catch(() => undefined);
    throw error;
  });

const closedError = (): EventflowError => new EventflowError('E_EVENTFLOW_CLIENT_CLOSED', 'client closed; create a new one');

function withId(event: Partial<EventInput>): EventInput {
  assertEventInput(event);
  return { ...event, id: event.id ?? generateEventId() };
}

/** ids, domains, pids… of the read and delete operations, checked before they are sent. */
const identifierParams = 'id domain pid cpid eid eventId'.split(' ');

function checkRequestOptions(options: RequestOptions | undefined): void {
  assertNumber(options?.timeout, 'options.timeout');
  assertSignal(options?.signal, 'options.signal');
}

function checkClientOptions(options: ClientOptions): void {
  for (const key of ['requestTimeout', 'handshakeTimeout', 'heartbeatInterval'] as const) assertNumber(options[key], `options.${key}`);
  assertOptionalFunction(options.onError, 'options.onError');
  if (options.token !== undefined && typeof options.token !== 'string') assertFunction(options.token, 'options.token');
}

function toIso(value: Date | number | string, field: string): string {
  // new Date(null) is 1970 and new Date(true) 1 ms after: only the three documented types are dates.
  const date = value instanceof Date || typeof value === 'number' || typeof value === 'string' ? new Date(value) : new Date(NaN);
  if (Number.isNaN(date.getTime())) {
    throw new EventflowError('E_EVENTFLOW_INVALID_DATE', `${field}: ${JSON.stringify(value)} is not a date; pass a Date, epoch ms or ISO-8601 with an offset`);
  }
  return date.toISOString();
}

function describeFailure(cause: unknown): { message: string; code?: string | undefined } {
  const isError = cause instanceof Error;
  const code = isError ? (cause as { code?: unknown }).code : undefined;
  return { message: (isError ? cause.message : String(cause)).slice(0, 4096), code: typeof code === 'string' ? code.slice(0, 128) : undefined };
}
