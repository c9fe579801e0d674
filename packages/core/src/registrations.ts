/**
 * The client's subscriptions, kept so that every new connection registers them again, per
 * (domain, name) with the position to resume from; callers never re-subscribe after a reconnect.
 * Registration requests are sent on the current connection only: a dropped one is made anew on
 * the next. Pattern subscriptions (pattern-subscriptions.ts) and the features' consumers and
 * waits (features.ts) register through the same plumbing, `host`.
 */
import { backoffDelay } from './backoff.js';
import { notify } from './connection.js';
import type { EventflowError } from './errors.js';
import type { EventFrame, OperationName, Params, Position, Result, StoredEvent } from './protocol.js';
import { connectionLost, type RequestOptions } from './requests.js';
import { streamKey } from './stream-key.js';
import { SubscriptionRegistry, type ListenerState, type Start, type SubscriptionKey } from './subscriptions.js';
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
  /**
   * A registration failed: its waiters fail, and so does onError (unless only the connection was lost). With `again`,
   * one the gateway's store could not make (`details.retryable`) is made again shortly instead: a subscription made
   * again on a new connection during a moment's outage was left off until the next connection.
   */
  refused(key: string, error: unknown, again?: () => void): void;
  onError(error: unknown): void;
  isOpen(): boolean;
}

/**
 * Gateway handles for one part of a client (its consumers, waits or pattern subscriptions): `prefix`,
 * one per part, and a number, so that handles never collide with each other or with subscription keys.
 */
export const handles = (prefix: string): (() => string) => {
  let next = 0;
  return () => `${prefix}${++next}`;
};

export class Registrations {
  readonly #subscriptions = new SubscriptionRegistry<AnyListener>();
  /** Subscription keys and handles registered on the current connection (they cannot collide). */
  readonly #registered = new Set<string>();
  /** Callers waiting for the connection ('open'), a subscription key or a handle. */
  readonly waiters = new Waiters();
  declare readonly host: RegistrationHost;
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
      refused: (key, error, again) => {
        if (error === connectionLost) return;
        if (again && (error as EventflowError | undefined)?.details?.retryable) setTimeout(again, backoffDelay(2));
        else {
          waiters.settle(key, error);
          onError(error);
        }
      },
      onError,
      isOpen,
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

  /**
   * Adds a listener; resolves once the gateway has the subscription, or undoes it when that fails.
   * With `after` or `last` the listener gets that history first, also when it joins a subscription
   * other listeners already share (#arrange).
   */
  async subscribe(domain: string, name: string, listener: AnyListener, { signal, after, last }: { signal?: AbortSignal | undefined } & Start): Promise<void> {
    const key = streamKey(domain, name);
    const start = after === undefined && last === undefined ? undefined : { after, last: after === undefined ? last : undefined };
    // Without a start: the events published from now on (from the key's head, when it is known).
    this.#subscriptions.add(domain, name, listener, start ? { start } : { position: this.#subscriptions.get(domain, name)?.head });
    // A pending chain may be about to unsubscribe the key: wait for the reconciliation instead.
    const done = !start && this.#registered.has(key) && !this.host.chains.has(key) ? undefined : this.waiters.wait(key, 'subscribe', signal);
    void this.#reconcile(domain, name);
    await registration(done, () => this.unsubscribe(domain, name, listener));
  }

  async unsubscribe(domain: string, name: string, listener: AnyListener): Promise<void> {
    if (this.#subscriptions.remove(domain, name, listener)) await this.#reconcile(domain, name);
  }

  dispatch({ event, names }: EventFrame): void {
    const { position } = event;
    for (const name of names) {
      const key = this.#subscriptions.get(event.domain, name);
      if (!key) continue;
      if (!(position <= (key.head ?? -1))) key.head = position;
      const listeners: AnyListener[] = [];
      for (const [listener, state] of key.listeners) {
        // Held while its history is arranged; what it has had already (a resumed or shared replay) is skipped.
        if (state.start || position <= (state.position ?? -1)) continue;
        state.position = position;
        listeners.push(listener);
      }
      notify(listeners, event, this.host.onError);
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
      if (!entry) {
        if (this.#registered.has(key) && (await this.host.send('unsubscribe', { domain, name }))) this.#registered.delete(key);
        return;
      }
      if (!(this.#registered.has(key) || (await this.#register(entry, key))) || !(await this.#arrange(entry, key))) return;
      this.waiters.settle(key);
      // Listeners may all have left while a request was in flight.
      if (this.#subscriptions.get(domain, name) !== entry) await this.#reconcileNow(domain, name, key);
    } catch (error) {
      this.host.refused(key, error, () => void this.#reconcile(domain, name));
    }
  }

  /**
   * Registers the subscription from the lowest position a listener needs (a resumed one continues
   * where it was, one that asked for `after` from there), or, when none has a position yet, with
   * the longest `last` asked for. False when the connection went away meanwhile.
   */
  async #register(entry: SubscriptionKey<AnyListener>, key: string): Promise<boolean> {
    const { domain, name, listeners } = entry;
    let after: Position | undefined;
    let last: number | undefined;
    let first: ListenerState | undefined;
    for (const state of listeners.values()) {
      const { start } = state;
      if (start?.after !== undefined) [state.position, state.start] = [start.after, undefined];
      const position = state.start ? undefined : state.position;
      // (Comparisons with undefined are false.)
      if (position !== undefined && !(position >= after!)) after = position;
      if (start?.last! > (last ?? 0)) [first, last] = [state, start!.last];
    }
    if (after !== undefined) first = last = undefined;
    if (first) first.start = undefined;
    const result = await this.host.send('subscribe', { domain, name, after, last });
    if (!result) return false;
    // The one that asked for the last N starts where the gateway began that replay; the others from its head.
    for (const state of listeners.values()) if (!state.start) state.position ??= state === first ? (result.after ?? result.head) : result.head;
    if (!(result.head <= entry.head!)) entry.head = result.head;
    this.#registered.add(key);
    return true;
  }

  /**
   * Gives the listeners that joined a registered subscription with a start their history. Each
   * start becomes a position (`last` as the gateway counts it: a repeated subscribe answers where
   * the last N begin, without replaying). When one needs events older than the subscription has
   * delivered (or the subscription's head is unknown here), the gateway subscription is made anew
   * from the lowest position any listener needs (the gateway replays only to a new subscription);
   * listeners skip what they had, so none sees a gap or a duplicate. False when the connection
   * went away meanwhile.
   */
  async #arrange(entry: SubscriptionKey<AnyListener>, key: string): Promise<boolean> {
    const { domain, name, listeners } = entry;
    const waiting: ListenerState[] = [];
    for (const state of listeners.values()) {
      const last = state.start?.last;
      if (last !== undefined) {
        const answer = await this.host.send('subscribe', { domain, name, last });
        if (!answer) return false;
        if (state.start) state.start = { after: answer.after ?? answer.head };
      }
      if (state.start) waiting.push(state);
    }
    const older = waiting.some((state) => !(state.start!.after! >= entry.head!));
    if (older) {
      if (!(await this.host.send('unsubscribe', { domain, name }))) return false;
      // Until it is made anew, the gateway sends nothing more of this subscription.
      this.#registered.delete(key);
    }
    for (const state of waiting) [state.position, state.start] = [state.start!.after, undefined];
    return !older || this.#register(entry, key);
  }
}

/** Awaits a registration; when it is aborted or refused, `undo` takes it back so that it does not linger and come back on a later connection. */
export const registration = (registered: Promise<void> | undefined, undo: () => Promise<void>): Promise<void> | undefined =>
  registered?.catch(async (error: unknown) => {
    await undo().catch(() => undefined);
    throw error;
  });
