/**
 * The client's subscriptions, kept so that every new connection registers them again, per
 * (domain, name) with the position to resume from; callers never re-subscribe after a reconnect.
 * Registration requests are sent on the current connection only: a dropped one is made anew on
 * the next. Pattern subscriptions (pattern-subscriptions.ts) and the features' consumers and
 * waits (features.ts) register through the same plumbing, `host`.
 */
import { notify } from './connection.js';
import type { EventFrame, OperationName, Params, Result, StoredEvent } from './protocol.js';
import { connectionLost, type RequestOptions } from './requests.js';
import { streamKey } from './stream-key.js';
import { SubscriptionRegistry } from './subscriptions.js';
import { Waiters } from './waiters.js';

export type Send = <O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions) => Promise<Result<O>>;
export type AnyListener = (event: StoredEvent) => void;

/** The registration plumbing that pattern subscriptions, consumers and waits use (they keep their own entries). */
export interface RegistrationHost {
  /** Sends a registration on the current connection; undefined when there is none, or when a newer one opened meanwhile. */
  send<O extends OperationName>(op: O, params: Params<O>): Promise<Result<O> | undefined>;
  /** Keys and handles registered on the current connection (they cannot collide). */
  readonly registered: Set<string>;
  /** Callers waiting for a key or handle to be registered. */
  readonly waiters: Waiters;
  readonly chains: ReadonlyMap<string, Promise<void>>;
  /** Runs `work` after the previous reconciliation of `key`, one at a time per key, so that mount/unmount/mount cannot double-subscribe. */
  chain(key: string, work: () => Promise<void>): Promise<void>;
  /** A registration failed: its waiters fail, and so does onError (unless only the connection was lost). */
  refused(key: string, error: unknown): void;
  onError(error: unknown): void;
  isOpen(): boolean;
  /** A new handle for the gateway: `prefix` and a number unique in this client. */
  handle(prefix: string): string;
}

export class Registrations {
  readonly #subscriptions = new SubscriptionRegistry<AnyListener>();
  /** Subscription keys and handles registered on the current connection (they cannot collide). */
  readonly #registered = new Set<string>();
  /** Callers waiting for the connection ('open'), a subscription key or a handle. */
  readonly waiters = new Waiters();
  declare readonly host: RegistrationHost;
  #nextHandle = 1;
  /** Incremented per connection, so that answers from a previous connection are not trusted. */
  #generation = 0;

  constructor(send: Send, isOpen: () => boolean, onError: (error: unknown) => void) {
    const { waiters } = this;
    /** Serialises subscribe/unsubscribe per key. */
    const chains = new Map<string, Promise<void>>();
    this.host = {
      send: async (op, params) => {
        if (!isOpen()) return undefined;
        const current = this.#generation;
        const result = await send(op, params);
        return current === this.#generation ? result : undefined;
      },
      registered: this.#registered,
      waiters,
      chains,
      chain: (key, work) => {
        const next = (chains.get(key) ?? Promise.resolve()).then(work);
        chains.set(key, next);
        void next.finally(() => chains.get(key) === next && chains.delete(key));
        return next;
      },
      refused: (key, error) => {
        if (error === connectionLost) return;
        waiters.settle(key, error);
        onError(error);
      },
      onError,
      isOpen,
      handle: (prefix) => `${prefix}${this.#nextHandle++}`,
    };
  }

  /** A new connection: every subscription is registered on it again. */
  opened(): void {
    this.#generation++;
    this.waiters.settle('open');
    for (const key of this.#subscriptions.keys()) void this.#reconcile(key.domain, key.name);
  }

  lost(): void {
    this.#registered.clear();
  }

  // ── subscriptions ──

  /** Adds a listener; resolves once the gateway has the subscription, or undoes it when that fails. */
  async subscribe(domain: string, name: string, listener: AnyListener, { signal, after, last }: { signal?: AbortSignal | undefined; after?: number | undefined; last?: number | undefined }): Promise<void> {
    const entry = this.#subscriptions.add(domain, name, listener);
    // Where a new subscription starts (a replay first); one that exists already goes on as it is.
    if (entry.listeners.size === 1 && entry.position === undefined) {
      entry.position = after;
      entry.last = after === undefined ? last : undefined;
    }
    const key = streamKey(domain, name);
    // A pending chain may be about to unsubscribe the key: wait for the reconciliation instead.
    const done = this.#registered.has(key) && !this.host.chains.has(key) ? undefined : this.waiters.wait(key, 'subscribe', signal);
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
      notify(key.listeners, event, this.host.onError);
    }
  }


  #reconcile(domain: string, name: string): Promise<void> {
    const key = streamKey(domain, name);
    return this.host.chain(key, () => this.#reconcileNow(domain, name, key));
  }

  async #reconcileNow(domain: string, name: string, key: string): Promise<void> {
    if (!this.host.isOpen()) return; // re-run on open
    const entry = this.#subscriptions.get(domain, name);
    try {
      if (entry && !this.#registered.has(key)) {
        const result = await this.host.send('subscribe', { domain, name, after: entry.position, last: entry.position === undefined ? entry.last : undefined });
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
      } else if (this.#registered.has(key) && (await this.host.send('unsubscribe', { domain, name }))) {
        this.#registered.delete(key);
      }
    } catch (error) {
      this.host.refused(key, error);
    }
  }
}

/** Awaits a registration; when it is aborted or refused, `undo` takes it back so that it does not linger and come back on a later connection. */
export const registration = (registered: Promise<void> | undefined, undo: () => Promise<void>): Promise<void> | undefined =>
  registered?.catch(async (error: unknown) => {
    await undo().catch(() => undefined);
    throw error;
  });
