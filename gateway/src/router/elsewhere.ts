/**
 * Another gateway on the embedded router's database. EVENTFLOW_ROUTER=local routes in process: events
 * another gateway (or a v4 hub) stores in the same MySQL database reach this gateway's subscribers,
 * request() waits and consumers only when something here reads their domain again. Operators do start
 * two such gateways: two replicas behind a load balancer, or a rolling deploy whose old and new
 * processes overlap. Before, the subscribers of one silently missed the other's publishes, and a
 * request() whose worker was on the other one timed out.
 *
 * So every CHECK_MS the router looks at the newest positions for another publisher. Once it finds one
 * it says what to do (EVENTFLOW_ROUTER=nats) in the log, reports `degraded` (/readyz, still 200, and
 * eventflow_router_degraded), and reads every domain it has interest in every POLL_MS: nothing is
 * missed, only late. QUIET_MS after the last such event (the old process of a deploy gone) it routes
 * its own alone again.
 *
 * The NATS router watches the same way for publishers whose events are not announced to it (`announced`):
 * a gateway among NATS gateways left at EVENTFLOW_ROUTER=local, or on another subject prefix or NATS
 * server. Before, they took its events as another NATS gateway's, and its events reached their clients
 * only when something else made them read the domain.
 */
import type { Position } from '@eventflow/core';
import type { Logger } from '../log.js';
import type { PublishedBy } from '../store/catalog.js';
import type { RouteTarget, RouterStatus } from './router.js';
import { Coalescer } from './coalesce.js';

const CHECK_MS = 2_000;
const POLL_MS = 1_000;
const QUIET_MS = 60_000;

export interface Advice {
  warning: string;
  reason: string;
  /** Logged QUIET_MS after the last such event. */
  quiet: string;
}

const LOCAL_ADVICE: Advice = {
  warning:
    'another gateway (or a v4 hub) publishes to this database, and EVENTFLOW_ROUTER=local routes only what this gateway stores: its events reach the subscribers, request() waits and consumers here up to a second late, by reading the store. Set EVENTFLOW_ROUTER=nats on every gateway of one database (EVENTFLOW_ROUTER=hubs beside a v4 hub mesh)',
  reason: 'another gateway publishes to this database; set EVENTFLOW_ROUTER=nats on every gateway of it (hubs beside a v4 hub mesh)',
  quiet: 'no other gateway has published to this database for a minute: routing what this gateway stores alone again',
};

export interface ElsewhereOptions {
  /** This gateway's id: the publisher of every event it stores. */
  publisher: string;
  head(): Promise<Position>;
  /** Catalog.publishedElsewhere. */
  look(publisher: string, after: Position): Promise<{ head: Position; publishers: PublishedBy[] }>;
  /**
   * Whether this router learns of a publisher's events by other means (the NATS router: a gateway heard over NATS
   * lately); such a publisher is not "elsewhere". Without it, every other publisher is.
   */
  announced?(publisher: string): boolean;
  /** What the log and /readyz say once an unannounced publisher is found (defaults: the embedded router's). */
  advice?: Advice;
  /** The domains this gateway's connections have interest in, and whether any has a pattern subscription. */
  domains(): Iterable<string>;
  patterns(): boolean;
  log: Logger;
}

export class PublishedElsewhere {
  readonly #options: ElsewhereOptions;
  readonly #pulls: Coalescer;
  #target: RouteTarget | undefined;
  /** Positions up to this one were looked at; undefined until the first look, which starts at the head. */
  #after: Position | undefined;
  /** When the last look found another publisher's events (0: never). */
  #seenAt = 0;
  #check: ReturnType<typeof setTimeout> | undefined;
  #poll: ReturnType<typeof setInterval> | undefined;
  #stopped = false;

  constructor(options: ElsewhereOptions) {
    this.#options = options;
    this.#pulls = new Coalescer((domain, error) => options.log.debug('could not read a domain another gateway may have published to', { domain, error }));
  }

  start(target: RouteTarget): void {
    this.#target = target;
    void this.#look();
  }

  status(): RouterStatus {
    if (!this.#elsewhere()) return { ready: true };
    return { ready: true, degraded: true, reason: (this.#options.advice ?? LOCAL_ADVICE).reason };
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#check);
    clearInterval(this.#poll);
  }

  #elsewhere(): boolean {
    return this.#seenAt > 0 && Date.now() - this.#seenAt < QUIET_MS;
  }

  async #look(): Promise<void> {
    const { publisher, head, look, announced, log } = this.#options;
    try {
      if (this.#after === undefined) this.#after = await head();
      else {
        const found = await look(publisher, this.#after);
        this.#after = Math.max(this.#after, found.head);
        const unannounced = announced ? found.publishers.filter((by) => !announced(by.publisher)) : found.publishers;
        if (unannounced.length > 0) this.#found(unannounced);
      }
    } catch (error) {
      // The store failing is reported by the writes and reads that fail; this look waits for the next turn.
      log.debug('could not look for events another gateway published', { error });
    }
    if (this.#stopped) return;
    this.#check = setTimeout(() => void this.#look(), CHECK_MS);
    this.#check.unref?.();
  }

  #found(publishers: readonly PublishedBy[]): void {
    const was = this.#elsewhere();
    this.#seenAt = Date.now();
    if (was) return;
    this.#options.log.warn((this.#options.advice ?? LOCAL_ADVICE).warning, {
      events: publishers.reduce((sum, by) => sum + by.events, 0),
      publishers: publishers.map((by) => by.publisher),
      publisher: this.#options.publisher,
    });
    this.#pullAll();
    this.#poll = setInterval(() => this.#pullAll(), POLL_MS);
    this.#poll.unref?.();
  }

  #pullAll(): void {
    const target = this.#target;
    if (target === undefined || this.#stopped) return;
    if (!this.#elsewhere()) {
      clearInterval(this.#poll);
      this.#poll = undefined;
      this.#options.log.info((this.#options.advice ?? LOCAL_ADVICE).quiet, {});
      return;
    }
    for (const domain of this.#options.domains()) this.#pulls.ask(domain, () => target.route({ domain }));
    if (this.#options.patterns()) target.routePatterns?.(undefined);
  }
}
