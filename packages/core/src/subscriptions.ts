/**
 * Listener bookkeeping keyed by (domain, name). Each key is independent: removing one listener
 * never disturbs another key or another listener (v4 discarded a whole domain's listeners).
 * `*` is additive: an event named `x` reaches the listeners of `x` and of `*`. Listeners of a key
 * share one gateway subscription but not its history: each has its own position, so a listener
 * that joins later with `after` or `last` gets its own start (registrations.ts arranges it).
 */
import type { Position } from './protocol.js';
import { streamKey } from './stream-key.js';

/** Where a listener asked to start (SubscribeOptions): after a position, or with the newest `last` published events. */
export interface Start {
  after?: Position | undefined;
  last?: number | undefined;
}

/** One listener's progress through its key's events. */
export interface ListenerState {
  /** Newest position given to this listener; events at or below it are not given again. Undefined: whatever the registration brings. */
  position?: Position | undefined;
  /** Its history is still being arranged: it is given nothing until then (registrations.ts clears it). */
  start?: Start | undefined;
}

export interface SubscriptionKey<L> {
  readonly domain: string;
  readonly name: string;
  readonly listeners: Map<L, ListenerState>;
  /**
   * The newest position known of this subscription: the registration's head, raised by every event
   * delivered. A listener that joins without a start begins here (events published from now on).
   */
  head?: Position | undefined;
}

export class SubscriptionRegistry<L> {
  readonly #keys = new Map<string, SubscriptionKey<L>>();

  get(domain: string, name: string): SubscriptionKey<L> | undefined {
    return this.#keys.get(streamKey(domain, name));
  }

  /** Returns the key, creating it when this is its first listener. */
  add(domain: string, name: string, listener: L, state: ListenerState = {}): SubscriptionKey<L> {
    const id = streamKey(domain, name);
    let key = this.#keys.get(id);
    if (!key) this.#keys.set(id, (key = { domain, name, listeners: new Map() }));
    key.listeners.set(listener, state);
    return key;
  }

  /** Removes one listener; the key itself goes when its last listener does. */
  remove(domain: string, name: string, listener: L): SubscriptionKey<L> | undefined {
    const id = streamKey(domain, name);
    const key = this.#keys.get(id);
    if (!key?.listeners.delete(listener)) return undefined;
    if (!key.listeners.size) this.#keys.delete(id);
    return key;
  }

  keys(): IterableIterator<SubscriptionKey<L>> {
    return this.#keys.values();
  }
}
