/**
 * The transport-agnostic eventflow client: v4.8.3's spoke API over the gateway protocol, without
 * v4's listener defects. Registrations (subscriptions, consumers, waits) are kept here and
 * re-registered on every new connection, so callers never re-subscribe after a reconnect.
 */
import { createAsyncQueue } from './async-queue.js';
import { Connection, type ConnectionState } from './connection.js';
import { EventflowError } from './errors.js';
import { generateEventId, generatePid } from './ids.js';
import type {
  DeletedFrame,
  DeliveryFrame,
  EventFrame,
  EventInput,
  JsonObject,
  OperationName,
  Params,
  Position,
  Result,
  ServerFrame,
  StoredEvent,
  WaitedFrame,
} from './protocol.js';
import { connectionLost, RequestManager, type RequestOptions } from './requests.js';
import { composeEventlogState, type State } from './state.js';
import { SubscriptionRegistry } from './subscriptions.js';
import { assertEventInput, assertIdentifier } from './validate.js';
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
  /** Aborted when the delivery is lost (connection dropped); the gateway then redelivers it. */
  signal: AbortSignal;
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
  /** Receives connection failures and exceptions thrown by listeners. Default: listener exceptions go to console.error. */
  onError?: (error: unknown) => void;
}

export interface WaitOptions {
  /** Also resolve with a matching event already stored after this event id. */
  after?: string;
  signal?: AbortSignal;
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

interface ConsumerEntry {
  readonly handle: string;
  readonly domain: string;
  readonly name: string;
  readonly handler: AnyHandler;
}

interface WaitEntry {
  readonly handle: string;
  readonly domain: string;
  readonly pid: string;
  readonly names: string[];
  readonly afterId: string | undefined;
  afterPosition: Position | undefined;
  readonly timeout: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Called after each successful registration; starts the clock the first time. */
  registered(): void;
  resolve(event: StoredEvent): void;
  reject(error: unknown): void;
}

const keyOf = (domain: string, name: string): string => `${domain}\u001f${name}`;

export class EventflowClient<M extends EventMap = EventMap> {
  readonly #connection: Connection;
  readonly #requests: RequestManager;
  readonly #heartbeatInterval: number;
  readonly #onError: (error: unknown) => void;

  readonly #subscriptions = new SubscriptionRegistry<AnyListener>();
  /** (domain, name) keys registered on the current connection. */
  readonly #registered = new Set<string>();
  /** Serialises subscribe/unsubscribe per key so mount/unmount/mount cannot double-subscribe. */
  readonly #chains = new Map<string, Promise<void>>();

  readonly #consumers = new Map<string, ConsumerEntry>();
  readonly #consumersRegistered = new Set<string>();
  readonly #deliveries = new Map<string, AbortController>();
  /** Running consume handlers and the signal of their delivery. */
  readonly #inFlight = new Map<Promise<void>, AbortSignal>();

  readonly #waits = new Map<string, WaitEntry>();
  readonly #deletedListeners = new Set<(deleted: Omit<DeletedFrame, 'type'>) => void>();
  #nextHandle = 1;
  /** Incremented per connection, so that answers from a previous connection are not trusted. */
  #generation = 0;
  #closing = false;
  #closed: Promise<void> | undefined;
  #lastFrameAt = 0;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  /** Callers waiting for the connection ('open'), a subscription key ('s…') or a consumer ('c…'). */
  readonly #waiters = new Waiters();

  constructor(connect: Connector, options: ClientOptions = {}) {
    this.#heartbeatInterval = options.heartbeatInterval ?? 20_000;
    this.#onError =
      options.onError ??
      ((error) => {
        if (error instanceof EventflowError && error.code === 'E_EVENTFLOW_CONNECTION_FAILED') return;
        console.error('[eventflow]', error);
      });
    this.#requests = new RequestManager((frame) => this.#connection.send(frame), options.requestTimeout ?? 10_000);
    this.#connection = new Connection(
      connect,
      { handshakeTimeout: options.handshakeTimeout ?? 10_000, reconnect: options.reconnect ?? {}, clientName: options.clientName },
      {
        open: () => this.#onOpen(),
        frame: (frame) => this.#onFrame(frame),
        lost: () => this.#onLost(),
        error: (error) => this.#onError(error),
      },
    );
  }

  // ── connection ──────────────────────────────────────────────────────────────────────────

  get state(): ConnectionState {
    return this.#connection.state;
  }

  onStateChange(listener: (state: ConnectionState) => void): () => void {
    return this.#connection.onStateChange(listener);
  }

  /**
   * Calls `listener` when events are deleted through the gateway in a domain this client
   * subscribes to (`id` absent: the whole eventlog of `pid`). Caches use it to drop what they hold.
   */
  onDeleted(listener: (deleted: Omit<DeletedFrame, 'type'>) => void): () => void {
    this.#deletedListeners.add(listener);
    return () => this.#deletedListeners.delete(listener);
  }

  /** Resolves once the client is connected (immediately if it is). */
  ready(signal?: AbortSignal): Promise<void> {
    this.#assertUsable();
    if (this.state === 'open') return Promise.resolve();
    return this.#waiters.wait('open', 'ready', signal);
  }

  /** Sends any operation of the protocol; the typed methods below are built on it. */
  call<O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions): Promise<Result<O>> {
    this.#assertUsable();
    return this.#requests.request(op, params, options);
  }

  // ── publishing ──────────────────────────────────────────────────────────────────────────

  /** Stores and routes an event; resolves with its id once it is durably stored. Retrying is safe: the id makes it idempotent. */
  async publish<D extends DomainOf<M>, N extends NameOf<M, D>>(event: PublishInput<M, D, N>, options?: RequestOptions): Promise<string> {
    const input = withId(event);
    return (await this.call('publish', { event: input }, options)).id;
  }

  /** Stores an event without routing it (v4's persist). */
  async persist<D extends DomainOf<M>, N extends NameOf<M, D>>(event: PublishInput<M, D, N>, options?: RequestOptions): Promise<string> {
    return (await this.call('persist', { event: withId(event) }, options)).id;
  }

  /** Stores an event that is routed at `date` (exactly once); resolves with its id. */
  async schedule<D extends DomainOf<M>, N extends NameOf<M, D>>(
    date: Date | number | string,
    event: PublishInput<M, D, N>,
    options?: RequestOptions,
  ): Promise<string> {
    return (await this.call('schedule', { at: toIso(date, 'date'), event: withId(event) }, options)).id;
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
    let registered!: () => void;
    const isRegistered = new Promise<void>((resolve) => (registered = resolve));
    const outcome = this.#wait(input.domain, input.pid, options.outcomes ?? ['success', 'failed'], options.timeout ?? 10_000, options, registered);
    outcome.catch(() => undefined); // observed below; avoids an unhandled rejection if publish fails first
    await Promise.race([isRegistered, outcome]);
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
    this.#assertUsable();
    assertIdentifier(domain, 'domain');
    assertIdentifier(name, 'name');
    const anyListener = listener as unknown as AnyListener;
    this.#subscriptions.add(domain, name, anyListener);
    const key = keyOf(domain, name);
    // A pending chain may be about to unsubscribe the key: wait for the reconciliation instead.
    const settled = this.#registered.has(key) && !this.#chains.has(key);
    const registered = settled ? Promise.resolve() : this.#waiters.wait(`s${key}`, 'subscribe', options.signal);
    void this.#reconcile(domain, name);
    try {
      await registered;
    } catch (error) {
      // Aborted or refused: the listener must not linger and be registered on a later connection.
      await this.unsubscribe(domain, name, listener);
      throw error;
    }
    return { unsubscribe: () => this.unsubscribe(domain, name, listener) };
  }

  /** Removes exactly this listener; other listeners, also of the same domain, are untouched. */
  async unsubscribe<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, listener: Listener<EventOf<M, D, N>>): Promise<void> {
    if (this.#subscriptions.remove(domain, name, listener as unknown as AnyListener)) await this.#reconcile(domain, name);
  }

  /** The async-iterator form of subscribe: `for await (const event of client.events('orders', '*'))`. */
  events<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, options: { signal?: AbortSignal; bufferSize?: number } = {}): AsyncIterableIterator<EventOf<M, D, N>> {
    const listener: Listener<EventOf<M, D, N>> = (event) => queue.push(event);
    const queue = createAsyncQueue<EventOf<M, D, N>>(() => {
      options.signal?.removeEventListener('abort', onAbort);
      void this.unsubscribe(domain, name, listener).catch(this.#onError);
    }, options.bufferSize);
    const onAbort = (): void => void queue.return();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    this.subscribe(domain, name, listener).catch((error: unknown) => queue.fail(error));
    return queue;
  }

  #reconcile(domain: string, name: string): Promise<void> {
    const key = keyOf(domain, name);
    const next = (this.#chains.get(key) ?? Promise.resolve()).then(() => this.#reconcileNow(domain, name, key));
    this.#chains.set(key, next);
    void next.finally(() => {
      if (this.#chains.get(key) === next) this.#chains.delete(key);
    });
    return next;
  }

  async #reconcileNow(domain: string, name: string, key: string): Promise<void> {
    if (this.state !== 'open') return; // re-run on open
    const entry = this.#subscriptions.get(domain, name);
    const generation = this.#generation;
    try {
      if (entry && !this.#registered.has(key)) {
        const { head } = await this.#requests.request('subscribe', { domain, name, ...(entry.position === undefined ? {} : { after: entry.position }) }, {}, false);
        if (generation !== this.#generation) return;
        // A resumed subscription keeps its position: the replay that follows starts there. A new
        // one starts at head, so older events published to others are not delivered.
        entry.position ??= head;
        this.#registered.add(key);
        this.#waiters.resolve(`s${key}`);
        // Listeners may all have left while the request was in flight.
        if (!this.#subscriptions.isCurrent(entry)) await this.#reconcileNow(domain, name, key);
      } else if (!entry && this.#registered.has(key)) {
        await this.#requests.request('unsubscribe', { domain, name }, {}, false);
        if (generation === this.#generation) this.#registered.delete(key);
      } else if (entry) {
        this.#waiters.resolve(`s${key}`); // already registered: a later listener joined it
      }
    } catch (error) {
      if (error === connectionLost) return;
      this.#waiters.reject(`s${key}`, error);
      this.#onError(error);
    }
  }

  #dispatchEvent(frame: EventFrame): void {
    const { event } = frame;
    for (const name of frame.names) {
      const key = this.#subscriptions.get(event.domain, name);
      if (!key) continue;
      // Resumed subscriptions may overlap with what was already delivered: skip by position.
      if (key.position !== undefined && event.position <= key.position) continue;
      key.position = event.position;
      for (const listener of [...key.listeners]) {
        try {
          listener(event);
        } catch (error) {
          this.#onError(error);
        }
      }
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
    this.#assertUsable();
    assertIdentifier(domain, 'domain');
    assertIdentifier(name, 'name');
    const entry: ConsumerEntry = { handle: `c${this.#nextHandle++}`, domain, name, handler: handler as unknown as AnyHandler };
    this.#consumers.set(entry.handle, entry);
    const registered = this.#waiters.wait(entry.handle, 'consume', options.signal);
    void this.#registerConsumer(entry);
    try {
      await registered;
    } catch (error) {
      // Aborted or refused: the consumer must not linger and be registered on a later connection.
      await this.#removeConsumer(entry).catch(() => undefined);
      throw error;
    }
    return { remove: () => this.#removeConsumer(entry) };
  }

  /** Removes exactly this handler's consumer; nothing else in the domain is touched. */
  async removeConsumer<D extends DomainOf<M>, N extends NameOf<M, D> | '*'>(domain: D, name: N, handler: ConsumeHandler<EventOf<M, D, N>>): Promise<void> {
    for (const entry of this.#consumers.values()) {
      if (entry.domain === domain && entry.name === name && entry.handler === (handler as unknown as AnyHandler)) {
        await this.#removeConsumer(entry);
        return;
      }
    }
  }

  async #removeConsumer(entry: ConsumerEntry): Promise<void> {
    if (!this.#consumers.delete(entry.handle)) return;
    this.#waiters.reject(entry.handle, new EventflowError('E_EVENTFLOW_ABORTED', 'the consumer was removed before it was registered'));
    if (!this.#consumersRegistered.delete(entry.handle) || this.state !== 'open') return;
    try {
      await this.#requests.request('removeConsumer', { consumer: entry.handle }, {}, false);
    } catch (error) {
      if (error !== connectionLost) throw error;
    }
  }

  async #registerConsumer(entry: ConsumerEntry): Promise<void> {
    if (this.state !== 'open') return;
    const generation = this.#generation;
    try {
      await this.#requests.request('consume', { consumer: entry.handle, domain: entry.domain, name: entry.name }, {}, false);
      if (generation !== this.#generation) return;
      if (!this.#consumers.has(entry.handle)) {
        // Removed while registering: take it back off the gateway.
        await this.#requests.request('removeConsumer', { consumer: entry.handle }, {}, false);
        return;
      }
      this.#consumersRegistered.add(entry.handle);
      this.#waiters.resolve(entry.handle);
    } catch (error) {
      if (error === connectionLost) return;
      this.#waiters.reject(entry.handle, error);
      this.#onError(error);
    }
  }

  #handleDelivery(frame: DeliveryFrame): void {
    const entry = this.#consumers.get(frame.consumer);
    if (!entry || this.#closing) {
      void this.#settle(frame.delivery, 'release');
      return;
    }
    const controller = new AbortController();
    this.#deliveries.set(frame.delivery, controller);
    const run = (async () => {
      let outcome: 'success' | 'failed' = 'success';
      let error: { message: string; code?: string } | undefined;
      try {
        await entry.handler(frame.event, { attempt: frame.attempt, signal: controller.signal });
      } catch (cause) {
        outcome = 'failed';
        error = describeFailure(cause);
      }
      this.#deliveries.delete(frame.delivery);
      if (!controller.signal.aborted) await this.#settle(frame.delivery, outcome, error);
    })();
    this.#inFlight.set(run, controller.signal);
    void run.finally(() => this.#inFlight.delete(run));
  }

  async #settle(delivery: string, outcome: 'success' | 'failed' | 'release', error?: { message: string; code?: string }): Promise<void> {
    try {
      await this.#requests.request('settle', { delivery, outcome, ...(error ? { error } : {}) }, {}, false);
    } catch (cause) {
      // A lost connection or an expired delivery: the gateway redelivers the event; nothing to do here.
      if (cause !== connectionLost && !(cause instanceof EventflowError && cause.code === 'E_EVENTFLOW_UNKNOWN_DELIVERY')) this.#onError(cause);
    }
  }

  // ── waits ───────────────────────────────────────────────────────────────────────────────

  /**
   * Resolves with the first event of (domain, pid) named one of `names`. The wait is registered at
   * the gateway before the timeout starts; with `after`, an outcome already stored after that
   * event also resolves it. Concurrent waits are independent of each other and of subscriptions.
   */
  wait<D extends DomainOf<M>>(
    domain: D,
    pid: string,
    names: string | string[] = ['success', 'failed'],
    timeout = 10_000,
    options: WaitOptions = {},
  ): Promise<EventOf<M, D>> {
    return this.#wait(domain, pid, typeof names === 'string' ? [names] : names, timeout, options) as Promise<EventOf<M, D>>;
  }

  #wait(domain: string, pid: string, names: string[], timeout: number, options: WaitOptions, onRegistered?: () => void): Promise<StoredEvent> {
    try {
      this.#assertUsable();
      assertIdentifier(domain, 'domain');
      assertIdentifier(pid, 'pid');
      names.forEach((name, i) => assertIdentifier(name, `names.${i}`));
      if (names.length === 0) throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', 'names: must name at least one event');
      if (options.after !== undefined) assertIdentifier(options.after, 'after');
      if (!Number.isFinite(timeout) || timeout < 0) throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `timeout: must be a non-negative number of ms, got ${timeout}`);
    } catch (error) {
      return Promise.reject(error);
    }
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(new EventflowError('E_EVENTFLOW_ABORTED', 'wait was aborted', { cause: signal.reason }));
    return new Promise<StoredEvent>((resolve, reject) => {
      const onAbort = (): void => fail(new EventflowError('E_EVENTFLOW_ABORTED', 'wait was aborted', { cause: signal?.reason }));
      const cleanup = (): void => {
        clearTimeout(entry.timer);
        signal?.removeEventListener('abort', onAbort);
        this.#waits.delete(entry.handle);
      };
      const fail = (error: unknown): void => {
        if (!this.#waits.has(entry.handle)) return;
        cleanup();
        if (this.state === 'open') void this.#requests.request('cancelWait', { wait: entry.handle }, {}, false).catch(() => undefined);
        reject(error);
      };
      const entry: WaitEntry = {
        handle: `w${this.#nextHandle++}`,
        domain,
        pid,
        names,
        afterId: options.after,
        afterPosition: undefined,
        timeout,
        timer: undefined,
        registered: () => started(),
        resolve: (event) => {
          cleanup();
          resolve(event);
        },
        reject: fail,
      };
      const started = (): void => {
        if (entry.timer !== undefined || !this.#waits.has(entry.handle)) return;
        entry.timer = setTimeout(
          () => fail(new EventflowError('E_EVENTFLOW_WAIT_TIMEOUT', `wait timed out (${timeout}) for ${domain} › ${pid} › ${names.join(' | ')}`, { details: { domain, pid, names, timeout } })),
          timeout,
        );
        onRegistered?.();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waits.set(entry.handle, entry);
      void this.#registerWait(entry);
    });
  }

  async #registerWait(entry: WaitEntry): Promise<void> {
    if (this.state !== 'open') return;
    const generation = this.#generation;
    try {
      const { head } = await this.#requests.request(
        'wait',
        {
          wait: entry.handle,
          domain: entry.domain,
          pid: entry.pid,
          names: entry.names,
          ...(entry.afterId !== undefined && entry.afterPosition === undefined ? { afterId: entry.afterId } : {}),
          ...(entry.afterPosition !== undefined ? { afterPosition: entry.afterPosition } : {}),
        },
        {},
        false,
      );
      if (generation !== this.#generation) return;
      // Re-registering after a reconnect asks for outcomes stored since the first registration.
      entry.afterPosition ??= head;
      entry.registered();
    } catch (error) {
      if (error !== connectionLost) entry.reject(error);
    }
  }

  #handleWaited(frame: WaitedFrame): void {
    this.#waits.get(frame.wait)?.resolve(frame.event);
  }

  // ── reads and writes ────────────────────────────────────────────────────────────────────

  async delete(eventId: string): Promise<boolean> {
    return (await this.call('delete', { id: eventId })).deleted;
  }

  async deleteEventlog(domain: string, pid: string): Promise<boolean> {
    return (await this.call('deleteEventlog', { domain, pid })).deleted;
  }

  /** Throws E_EVENTFLOW_EVENT_NOT_FOUND for an unknown id. */
  async read(eventId: string): Promise<StoredEvent> {
    return (await this.call('read', { id: eventId })).event;
  }

  /** The events of a process, oldest first; `after` returns only those after a position. */
  async readEventlog<D extends DomainOf<M>>(domain: D, pid: string, options: { after?: Position } = {}): Promise<Array<EventOf<M, D>>> {
    const params = options.after === undefined ? { domain, pid } : { domain, pid, after: options.after };
    return (await this.call('readEventlog', params)).events as Array<EventOf<M, D>>;
  }

  /** Events of a process with min ≤ timestamp ≤ max. */
  async readEventlogByTimestamp<D extends DomainOf<M>>(domain: D, pid: string, min: Date | number | string, max: Date | number | string): Promise<Array<EventOf<M, D>>> {
    return (await this.call('readEventlogByTimestamp', { domain, pid, from: toIso(min, 'min'), to: toIso(max, 'max') })).events as Array<EventOf<M, D>>;
  }

  async readEventlogFilteredByNames<D extends DomainOf<M>>(domain: D, pid: string, names: string[]): Promise<Array<EventOf<M, D>>> {
    return (await this.call('readEventlogFilteredByNames', { domain, pid, names })).events as Array<EventOf<M, D>>;
  }

  /** Events associated with the child process (domain, cpid); `domain` is the child's domain. */
  async readEventlogByChildProcess(domain: string, cpid: string): Promise<StoredEvent[]> {
    return (await this.call('readEventlogByChildProcess', { domain, cpid })).events;
  }

  async readEventlogByEid(eid: string): Promise<StoredEvent[]> {
    return (await this.call('readEventlogByEid', { eid })).events;
  }

  async readEventlogByDomainAndEid<D extends DomainOf<M>>(domain: D, eid: string): Promise<Array<EventOf<M, D>>> {
    return (await this.call('readEventlogByDomainAndEid', { domain, eid })).events as Array<EventOf<M, D>>;
  }

  /** The pids of a domain, as strings (v4 returned `{pid}` rows), in binary order. */
  async readDistinctPidByDomain(domain: string): Promise<string[]> {
    return (await this.call('readDistinctPidByDomain', { domain })).pids;
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

  composeEventlogState(eventlog: ReadonlyArray<{ data: unknown }>, size = 10): State {
    return composeEventlogState(eventlog, size);
  }

  /**
   * Lets in-flight consume handlers finish and settle (up to `drainTimeout`, default 30 s), then
   * closes. Deliveries arriving meanwhile are released to other consumers. Pending requests and
   * waits reject with E_EVENTFLOW_CLIENT_CLOSED.
   */
  close(options: { drainTimeout?: number } = {}): Promise<void> {
    this.#closed ??= (async () => {
      this.#closing = true;
      await this.#drain(options.drainTimeout ?? 30_000);
      clearInterval(this.#heartbeat);
      const error = new EventflowError('E_EVENTFLOW_CLIENT_CLOSED', 'the client was closed');
      for (const wait of [...this.#waits.values()]) wait.reject(error);
      this.#requests.failAll(error);
      this.#waiters.rejectAll(error);
      this.#connection.close();
    })();
    return this.#closed;
  }

  /** Waits for handlers whose delivery is still ours; lost ones are redelivered elsewhere anyway. */
  async #drain(timeout: number): Promise<void> {
    const deadline = Date.now() + timeout;
    for (;;) {
      const live = [...this.#inFlight].filter(([, signal]) => !signal.aborted).map(([run]) => run);
      const left = deadline - Date.now();
      if (live.length === 0 || left <= 0) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([Promise.allSettled(live), new Promise((resolve) => (timer = setTimeout(resolve, Math.min(left, 100))))]);
      clearTimeout(timer);
    }
  }

  // ── internals ───────────────────────────────────────────────────────────────────────────

  #onOpen(): void {
    this.#generation++;
    this.#lastFrameAt = Date.now();
    this.#startHeartbeat();
    this.#waiters.resolve('open');
    for (const key of this.#subscriptions.keys()) void this.#reconcile(key.domain, key.name);
    for (const entry of this.#consumers.values()) void this.#registerConsumer(entry);
    for (const entry of this.#waits.values()) void this.#registerWait(entry);
    this.#requests.flush();
  }

  #onLost(): void {
    clearInterval(this.#heartbeat);
    this.#registered.clear();
    this.#consumersRegistered.clear();
    // The gateway hands unsettled deliveries of a dropped connection to other consumers.
    for (const controller of this.#deliveries.values()) controller.abort(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', 'connection lost; the event will be redelivered'));
    this.#deliveries.clear();
    this.#requests.lost();
  }

  #onFrame(frame: ServerFrame): void {
    this.#lastFrameAt = Date.now();
    switch (frame.type) {
      case 'result':
      case 'error':
        if (frame.type === 'error' && frame.id === undefined) this.#onError(new EventflowError('E_EVENTFLOW_INTERNAL', `gateway: ${frame.code}: ${frame.message}`));
        this.#requests.settle(frame);
        return;
      case 'event':
        this.#dispatchEvent(frame);
        return;
      case 'delivery':
        this.#handleDelivery(frame);
        return;
      case 'waited':
        this.#handleWaited(frame);
        return;
      case 'deleted': {
        const { type: _type, ...deleted } = frame;
        for (const listener of [...this.#deletedListeners]) {
          try {
            listener(deleted);
          } catch (error) {
            this.#onError(error);
          }
        }
        return;
      }
      case 'welcome':
        return;
    }
  }

  #startHeartbeat(): void {
    clearInterval(this.#heartbeat);
    const interval = this.#heartbeatInterval;
    if (interval <= 0) return;
    this.#heartbeat = setInterval(() => {
      if (this.state !== 'open' || Date.now() - this.#lastFrameAt < interval) return;
      this.#requests.request('ping', {}, { timeout: interval }, false).catch((error: unknown) => {
        if (error instanceof EventflowError && error.code === 'E_EVENTFLOW_REQUEST_TIMEOUT') this.#connection.reconnect();
      });
    }, interval);
    // A heartbeat alone must not keep a Node process alive.
    (this.#heartbeat as { unref?: () => void }).unref?.();
  }

  #assertUsable(): void {
    if (this.#closing) throw new EventflowError('E_EVENTFLOW_CLIENT_CLOSED', 'the client was closed; create a new one');
  }
}

function withId(event: Partial<EventInput>): EventInput {
  assertEventInput(event);
  return { ...event, id: event.id ?? generateEventId() };
}

function toIso(value: Date | number | string, field: string): string {
  const date = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(date.getTime())) {
    throw new EventflowError('E_EVENTFLOW_INVALID_DATE', `${field}: cannot parse ${JSON.stringify(value)} as a date; pass a Date, epoch ms or an ISO-8601 string with an offset`);
  }
  return date.toISOString();
}

function describeFailure(cause: unknown): { message: string; code?: string } {
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return { message: cause.message.slice(0, 4096), ...(typeof code === 'string' ? { code: code.slice(0, 128) } : {}) };
  }
  return { message: String(cause).slice(0, 4096) };
}
