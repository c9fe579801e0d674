/**
 * What the client has registered at the gateway, kept so that every new connection registers it
 * again: subscriptions (per (domain, name), with the position to resume from), consumers and
 * waits (by handle, 'c…' or 'w…'). Callers never re-subscribe after a reconnect. Registration
 * requests are sent on the current connection only: a dropped one is made anew on the next.
 */
import { notify } from './connection.js';
import { DEFAULT_WAIT_TIMEOUT } from './defaults.js';
import type { DeliveryHandler } from './deliveries.js';
import { EventflowError } from './errors.js';
import type { EventFrame, MatchedFrame, OperationName, Params, Result, StoredEvent, WaitedFrame, WaitFailedFrame } from './protocol.js';
import { connectionLost, pending, type RequestOptions, type Settle } from './requests.js';
import { streamKey } from './stream-key.js';
import { SubscriptionRegistry } from './subscriptions.js';
import { Waiters } from './waiters.js';
import type { NamespacePattern } from './namespace-pattern.js';
import type { PatternSubscriptions } from './pattern-subscriptions.js';

export type Send = <O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions) => Promise<Result<O>>;
export type AnyListener = (event: StoredEvent) => void;

/** A consumer or a wait, by its handle. */
interface Registration {
  /** Registers it on the current connection (again after each reconnect). */
  register(): Promise<void>;
  /** A wait's: resolves it with `event`, or fails it with `error`. */
  settle?: Settle<StoredEvent>;
  /** A consumer's. */
  domain?: string;
  name?: string;
  handler?: DeliveryHandler;
  /** A consumer's position: it catches up on unclaimed events after it when it registers again. */
  after?: number;
  remove?(): Promise<void>;
}

export class Registrations {
  readonly #send: Send;
  readonly #isOpen: () => boolean;
  readonly #onError: (error: unknown) => void;
  readonly #subscriptions = new SubscriptionRegistry<AnyListener>();
  /** Subscription keys and consumer handles registered on the current connection (they cannot collide). */
  readonly #registered = new Set<string>();
  /** Serialises subscribe/unsubscribe per key so mount/unmount/mount cannot double-subscribe. */
  readonly #chains = new Map<string, Promise<void>>();
  readonly #entries = new Map<string, Registration>();
  /** Made by the first pattern subscription (pattern-subscriptions.ts). */
  #patterns: PatternSubscriptions | undefined;
  /** Callers waiting for the connection ('open'), a subscription key or a consumer handle. */
  readonly waiters = new Waiters();
  #nextHandle = 1;
  /** Incremented per connection, so that answers from a previous connection are not trusted. */
  #generation = 0;

  constructor(send: Send, isOpen: () => boolean, onError: (error: unknown) => void) {
    this.#send = send;
    this.#isOpen = isOpen;
    this.#onError = onError;
  }

  /** A new connection: everything is registered on it again. */
  opened(): void {
    this.#generation++;
    this.waiters.settle('open');
    for (const key of this.#subscriptions.keys()) void this.#reconcile(key.domain, key.name);
    this.#patterns?.opened();
    for (const entry of this.#entries.values()) void entry.register();
  }

  lost(): void {
    this.#registered.clear();
  }

  /** Fails every wait and waiter with `error` (the client closed). */
  close(error: unknown): void {
    for (const entry of this.#entries.values()) entry.settle?.(error);
    this.waiters.rejectAll(error);
  }

  // ── subscriptions ──

  /** Adds a listener; resolves once the gateway has the subscription, or undoes it when that fails. */
  async subscribe(domain: string, name: string, listener: AnyListener, signal: AbortSignal | undefined, start: { after?: number; last?: number } = {}): Promise<void> {
    const entry = this.#subscriptions.add(domain, name, listener);
    // Where a new subscription starts (a replay first); one that exists already goes on as it is.
    if (entry.listeners.size === 1 && entry.position === undefined) {
      entry.position = start.after;
      entry.last = start.after === undefined ? start.last : undefined;
    }
    const key = streamKey(domain, name);
    // A pending chain may be about to unsubscribe the key: wait for the reconciliation instead.
    const done = this.#registered.has(key) && !this.#chains.has(key) ? undefined : this.waiters.wait(key, 'subscribe', signal);
    void this.#reconcile(domain, name);
    await registration(done, () => this.unsubscribe(domain, name, listener));
  }

  async unsubscribe(domain: string, name: string, listener: AnyListener): Promise<void> {
    if (this.#subscriptions.remove(domain, name, listener)) await this.#reconcile(domain, name);
  }

  dispatch({ event, names }: EventFrame): void {
    for (const name of names) {
      const key = this.#subscriptions.get(event.domain, name);
      // Resumed subscriptions may overlap with what was already delivered: skip by position.
      if (!key || event.position <= (key.position ?? -1)) continue;
      key.position = event.position;
      notify(key.listeners, event, this.#onError);
    }
  }

  // ── pattern subscriptions: their code comes with the pattern value (namespace-pattern.ts), so a bundle without patterns leaves it out ──

  patterns(pattern: NamespacePattern): PatternSubscriptions {
    return (this.#patterns ??= pattern.subscriptions({
      send: (op, params) => this.#sendRegistration(op, params),
      registered: this.#registered,
      waiters: this.waiters,
      chains: this.#chains,
      chain: (key, work) => this.#chain(key, work),
      refused: (key, error) => this.#refused(key, error),
      onError: this.#onError,
      isOpen: this.#isOpen,
      handle: () => `p${this.#nextHandle++}`,
    }));
  }

  dispatchMatched(frame: MatchedFrame): void {
    this.#patterns?.dispatch(frame);
  }

  /** Runs `work` after the previous reconciliation of `key`: one at a time per key, so mount/unmount/mount cannot double-subscribe. */
  #chain(key: string, work: () => Promise<void>): Promise<void> {
    const next = (this.#chains.get(key) ?? Promise.resolve()).then(work);
    this.#chains.set(key, next);
    void next.finally(() => this.#chains.get(key) === next && this.#chains.delete(key));
    return next;
  }

  #reconcile(domain: string, name: string): Promise<void> {
    const key = streamKey(domain, name);
    return this.#chain(key, () => this.#reconcileNow(domain, name, key));
  }

  async #reconcileNow(domain: string, name: string, key: string): Promise<void> {
    if (!this.#isOpen()) return; // re-run on open
    const entry = this.#subscriptions.get(domain, name);
    try {
      if (entry && !this.#registered.has(key)) {
        const result = await this.#sendRegistration('subscribe', { domain, name, after: entry.position, last: entry.position === undefined ? entry.last : undefined });
        if (!result) return;
        // A resumed subscription keeps its position: the replay that follows starts there. A new
        // one starts at head, so older events published to others are not delivered, or where the
        // gateway began its replay of the last N.
        entry.position ??= result.after ?? result.head;
        entry.last = undefined;
        this.#registered.add(key);
        this.waiters.settle(key);
        // Listeners may all have left while the request was in flight.
        if (this.#subscriptions.get(domain, name) !== entry) await this.#reconcileNow(domain, name, key);
      } else if (entry) {
        this.waiters.settle(key); // already registered: a later listener joined it
      } else if (this.#registered.has(key) && (await this.#sendRegistration('unsubscribe', { domain, name }))) {
        this.#registered.delete(key);
      }
    } catch (error) {
      this.#refused(key, error);
    }
  }

  // ── consumers ──

  /** Registers a consumer; resolves with its `remove` once the gateway has it. */
  async consume(domain: string, name: string, handler: DeliveryHandler, signal: AbortSignal | undefined, group?: string): Promise<() => Promise<void>> {
    const consumer = `c${this.#nextHandle++}`;
    const remove = async (): Promise<void> => {
      if (!this.#entries.delete(consumer)) return;
      this.waiters.settle(consumer, new EventflowError('E_EVENTFLOW_ABORTED', 'consumer removed before it was registered'));
      if (!this.#registered.delete(consumer) || !this.#isOpen()) return;
      await this.#send('removeConsumer', { consumer }).catch((error: unknown) => {
        if (error !== connectionLost) throw error;
      });
    };
    const register = async (): Promise<void> => {
      try {
        const entry = this.#entries.get(consumer);
        const result = await this.#sendRegistration('consume', { consumer, domain, name, after: entry?.after, ...(group ? { group } : {}) });
        if (!result) return;
        if (entry) entry.after ??= result.head;
        // Removed while registering: take it back off the gateway.
        if (!this.#entries.has(consumer)) return void (await this.#send('removeConsumer', { consumer }));
        this.#registered.add(consumer);
        this.waiters.settle(consumer);
      } catch (error) {
        this.#refused(consumer, error);
      }
    };
    this.#entries.set(consumer, { domain, name, handler, register, remove });
    const done = this.waiters.wait(consumer, 'consume', signal);
    void register();
    await registration(done, remove);
    return remove;
  }

  /** Removes the consumer of exactly this handler on (domain, name). */
  removeConsumer(domain: string, name: string, handler: DeliveryHandler): Promise<void> | undefined {
    for (const entry of this.#entries.values()) if (entry.handler === handler && entry.domain === domain && entry.name === name) return entry.remove?.();
    return undefined;
  }

  /** The handler of a consumer handle, which also moves the consumer's position past `position`. */
  handlerFor(consumer: string, position: number): DeliveryHandler | undefined {
    const entry = this.#entries.get(consumer);
    if (entry?.handler) entry.after = Math.max(entry.after ?? 0, position);
    return entry?.handler;
  }

  // ── waits ──

  waited(frame: WaitedFrame): void {
    this.#entries.get(frame.wait)?.settle?.(undefined, frame.event);
  }

  /** The wait's request event failed to be consumed: the wait (request()) rejects with E_EVENTFLOW_CONSUMER_FAILED. */
  waitFailed(frame: WaitFailedFrame): void {
    this.#entries.get(frame.wait)?.settle?.(new EventflowError('E_EVENTFLOW_CONSUMER_FAILED', frame.message, { details: frame.details }));
  }

  /** A wait on checked arguments (client.ts): registered at once and after every reconnect. */
  wait(params: Omit<Params<'wait'>, 'wait'>, timeout = DEFAULT_WAIT_TIMEOUT, signal: AbortSignal | undefined, onRegistered?: (registered?: unknown) => void): Promise<StoredEvent> {
    const { domain, pid, names } = params;
    return pending<StoredEvent>('wait', signal, (settle) => {
      const wait = `w${this.#nextHandle++}`;
      const request: Params<'wait'> = { ...params, wait };
      let timer: ReturnType<typeof setTimeout> | undefined;
      const register = async (): Promise<void> => {
        try {
          const result = await this.#sendRegistration('wait', request);
          if (!result) return;
          // Re-registering after a reconnect asks for outcomes stored since the first registration,
          // which also starts the clock.
          request.afterPosition ??= result.head;
          request.afterId = undefined;
          if (timer || !this.#entries.has(wait)) return;
          timer = setTimeout(
            () => settle(new EventflowError('E_EVENTFLOW_WAIT_TIMEOUT', `wait timed out (${timeout}) for ${domain} › ${pid} › ${names.join(' | ')}`, { details: { domain, pid, names, timeout } })),
            timeout,
          );
          onRegistered?.();
        } catch (error) {
          if (error !== connectionLost) settle(error);
        }
      };
      this.#entries.set(wait, { register, settle });
      void register();
      return (error) => {
        clearTimeout(timer);
        this.#entries.delete(wait);
        if (error && this.#isOpen()) void this.#send('cancelWait', { wait }).catch(() => undefined);
      };
    });
  }

  // ── internals ──

  /**
   * Sends a registration on the current connection. Undefined when there is none (the next one
   * registers anew), or when the answer came after a newer connection, which is not trusted.
   */
  async #sendRegistration<O extends OperationName>(op: O, params: Params<O>): Promise<Result<O> | undefined> {
    if (!this.#isOpen()) return undefined;
    const current = this.#generation;
    const result = await this.#send(op, params);
    return current === this.#generation ? result : undefined;
  }

  /** A registration failed: its waiters fail, and so does onError (unless only the connection was lost). */
  #refused(key: string, error: unknown): void {
    if (error === connectionLost) return;
    this.waiters.settle(key, error);
    this.#onError(error);
  }
}

/** Awaits a registration; when it is aborted or refused, `undo` takes it back so that it does not linger and come back on a later connection. */
export const registration = (registered: Promise<void> | undefined, undo: () => Promise<void>): Promise<void> | undefined =>
  registered?.catch(async (error: unknown) => {
    await undo().catch(() => undefined);
    throw error;
  });
