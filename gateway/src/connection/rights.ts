/**
 * One connection's rights as they are now, and when they end. Token rights end at the token's
 * end (auth.ts: `exp`, capped at `iat` + EVENTFLOW_JWT_MAX_LIFETIME_S) and never later than the
 * maximum lifetime after the connection opened, whatever token `authenticate` brings later.
 */
import { actions, allows, type Action, type Authorization } from './auth.js';

/** Cached answers per connection: a connection reading many domains must not grow it without end. */
const MAX_CACHED = 1024;

/**
 * The actions an Authorization allows on every domain (a `*` grant), remembered per Authorization:
 * connections holding the same one (EVENTFLOW_AUTH=none, the anonymous rights) share the answer and
 * need no cache of their own, which would be two Maps per connection (bench/idle-memory.mjs).
 */
const everywhere = new WeakMap<Authorization, ReadonlySet<Action>>();

function allowedEverywhere(auth: Authorization): ReadonlySet<Action> {
  let known = everywhere.get(auth);
  if (!known) {
    known = new Set(actions.filter((action) => auth.grants[action]?.some((pattern) => pattern.source === '*')));
    everywhere.set(auth, known);
  }
  return known;
}

export class ConnectionRights {
  #auth: Authorization;
  #everywhere: ReadonlySet<Action>;
  #endsAt: number | undefined;
  /** The latest any token rights of this connection may last. */
  readonly #deadline: number;
  readonly #onEnd: () => void;
  /** allows() answers under the current rights, by action then domain (cleared when they change); asked once per push. */
  #allowed: Map<Action, Map<string, boolean>> | undefined;
  #cached = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** `onEnd` is called once the rights have ended (by a timer, or by `ended()` when the timer is late). */
  constructor(initial: Authorization, maxLifetimeMs: number | undefined, onEnd: () => void) {
    this.#auth = initial;
    this.#everywhere = allowedEverywhere(initial);
    this.#deadline = Date.now() + (maxLifetimeMs ?? Infinity);
    this.#onEnd = onEnd;
  }

  get current(): Authorization {
    return this.#auth;
  }

  /** Replaces the rights and arms the timer for their end. */
  replace(auth: Authorization): void {
    this.#auth = auth;
    this.#everywhere = allowedEverywhere(auth);
    this.#allowed = undefined;
    this.#cached = 0;
    const endsAt = auth.expiresAt === undefined ? undefined : Math.min(auth.expiresAt, this.#deadline);
    this.#endsAt = endsAt;
    this.stop();
    if (endsAt === undefined) return;
    const check = (): void => {
      const left = endsAt - Date.now();
      // setTimeout holds at most 2^31-1 ms; longer lifetimes are re-checked.
      if (left > 0) this.#timer = setTimeout(check, Math.min(left, 2 ** 31 - 1));
      else this.#onEnd();
    };
    check();
  }

  /** True when the rights have ended (`onEnd` is called then): a timer may fire late under load. */
  ended(): boolean {
    if (this.#endsAt === undefined || Date.now() < this.#endsAt) return false;
    this.#onEnd();
    return true;
  }

  /** allows(current, action, domain), remembered until the rights change. */
  allows(action: Action, domain: string): boolean {
    if (this.#everywhere.has(action)) return true;
    let byDomain = this.#allowed?.get(action);
    let allowed = byDomain?.get(domain);
    if (allowed !== undefined) return allowed;
    allowed = allows(this.#auth, action, domain);
    if (this.#cached >= MAX_CACHED) {
      this.#allowed = undefined;
      this.#cached = 0;
      byDomain = undefined;
    }
    if (!byDomain) (this.#allowed ??= new Map()).set(action, (byDomain = new Map()));
    byDomain.set(domain, allowed);
    this.#cached++;
    return allowed;
  }

  /** Clears the timer (the connection is closing). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
