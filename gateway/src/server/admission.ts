/**
 * Which WebSocket upgrades the gateway takes on: at most EVENTFLOW_MAX_CONNECTIONS open
 * connections: one more upgrade is refused with HTTP 503, `Retry-After` and a JSON body carrying
 * E_EVENTFLOW_LIMIT_EXCEEDED; nothing is opened, and clients retry with backoff as after any
 * failed connect.
 *
 * With EVENTFLOW_AUTH=jwt, at most EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS of them may be without
 * a valid token (before `hello`, or anonymous), so that clients without credentials cannot take
 * the slots of those with. Every connection starts without one (the token comes in `hello`), so
 * refusing new upgrades at that bound would let anyone who holds it lock everybody out; instead the
 * oldest unauthenticated connection is closed with 1013 (try again later) to make room. Holding
 * the bound then takes opening connections faster than a client sends its `hello`. Unauthenticated
 * connections also time out (EVENTFLOW_AUTH_TIMEOUT_MS, connection/session.ts).
 */
import type { EventflowError } from '@eventflow/core';
import { limitExceeded } from '../connection/limits.js';

/** A connection as admission sees it. */
export interface Admitted {
  readonly authenticated: boolean;
  close(code: number, reason: string): void;
}

export interface AdmissionLimits {
  readonly maxConnections: number;
  /** Undefined without authentication (every connection counts as authenticated then). */
  readonly maxUnauthenticated: number | undefined;
}

export class Admission {
  readonly #limits: AdmissionLimits;
  readonly #open = new Set<Admitted>();
  readonly #unauthenticated = new Set<Admitted>();

  constructor(limits: AdmissionLimits) {
    this.#limits = limits;
  }

  get open(): number {
    return this.#open.size;
  }

  get unauthenticated(): number {
    return this.#unauthenticated.size;
  }

  /** Why one more connection may not be opened now; undefined when it may. */
  refusal(): EventflowError | undefined {
    const { maxConnections } = this.#limits;
    if (this.#open.size < maxConnections) return undefined;
    return limitExceeded('EVENTFLOW_MAX_CONNECTIONS', maxConnections, 'the gateway holds as many connections as it allows; retry later or connect to another gateway');
  }

  /** Before a new connection opens: closes the oldest unauthenticated ones beyond the bound (1013). Returns how many. */
  makeRoom(): number {
    const { maxUnauthenticated } = this.#limits;
    if (maxUnauthenticated === undefined) return 0;
    let evicted = 0;
    for (const oldest of this.#unauthenticated) {
      if (this.#unauthenticated.size < maxUnauthenticated) break;
      // Counted out now: its close completes later.
      this.#unauthenticated.delete(oldest);
      oldest.close(1013, 'too many unauthenticated connections');
      evicted++;
    }
    return evicted;
  }

  opened(connection: Admitted): void {
    this.#open.add(connection);
    if (!connection.authenticated) this.#unauthenticated.add(connection);
  }

  /** The connection presented a valid token: it no longer counts as unauthenticated. */
  authenticated(connection: Admitted): void {
    this.#unauthenticated.delete(connection);
  }

  closed(connection: Admitted): void {
    this.#open.delete(connection);
    this.#unauthenticated.delete(connection);
  }
}

/** The HTTP answer to a refused upgrade: 503 with the coded error as JSON. */
export function refusalBody(error: EventflowError): string {
  return `${JSON.stringify({ code: error.code, message: error.message, details: error.details })}\n`;
}
