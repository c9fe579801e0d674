/**
 * EVENTFLOW_MAX_RECEIVE_RATE: the bytes per second one connection's frames may cost the gateway.
 * The publish rate counts events, but the work of a frame (JSON parsing, validation, storing)
 * grows with its bytes, so one connection sending the largest frames back to back could hold the
 * event loop for others. Past its budget a connection is simply not read from until the budget is
 * back: its frames wait in TCP buffers (the client's send buffer grows, as with a slow network),
 * nothing is refused, and no frame is parsed before it is paid for. Refusing with an error frame
 * instead would not bound anything: the frame would have to be parsed to answer it.
 */
import { TokenBucket } from '../connection/limits.js';

/**
 * The budget is a token bucket over bytes (connection/limits.ts) that may go into debt: it holds at
 * most `rate` bytes (one second's worth); a frame larger than what is left is still charged (it has
 * been received already) and the debt is paid back before the connection is read again.
 */
export class ByteBudget extends TokenBucket {}

/** What can stop and restart reading (a ws WebSocket). */
export interface Pausable {
  pause(): void;
  resume(): void;
}

/**
 * Charges every received frame to a budget of `rate` bytes per second and pauses `source` while
 * the budget is in debt: `received` per frame, `stop` when the connection closes. A class, not
 * closures: one per connection (bench/idle-memory.mjs).
 */
export class ReceiveThrottle {
  readonly #source: Pausable;
  readonly #budget: ByteBudget;
  readonly #onPause: ((ms: number) => void) | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;

  constructor(source: Pausable, rate: number, onPause?: (ms: number) => void) {
    this.#source = source;
    this.#budget = new ByteBudget(rate);
    this.#onPause = onPause;
  }

  received(bytes: number): void {
    const ms = this.#budget.spend(bytes);
    if (ms === 0 || this.#timer !== undefined || this.#stopped) return;
    this.#source.pause();
    this.#onPause?.(ms);
    this.#wait(ms);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #wait(ms: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopped) return;
      // Frames the socket had already read when it was paused were charged meanwhile.
      const more = this.#budget.spend(0);
      if (more > 0) this.#wait(more);
      else this.#source.resume();
    }, ms);
  }
}
