/**
 * Listener bookkeeping keyed by (domain, name). Each key is independent: removing one listener
 * never disturbs another key or another listener (v4 discarded a whole domain's listeners).
 * `*` is additive: an event named `x` reaches the listeners of `x` and of `*`.
 */
import type { Position } from './protocol.js';
import { streamKey } from './stream-key.js';

export interface SubscriptionKey<L> {
  readonly domain: string;
  readonly name: string;
  readonly listeners: Set<L>;
  /** Newest position delivered to this key; resuming asks the gateway for what came after. */
  position?: Position;
  /** Replay the newest this-many published events on first registering (SubscribeOptions.last). */
  last?: number;
}

export class SubscriptionRegistry<L> {
  readonly #keys = new Map<string, SubscriptionKey<L>>();

  get(domain: string, name: string): SubscriptionKey<L> | undefined {
    return this.#keys.get(streamKey(domain, name));
  }

  /** Returns the key, creating it when this is its first listener. */
  add(domain: string, name: string, listener: L): SubscriptionKey<L> {
    const id = streamKey(domain, name);
    let key = this.#keys.get(id);
    if (!key) this.#keys.set(id, (key = { domain, name, listeners: new Set() }));
    key.listeners.add(listener);
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
