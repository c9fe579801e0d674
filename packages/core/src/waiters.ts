/** Promises that settle when something happens to a key (registered, opened), with AbortSignal support. */
import { EventflowError } from './errors.js';

interface Waiter {
  resolve(): void;
  reject(error: unknown): void;
}

export class Waiters {
  readonly #byKey = new Map<string, Set<Waiter>>();

  wait(key: string, what: string, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let set = this.#byKey.get(key);
      if (!set) this.#byKey.set(key, (set = new Set()));
      const group = set;
      const done = (): void => {
        group.delete(waiter);
        if (group.size === 0 && this.#byKey.get(key) === group) this.#byKey.delete(key);
        signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = (): void => {
        done();
        reject(new EventflowError('E_EVENTFLOW_ABORTED', `${what} was aborted`, { cause: signal?.reason }));
      };
      const waiter: Waiter = {
        resolve: () => {
          done();
          resolve();
        },
        reject: (error) => {
          done();
          reject(error);
        },
      };
      group.add(waiter);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  resolve(key: string): void {
    for (const waiter of [...(this.#byKey.get(key) ?? [])]) waiter.resolve();
  }

  reject(key: string, error: unknown): void {
    for (const waiter of [...(this.#byKey.get(key) ?? [])]) waiter.reject(error);
  }

  rejectAll(error: unknown): void {
    for (const key of [...this.#byKey.keys()]) this.reject(key, error);
  }
}
