/**
 * A consumer's running handlers, counted by the client. The gateway sends a connection at most
 * `concurrency` open deliveries (ordered: one per pid), but a handler whose delivery was lost (the
 * connection dropped) or revoked (its lease ran out) may go on running after the gateway counted
 * it done. So the credit the consumer gives the gateway is `concurrency` less those handlers
 * (`credit`, with `onCredit` when it changes), and a delivery that still finds no slot, or (ordered)
 * finds a handler of its pid running, waits here for it: `concurrency` bounds the handlers running
 * at once, across reconnects, and an ordered pid never has two. An unordered consumer may run an
 * event again beside a handler of it that ignores its signal (a redelivery after the lease ran out
 * is how a stuck handler's event is retried, up to its attempts).
 */
import type { StoredEvent } from './protocol.js';

interface Held {
  readonly key: string | undefined;
  readonly start: () => void;
}

export class HandlerSlots {
  readonly #size: number;
  readonly #ordered: boolean;
  /** Handlers running, those of lost or revoked deliveries included. */
  #running = 0;
  /** Handlers running whose delivery is no longer open at the gateway. */
  #lingering = 0;
  /** The pids of the running handlers (ordered). */
  readonly #busy = new Set<string>();
  #held: Held[] = [];
  /** Told when `credit` changes. */
  onCredit: () => void = () => undefined;

  constructor(size: number, ordered: boolean) {
    this.#size = size;
    this.#ordered = ordered;
  }

  /** What the consumer registers as its concurrency. */
  get credit(): number {
    return Math.max(0, this.#size - this.#lingering);
  }

  /** The pid an ordered consumer runs one handler of at a time; undefined: no limit per pid. */
  #key(event: StoredEvent): string | undefined {
    return this.#ordered ? event.pid : undefined;
  }

  #free(key: string | undefined): boolean {
    return this.#running < this.#size && !(key !== undefined && this.#busy.has(key));
  }

  /** True when a delivery of an event of `pid` could not start now (no slot, or, ordered, a handler of `pid` running). */
  holds(pid: string): boolean {
    return !this.#free(this.#ordered ? pid : undefined);
  }

  /** Undefined when the handler of `event` may start now (its slot is taken), else a promise of the moment it may. */
  enter(event: StoredEvent): Promise<void> | undefined {
    const key = this.#key(event);
    if (!this.#free(key)) return new Promise((start) => this.#held.push({ key, start }));
    this.#take(key);
    return undefined;
  }

  #take(key: string | undefined): void {
    this.#running++;
    if (key !== undefined) this.#busy.add(key);
  }

  /** The delivery of a running handler is no longer open at the gateway: its slot is not credit any more. */
  linger(): void {
    this.#lingering++;
    this.onCredit();
  }

  /** A handler that `enter` let start is done; `lingered`: `linger` was called for it. */
  leave(event: StoredEvent, lingered: boolean): void {
    this.#running--;
    const key = this.#key(event);
    if (key !== undefined) this.#busy.delete(key);
    // Held deliveries start in the order they came, each as soon as its key and a slot are free.
    if (this.#held.length > 0) {
      const held = this.#held;
      this.#held = [];
      for (const item of held) {
        if (this.#free(item.key)) {
          this.#take(item.key);
          item.start();
        } else this.#held.push(item);
      }
    }
    if (lingered) {
      this.#lingering--;
      this.onCredit();
    }
  }
}
