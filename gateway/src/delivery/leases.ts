/**
 * Consumer deliveries: one open delivery per event, under a lease.
 *
 * Every delivery is open for `leaseMs` (the consumer may `extend` it). When the lease expires the
 * delivery is revoked (its consumer is told; its settle is refused from then on) and the event is
 * delivered again, to another consumer if there is one. The attempt number follows the event
 * across redeliveries (lease expiry, recall, release); a delivery not settled at attempt
 * `maxAttempts` makes the event failed and a dead letter (see EventStore.deadLetter) instead of
 * being delivered again.
 */
import type { StoredEvent } from '@eventflow/core';
import { CATCH_UP_PAGE, configDefaults, MAX_EXTEND_LEASES } from '../defaults.js';
import type { Logger } from '../log.js';
import type { GatewayMetrics } from '../metrics.js';
import type { EventStore, Outcome } from '../store/store.js';
import type { ConsumerRef, Consumers } from './consumers.js';
import type { Peer } from './peer.js';

interface Delivery {
  readonly id: string;
  readonly event: StoredEvent;
  readonly consumer: ConsumerRef;
  readonly attempt: number;
  /** Expires the lease; cleared when the delivery ends. */
  timer: ReturnType<typeof setTimeout> | undefined;
}

export interface LeaseOptions {
  /** How long a delivery stays open without being settled or extended (EVENTFLOW_CONSUME_LEASE_MS). */
  leaseMs?: number;
  /** Deliveries of one event before it is failed as a dead letter (EVENTFLOW_CONSUME_MAX_ATTEMPTS). */
  maxAttempts?: number;
}

export class Leases {
  readonly #store: EventStore;
  readonly #consumers: Consumers;
  /** The consumer id this gateway claims events with (v4's `consumed_spoke`). */
  readonly #claimant: string;
  readonly #log: Logger;
  readonly #metrics: GatewayMetrics;
  readonly #leaseMs: number;
  readonly #maxAttempts: number;
  readonly #open = new Map<string, Delivery>();
  #nextDelivery = 1;
  #stopped = false;

  constructor(store: EventStore, consumers: Consumers, claimant: string, log: Logger, metrics: GatewayMetrics, options: LeaseOptions) {
    this.#store = store;
    this.#consumers = consumers;
    this.#claimant = claimant;
    this.#log = log;
    this.#metrics = metrics;
    this.#leaseMs = options.leaseMs ?? configDefaults.EVENTFLOW_CONSUME_LEASE_MS;
    this.#maxAttempts = options.maxAttempts ?? configDefaults.EVENTFLOW_CONSUME_MAX_ATTEMPTS;
  }

  /** Stops the lease timers (gateway shutdown): no delivery expires from now on. */
  stop(): void {
    this.#stopped = true;
    for (const delivery of this.#open.values()) clearTimeout(delivery.timer);
  }

  /** Whether a delivery of the event is open here. */
  isOpen(eventId: string): boolean {
    for (const delivery of this.#open.values()) if (delivery.event.id === eventId) return true;
    return false;
  }

  /** Deliveries open now. */
  get count(): number {
    return this.#open.size;
  }

  /** Claims the event for one consumer (another than `exclude` if there is one) and sends it; false when nobody here consumes it. */
  async deliver(event: StoredEvent, attempt: number, exclude: ConsumerRef | undefined): Promise<boolean> {
    const candidates = this.#consumers.candidates(event.domain, event.name, exclude);
    if (candidates.length === 0) return false;
    // v4's spoke claim: only a gateway that has a consumer for the event claims it.
    if (!(await this.#store.claimForConsumer(event.id, this.#claimant))) return true;
    this.#start(this.#consumers.next(candidates), event, attempt);
    return true;
  }

  /**
   * A consumer came back with its position: events of its (domain, name) published after it that
   * nobody claimed (published while no consumer was connected, or recalled when none was left)
   * go to it now. The claim guard keeps each to one consumer, also across gateways.
   */
  async catchUp(consumer: ConsumerRef, after: number): Promise<void> {
    try {
      for (let last = after; ; ) {
        const page = await this.#store.readPublishedAfter({ domain: consumer.domain, name: consumer.name }, last, CATCH_UP_PAGE);
        for (const event of page) {
          last = event.position;
          if (!this.#consumers.has(consumer)) return;
          if (await this.#store.claimForConsumer(event.id, this.#claimant)) this.#start(consumer, event, 1);
        }
        if (page.length < CATCH_UP_PAGE) return;
      }
    } catch (error) {
      this.#log.error('consumer catch-up failed', { consumer: consumer.handle, error });
    }
  }

  /**
   * Records a consumer's outcome; `release` hands the event to another consumer. False when the
   * delivery is not open on this peer (settled, recalled, revoked, or another peer's).
   */
  async settle(peer: Peer, deliveryId: string, outcome: Outcome | 'release'): Promise<boolean> {
    const delivery = this.#openOn(peer, deliveryId);
    if (!delivery) return false;
    this.#end(delivery);
    this.#metrics.consumed(outcome === 'release' ? 'released' : outcome);
    if (outcome === 'release') await this.#redeliver(delivery, 'released');
    else await this.#store.settle(delivery.event.id, outcome);
    return true;
  }

  /**
   * Moves an open delivery's lease deadline to now + `ms` (default: one lease; at most
   * MAX_EXTEND_LEASES). Returns the lease granted, or undefined when the delivery is not open on this peer.
   */
  extend(peer: Peer, deliveryId: string, ms: number | undefined): number | undefined {
    const delivery = this.#openOn(peer, deliveryId);
    if (!delivery) return undefined;
    const granted = Math.min(ms ?? this.#leaseMs, this.#leaseMs * MAX_EXTEND_LEASES);
    this.#lease(delivery, granted);
    return granted;
  }

  /** Ends the deliveries `match` selects (their consumer or connection is gone) and delivers their events again. */
  async recall(match: (consumer: ConsumerRef) => boolean, reason: string): Promise<void> {
    const recalled = [...this.#open.values()].filter((delivery) => match(delivery.consumer));
    for (const delivery of recalled) {
      this.#end(delivery);
      try {
        await this.#redeliver(delivery, reason);
      } catch (error) {
        this.#log.error('could not hand back a delivery', { event: delivery.event.id, error });
      }
    }
  }

  /** Opens a delivery of a claimed event to one consumer, under a lease. */
  #start(consumer: ConsumerRef, event: StoredEvent, attempt: number): void {
    const delivery: Delivery = { id: `d${this.#nextDelivery++}`, event, consumer, attempt, timer: undefined };
    this.#open.set(delivery.id, delivery);
    this.#lease(delivery, this.#leaseMs);
    consumer.peer.sendDelivery(consumer.handle, delivery.id, attempt, event);
  }

  /** The delivery, if it is open on this peer. */
  #openOn(peer: Peer, deliveryId: string): Delivery | undefined {
    const delivery = this.#open.get(deliveryId);
    return delivery?.consumer.peer === peer ? delivery : undefined;
  }

  /** (Re)arms the lease timer of an open delivery. */
  #lease(delivery: Delivery, ms: number): void {
    clearTimeout(delivery.timer);
    if (this.#stopped) return;
    delivery.timer = setTimeout(() => void this.#expire(delivery), ms);
    delivery.timer.unref?.();
  }

  /** Ends a delivery: it is no longer open, its settle is refused from now on. */
  #end(delivery: Delivery): void {
    clearTimeout(delivery.timer);
    delivery.timer = undefined;
    this.#open.delete(delivery.id);
  }

  /** The lease ran out: revoke the delivery and hand the event on (another consumer first). */
  async #expire(delivery: Delivery): Promise<void> {
    if (this.#open.get(delivery.id) !== delivery || this.#stopped) return;
    this.#end(delivery);
    const { event, consumer, attempt } = delivery;
    this.#note(consumer.peer, 'lease expired', 'info', 'delivery lease expired; revoking it', { event: event.id, delivery: delivery.id, connection: consumer.peer.id, attempt });
    consumer.peer.sendRevoked?.(delivery.id);
    this.#metrics.consumed('revoked');
    try {
      await this.#redeliver(delivery, 'lease expired');
    } catch (error) {
      this.#log.error('could not redeliver after a lease expired', { event: event.id, error });
    }
  }

  /** Delivers an ended, unsettled delivery's event again with attempt + 1, or dead-letters it after the last attempt. */
  async #redeliver(delivery: Delivery, reason: string): Promise<void> {
    const { event, attempt } = delivery;
    if (this.#stopped) {
      // Shutting down: every connection is closing, so handing the event around would only burn
      // its attempts. The claim is cleared, as for a delivery with no consumer left.
      await this.#store.releaseConsumerClaim(event.id);
      return;
    }
    if (attempt >= this.#maxAttempts) {
      // The consumer claim stays: the event has its outcome (failed), as if a consumer had settled it.
      const recorded = await this.#store.deadLetter(event.id, attempt, reason);
      const fields = { event: event.id, domain: event.domain, name: event.name, pid: event.pid, attempts: attempt, reason };
      if (recorded) this.#metrics.consumed('dead_lettered');
      if (recorded) this.#note(delivery.consumer.peer, 'dead letter', 'warn', 'event failed after its last delivery attempt; recorded as a dead letter', fields);
      return;
    }
    await this.#store.releaseConsumerClaim(event.id);
    const delivered = await this.deliver(event, attempt + 1, delivery.consumer);
    if (!delivered) this.#note(delivery.consumer.peer, 'handed back', 'info', 'delivery handed back with no other consumer; it stays unclaimed', { event: event.id, reason });
  }

  /** A line a consumer can cause once per event: counted per condition on its connection when the peer can. */
  #note(peer: Peer, condition: string, level: 'info' | 'warn', message: string, fields: Record<string, unknown>): void {
    if (peer.note) peer.note(condition, level, message, fields);
    else this.#log[level](message, fields);
  }
}
