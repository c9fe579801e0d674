/**
 * The embedded router: this gateway is its own hub. It takes v4's routing claim (consumed_hub)
 * so that the event_published row reads the same as in a v4 deployment, then routes in process.
 */
import type { StoredEvent } from '@eventflow/core';
import type { EventStore } from '../store/store.js';
import type { RouteTarget, Router } from './router.js';

export class LocalRouter implements Router {
  readonly kind = 'local';
  readonly #store: EventStore;
  readonly #hubId: string;
  #target: RouteTarget | undefined;
  /** Routing runs one event at a time, in publish order, so subscribers see positions ascending. */
  #queue: Promise<void> = Promise.resolve();

  constructor(store: EventStore, hubId: string) {
    this.#store = store;
    this.#hubId = hubId;
  }

  async start(target: RouteTarget): Promise<void> {
    this.#target = target;
  }

  publish(event: StoredEvent): Promise<void> {
    const target = this.#target;
    if (!target) return Promise.reject(new Error('router not started'));
    const next = this.#queue.then(async () => {
      if (await this.#store.claimForRouting(event.id, this.#hubId)) await target.route(event);
    });
    this.#queue = next.catch(() => undefined);
    return next;
  }

  setInterest(): void {
    // Every connection is local: there is nobody to tell.
  }

  async close(): Promise<void> {
    await this.#queue;
  }
}
