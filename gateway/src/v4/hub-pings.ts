/**
 * Whether a hub still answers, for a link that can go silent without closing (a stopped or hung hub
 * process, a partition: TCP keep-alive probes are answered by the kernel, or take minutes). v4's wire has
 * no heartbeat, so the gateway sends `ping` and our hub answers `pong`; a v4.8 hub logs the record as
 * invalid and ignores it. Hence one ping first: a hub that answers it is watched from then on (a ping
 * every interval, dropped when silent for the timeout); one that does not is a v4 hub, left alone.
 */
import type { Unit } from './codec.js';

export interface HubPingOptions {
  intervalMs: number;
  /** Silence (no byte from the hub) after which an answering hub is taken for dead. */
  timeoutMs: number;
  send(units: readonly Unit[]): void;
  /** The hub went silent: `silentMs` since it was last heard. */
  dead(silentMs: number): void;
}

export class HubPings {
  readonly #options: HubPingOptions;
  #state: 'asked' | 'answers' | 'never' = 'asked';
  readonly #askedAt = Date.now();
  #heardAt = Date.now();
  #tickAt = Date.now();
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(options: HubPingOptions) {
    this.#options = options;
    options.send(['ping']);
    this.#timer = setInterval(() => this.#tick(), options.intervalMs);
    this.#timer.unref();
  }

  /** The hub answers pings: its silence is noticed. */
  get watched(): boolean {
    return this.#state === 'answers';
  }

  /** Bytes from the hub. */
  heard(): void {
    this.#heardAt = Date.now();
  }

  pong(): void {
    this.#state = 'answers';
    this.heard();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #tick(): void {
    const now = Date.now();
    // A tick this late is this process stalling, not the hub: what it sent may be read only after this timer.
    const late = now - this.#tickAt > 2 * this.#options.intervalMs;
    this.#tickAt = now;
    if (late) this.#heardAt = Math.max(this.#heardAt, now - this.#options.intervalMs);
    if (this.#state === 'asked') {
      if (now - this.#askedAt <= this.#options.timeoutMs) return;
      this.#state = 'never';
      this.stop();
      return;
    }
    if (this.#state !== 'answers') return;
    if (now - this.#heardAt > this.#options.timeoutMs) {
      this.stop();
      this.#options.dead(now - this.#heardAt);
      return;
    }
    this.#options.send(['ping']);
  }
}
