/** Promises that settle when something happens to a key (registered, opened), with AbortSignal support. */
import { pending, type Settle } from './requests.js';

export class Waiters {
  readonly #byKey = new Map<string, Set<Settle<void>>>();

  wait(key: string, what: string, signal?: AbortSignal): Promise<void> {
    return pending(what, signal, (settle) => {
      const group = this.#byKey.get(key) ?? new Set();
      this.#byKey.set(key, group.add(settle));
      return () => {
        group.delete(settle);
        if (!group.size && this.#byKey.get(key) === group) this.#byKey.delete(key);
      };
    });
  }

  /** Resolves the waiters of `key`, or rejects them with `error`. */
  settle(key: string, error?: unknown): void {
    for (const settle of [...(this.#byKey.get(key) ?? [])]) settle(error);
  }

  /** Fails every waiter with `error` (the client closed). */
  rejectAll(error: unknown): void {
    for (const key of this.#byKey.keys()) this.settle(key, error);
  }
}
