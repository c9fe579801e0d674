/**
 * Listener bookkeeping keyed by (domain, name). Each key is independent: removing one listener
 * never disturbs another key or another listener (v4 discarded a whole domain's listeners).
 * `*` is additive: an event named `x` reaches the listeners of `x` and of `*`.
 */
import type { Position } from './protocol.js';

export interface SubscriptionKey<L> {
  readonly domain: string;
  readonly name: string;
  readonly listeners: Set<L>;
  /** Newest position delivered to this key; resuming asks the gateway for what came after. */
  position: Position | undefined;
}

const separator = '\u001f'; // cannot occur in an identifier

export class SubscriptionRegistry<L> {
  readonly #keys = new Map<string, SubscriptionKey<L>>();

  get(domain: string, name: string): SubscriptionKey<L> | undefined {
    return this.#keys.get(domain + separator + name);
  }

  /** Returns the key, creating it when this is its first listener. */
  add(domain: string, name: string, listener: L): SubscriptionKey<L> {
    const id = domain + separator + name;
    let key = this.#keys.get(id);
    if (!key) {
      key = { domain, name, listeners: new Set(), position: undefined };
      this.#keys.set(id, key);
    }
    key.listeners.add(listener);
    return key;
  }

  /** Removes one listener; the key itself goes when its last listener does. */
  remove(domain: string, name: string, listener: L): SubscriptionKey<L> | undefined {
    const id = domain + separator + name;
    const key = this.#keys.get(id);
    if (!key || !key.listeners.delete(listener)) return undefined;
    if (key.listeners.size === 0) this.#keys.delete(id);
    return key;
  }

  /** Whether `key` is still the live entry for its (domain, name). */
  isCurrent(key: SubscriptionKey<L>): boolean {
    return this.#keys.get(key.domain + separator + key.name) === key;
  }

  keys(): IterableIterator<SubscriptionKey<L>> {
    return this.#keys.values();
  }

  get size(): number {
    return this.#keys.size;
  }
}
