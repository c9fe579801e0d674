/**
 * The gateways heard over NATS lately: each NATS gateway says its id on `<prefix>.gateway` every
 * MEMBER_HEARTBEAT_MS, and at once when it (re)connects or another one asks for a resync. A publisher in
 * the store that is not among them publishes without announcing its events here (EVENTFLOW_ROUTER=local,
 * another subject prefix or NATS server, a link down): router/elsewhere.ts watches for those.
 *
 * Any client of the NATS server can publish on our subjects: a payload that is not a gateway id is dropped,
 * and the ids kept are bounded (the oldest heard goes first). A forged id can only make this gateway take a
 * publisher as announced, which is what it did for every publisher before.
 */
import { MEMBER_HEARTBEAT_MS } from '../../defaults.js';

/** A gateway not heard for this long is no longer taken as announcing its events: three heartbeats missed. */
const MEMBER_TTL_MS = 3 * MEMBER_HEARTBEAT_MS + 1_000;
/** Ids kept at most. */
const MEMBERS_MAX = 1_024;
/** EVENTFLOW_GATEWAY_ID's form (config.ts), which generated ids have too. */
const GATEWAY_ID = /^[A-Za-z0-9.-]{1,64}$/;

const decoder = new TextDecoder();

export class Members {
  /** Gateway id → when it was last heard, oldest first. */
  readonly #heard = new Map<string, number>();
  /** Since when this gateway has been connected and subscribed, undefined while it is not. */
  #onlineSince: number | undefined;

  /** A heartbeat's payload: whether it was a gateway id (kept) or something else (dropped). */
  heard(payload: Uint8Array, now = Date.now()): boolean {
    if (payload.length === 0 || payload.length > 64) return false;
    const id = decoder.decode(payload);
    if (!GATEWAY_ID.test(id)) return false;
    this.#heard.delete(id);
    this.#heard.set(id, now);
    if (this.#heard.size > MEMBERS_MAX) this.#heard.delete(this.#heard.keys().next().value as string);
    return true;
  }

  online(now = Date.now()): void {
    this.#onlineSince ??= now;
  }

  offline(): void {
    this.#onlineSince = undefined;
  }

  /**
   * Whether `publisher`'s events are announced here. While this gateway has no NATS link it judges
   * nobody (it reports degraded for that, and resyncs once back), nor in its first heartbeat period
   * online, before every member has had its turn to be heard.
   */
  announced(publisher: string, now = Date.now()): boolean {
    if (this.#onlineSince === undefined || now - this.#onlineSince < MEMBER_HEARTBEAT_MS + 1_000) return true;
    const at = this.#heard.get(publisher);
    return at !== undefined && now - at < MEMBER_TTL_MS;
  }
}
