/**
 * The embedded router: this gateway is its own hub. It takes v4's routing claim (consumed_hub)
 * so that the event_published row reads the same as in a v4 deployment, then routes in process.
 *
 * Per batch, not per event: events published while a batch is being routed (or in the same turn
 * of the event loop) are claimed together (one store transaction) and routed with one
 * notification per domain, since the dispatcher pulls each domain's new events from the store in
 * position order anyway. An event whose claim was taken when it was stored (Router.claimsOnAppend:
 * every new publish) has nothing to claim: the dispatcher is told at once, which coalesces a
 * domain's notifications itself, so its subscribers get it in the turn that committed it rather
 * than one turn of the event loop later (bench/README.md › latency-v4).
 */
import type { StoredEvent } from '@eventflow/core';
import type { EventStore } from '../store/store.js';
import type { RouteTarget, Router, RouterStatus } from './router.js';
import { PublishedElsewhere, type ElsewhereOptions } from './elsewhere.js';

interface Batch {
  /** Events to claim, then route. */
  readonly events: StoredEvent[];
  done: Promise<void>;
}

export class LocalRouter implements Router {
  readonly kind = 'local';
  readonly claimsOnAppend: string;
  readonly #store: EventStore;
  readonly #hubId: string;
  #target: RouteTarget | undefined;
  /** Batches run one at a time, in publish order, so subscribers see positions ascending. */
  #queue: Promise<void> = Promise.resolve();
  /** The batch that has not started yet: new events join it. */
  #open: Batch | undefined;
  /** Notifications of events claimed on append, not settled yet: close() waits for them. */
  readonly #direct = new Set<Promise<void>>();

  /**
   * Told of the events of a batch (not those claimed on append), once it has claimed them and
   * before they are routed here: the NATS router announces them.
   */
  readonly #onClaimed: ((events: readonly StoredEvent[]) => void) | undefined;

  /** A batch's routing claim failed with the store (its events are routed all the same). */
  readonly #onClaimFailed: ((error: unknown, events: readonly StoredEvent[]) => void) | undefined;

  /** Domain → its names with interest here; whether a pattern subscription is here: what `#elsewhere` reads. */
  readonly #interest = new Map<string, Set<string>>();
  #patterns = false;
  /** Another gateway publishing to this store (elsewhere.ts): watched when the store can tell and `log` is given. */
  readonly #elsewhere: PublishedElsewhere | undefined;
  readonly status?: () => RouterStatus;

  constructor(
    store: EventStore,
    hubId: string,
    onClaimed?: (events: readonly StoredEvent[]) => void,
    onClaimFailed?: (error: unknown, events: readonly StoredEvent[]) => void,
    watchElsewhere?: Pick<ElsewhereOptions, 'log' | 'announced' | 'advice'>,
  ) {
    this.#store = store;
    this.#hubId = hubId;
    this.claimsOnAppend = hubId;
    this.#onClaimed = onClaimed;
    this.#onClaimFailed = onClaimFailed;
    const look = store.catalog.publishedElsewhere?.bind(store.catalog);
    if (watchElsewhere && look) {
      const elsewhere = new PublishedElsewhere({
        publisher: hubId,
        head: () => store.head(),
        look,
        domains: () => this.#interest.keys(),
        patterns: () => this.#patterns,
        ...watchElsewhere,
      });
      this.#elsewhere = elsewhere;
      this.status = () => elsewhere.status();
    }
  }

  async start(target: RouteTarget): Promise<void> {
    this.#target = target;
    this.#elsewhere?.start(target);
  }

  publish(event: StoredEvent, claimed = false): Promise<void> {
    const target = this.#target;
    if (!target) return Promise.reject(new Error('router not started'));
    if (claimed) {
      const routed = target.route(event);
      // The dispatcher answers a domain's events routed meanwhile with one promise: watched once.
      if (this.#direct.has(routed)) return routed;
      this.#direct.add(routed);
      const forget = (): boolean => this.#direct.delete(routed);
      void routed.then(forget, forget);
      return routed;
    }
    let batch = this.#open;
    if (batch === undefined) {
      const opened: Batch = { events: [], done: Promise.resolve() };
      opened.done = this.#queue
        .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
        .then(() => {
          this.#open = undefined;
          return this.#route(target, opened);
        });
      this.#queue = opened.done.catch(() => undefined);
      this.#open = batch = opened;
    }
    batch.events.push(event);
    return batch.done;
  }

  async #route(target: RouteTarget, { events }: Batch): Promise<void> {
    try {
      await this.#store.claimAllForRouting(events.map((event) => event.id), this.#hubId);
    } catch (error) {
      // The events are stored: routed all the same (below), or a scheduled event that fired, its claim
      // refused for a moment (another process's write lock, a full disk), reached no subscriber or
      // wait until another event of its domain came. Only v4's claim column stays unset.
      this.#onClaimFailed?.(error, events);
    }
    // Notified whether or not this batch won the claim: an append can commit, claim included, and
    // still be answered as failed (the commit's fate unknown, store/write-health.ts), and then only
    // the retry that finds it stored comes here. A notification only makes the dispatcher read
    // after its cursor, so one for an event routed already costs a read and delivers nothing twice.
    this.#onClaimed?.(events);
    // One notification per domain: the newest event of the domain routed in this batch.
    const newest = new Map<string, StoredEvent>();
    for (const event of events) {
      const known = newest.get(event.domain);
      if (known === undefined || known.position < event.position) newest.set(event.domain, event);
    }
    for (const event of newest.values()) await target.route(event);
  }

  setInterest(domain: string, name: string, interested: boolean): void {
    // Every connection is local: there is nobody to tell. Kept for the reads of `#elsewhere`.
    const names = this.#interest.get(domain) ?? new Set<string>();
    if (interested) names.add(name);
    else names.delete(name);
    if (names.size > 0) this.#interest.set(domain, names);
    else this.#interest.delete(domain);
  }

  setPatternInterest(interested: boolean): void {
    this.#patterns = interested;
  }

  async close(): Promise<void> {
    this.#elsewhere?.stop();
    await Promise.allSettled([this.#queue, ...this.#direct]);
  }
}
