/**
 * The limits one request meets before it runs, per connection: requests in flight
 * (EVENTFLOW_MAX_IN_FLIGHT), the publish rate (EVENTFLOW_MAX_PUBLISH_RATE) and subscriptions +
 * consumers + waits (EVENTFLOW_MAX_SUBSCRIPTIONS), the last counting those whose request is still
 * being handled, so that concurrent requests cannot together exceed it.
 */
import { streamKey, type EventflowError, type OperationName } from '@eventflow/core';
import { writes } from './frames.js';
import { limitExceeded, rateLimited, TokenBucket, type ConnectionLimits } from './limits.js';

/** What a subscribe, consume or wait request registers. */
export interface Registration {
  /**
   * A kind of its own for each kind of key: a pattern subscription's handle may hold any character, so
   * (once keyed `pattern:<handle>` among the subscriptions) `h\u001fn` was the subscription key of domain
   * `pattern:h`, name `n`, and each of the two was taken as held when the other was: twice the limit.
   */
  readonly kind: 'subscription' | 'pattern' | 'consumer' | 'wait';
  /** streamKey(domain, name) for a subscription; the handle for a pattern subscription, a consumer or a wait. */
  readonly key: string;
}

/** The registration `op` makes; undefined for other operations. */
export function registrationOf(op: OperationName, params: unknown): Registration | undefined {
  switch (op) {
    case 'subscribe': {
      const { domain, name } = params as { domain: string; name: string };
      return { kind: 'subscription', key: streamKey(domain, name) };
    }
    case 'subscribePattern':
      return { kind: 'pattern', key: (params as { subscription: string }).subscription };
    case 'consume':
      return { kind: 'consumer', key: (params as { consumer: string }).consumer };
    case 'wait':
      return { kind: 'wait', key: (params as { wait: string }).wait };
    default:
      return undefined;
  }
}

export class RequestLimits {
  readonly #limits: ConnectionLimits;
  readonly #holds: (registration: Registration) => boolean;
  readonly #held: () => number;
  /** Requests received and not answered yet. */
  #inFlight = 0;
  /** The publish rate; undefined when unlimited. */
  readonly #writeBucket: TokenBucket | undefined;
  /** Registrations whose request is being handled, by kind and key. */
  /** Made on the first registering request (an idle connection holds none). */
  #reserved: Map<string, Registration> | undefined;

  /** `holds`: whether the connection holds a registration already; `held`: how many it holds. */
  constructor(limits: ConnectionLimits, holds: (registration: Registration) => boolean, held: () => number) {
    this.#limits = limits;
    this.#holds = holds;
    this.#held = held;
    this.#writeBucket = limits.maxPublishRate > 0 ? new TokenBucket(limits.maxPublishRate) : undefined;
  }

  /** Counts a request in flight until `leave`; the error to answer with when too many are. */
  enter(op: OperationName): EventflowError | undefined {
    const { maxInFlight } = this.#limits;
    if (this.#inFlight >= maxInFlight) return limitExceeded('EVENTFLOW_MAX_IN_FLIGHT', maxInFlight, `${op}: too many unanswered requests on this connection; wait for answers before sending more`);
    this.#inFlight++;
    return undefined;
  }

  leave(): void {
    this.#inFlight--;
  }

  /** Spends the publish rate for a write; the error to answer with when it is spent. */
  spend(op: OperationName): EventflowError | undefined {
    if (!this.#writeBucket || !writes.has(op)) return undefined;
    const retryAfterMs = this.#writeBucket.take();
    return retryAfterMs > 0 ? rateLimited(op, this.#writeBucket.rate, retryAfterMs) : undefined;
  }

  /**
   * Counts the registration `op` makes from now on, while its request runs: returns the function
   * that stops counting it (the request is done), nothing when it registers nothing new (already
   * held or being registered), or the error to answer with when the connection holds as many as allowed.
   */
  reserve(op: OperationName, params: unknown): (() => void) | EventflowError | undefined {
    const registration = registrationOf(op, params);
    if (!registration) return undefined;
    const id = `${registration.kind}:${registration.key}`;
    if (this.#holds(registration) || this.#reserved?.has(id)) return undefined;
    if (this.#count() >= this.#limits.maxSubscriptions) {
      return limitExceeded(
        'EVENTFLOW_MAX_SUBSCRIPTIONS',
        this.#limits.maxSubscriptions,
        `${op}: this connection already holds as many subscriptions, consumers and waits as allowed; remove some before adding more`,
      );
    }
    const reserved = (this.#reserved ??= new Map());
    reserved.set(id, registration);
    return () => {
      reserved.delete(id);
      // Dropped when empty: a connection holds it only while a registering request runs.
      if (reserved.size === 0 && this.#reserved === reserved) this.#reserved = undefined;
    };
  }

  /** Registrations held, including those being registered. */
  #count(): number {
    let pending = 0;
    for (const registration of this.#reserved?.values() ?? []) if (!this.#holds(registration)) pending++;
    return this.#held() + pending;
  }
}
