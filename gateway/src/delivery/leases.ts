/**
 * Consumer deliveries: one open delivery per (event, group), under a lease held in the store
 * (the delivery ledger, store/ledger.ts: owner = this gateway instance, deadline).
 *
 * Every delivery is open for `leaseMs` (the consumer may `extend` it). When the lease expires the
 * delivery is revoked (its consumer is told; its settle is refused from then on) and the event is
 * pending again for its group (backlog.ts delivers it, to another member if there is one). Attempts
 * are counted in the store, so they follow the event across redeliveries, restarts and gateways; a
 * delivery not settled at attempt `maxAttempts` makes the event failed and a dead letter carrying
 * the last error. A gateway that dies leaves its leases in the store: they expire at their deadline
 * and any gateway on the store delivers the events again (backlog.ts sweeps on the nearest deadline).
 *
 * Delivery ids are `<boot>-<n>`, `boot` random per process, so that they never repeat across
 * restarts: a settle that reaches a restarted gateway (or another one on the store) is matched
 * against the store's current delivery of the event and recorded if it is still that one.
 */
import { randomBytes } from 'node:crypto';
import type { StoredEvent } from '@eventflow/core';
import { configDefaults, MAX_EXTEND_LEASES } from '../defaults.js';
import type { Logger } from '../log.js';
import type { GatewayMetrics } from '../metrics.js';
import { ledgerColumns, type DeliveryLedger, type GroupKey } from '../store/ledger.js';
import type { ConsumerRef } from './consumers.js';
import type { Peer } from './peer.js';

interface Delivery {
  readonly id: string;
  readonly event: StoredEvent;
  readonly consumer: ConsumerRef;
  /** The group whose backlog it came from. */
  readonly key: GroupKey;
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

/** What becomes of a delivery: an outcome, a hand-back (`release`), or a retry after `delayMs`. */
export type Settlement = { outcome: 'success' | 'failed'; error?: string | undefined } | { outcome: 'release' } | { outcome: 'retry'; delayMs: number; error?: string | undefined };

export interface LeaseEvents {
  /** A delivery ended without an outcome: the event is pending again for its group (from `at` on). */
  pending(key: GroupKey, event: StoredEvent, avoid: ConsumerRef | undefined, at: number): void;
  /** A consume ended failed: the handler threw, or the event became a dead letter. */
  failed(eventId: string, message: string, attempt: number): void;
}

/** The key of an event in a group's ledger (the default groups of a domain share one). */
export const ledgerKey = (key: GroupKey, eventId: string): string => {
  const { gname, grp } = ledgerColumns(key);
  return `${eventId}\u0000${gname}\u0000${grp}`;
};

export class Leases {
  readonly #ledger: () => DeliveryLedger;
  /** This gateway instance as lease owner. */
  readonly owner: string;
  /** v4's `consumer` of the default group's claims: the gateway id. */
  readonly #consumer: string;
  readonly #boot: string;
  readonly #log: Logger;
  readonly #metrics: GatewayMetrics;
  readonly #leaseMs: number;
  readonly #maxAttempts: number;
  readonly #events: LeaseEvents;
  readonly #open = new Map<string, Delivery>();
  readonly #byEvent = new Map<string, Delivery>();
  /** ledgerKeys whose claim is under way. */
  readonly #claiming = new Set<string>();
  #nextDelivery = 1;
  #stopped = false;

  constructor(ledger: () => DeliveryLedger, gatewayId: string, log: Logger, metrics: GatewayMetrics, options: LeaseOptions, events: LeaseEvents) {
    this.#ledger = ledger;
    this.#boot = randomBytes(6).toString('hex');
    this.owner = `${this.#boot}@${gatewayId}`.slice(0, 64);
    this.#consumer = gatewayId;
    this.#log = log;
    this.#metrics = metrics;
    this.#leaseMs = options.leaseMs ?? configDefaults.EVENTFLOW_CONSUME_LEASE_MS;
    this.#maxAttempts = options.maxAttempts ?? configDefaults.EVENTFLOW_CONSUME_MAX_ATTEMPTS;
    this.#events = events;
  }

  get leaseMs(): number {
    return this.#leaseMs;
  }

  get maxAttempts(): number {
    return this.#maxAttempts;
  }

  /** Deliveries open now. */
  get count(): number {
    return this.#open.size;
  }

  /** Whether this gateway has the event open for the group. */
  isOpen(key: GroupKey, eventId: string): boolean {
    const id = ledgerKey(key, eventId);
    return this.#byEvent.has(id) || this.#claiming.has(id);
  }

  /** Claims the event for `key` in the store and sends it to `consumer`; false when another took it first. */
  async start(consumer: ConsumerRef, key: GroupKey, event: StoredEvent): Promise<boolean> {
    if (this.#stopped) return false;
    const claiming = ledgerKey(key, event.id);
    // Being claimed or open here: taken (a pass and a redelivery may meet on one event).
    if (this.isOpen(key, event.id)) return true;
    const id = `${this.#boot}-${this.#nextDelivery++}`;
    const now = Date.now();
    this.#claiming.add(claiming);
    let attempt: number | undefined;
    try {
      attempt = await this.#ledger().claim({ key, event, owner: this.owner, consumer: this.#consumer, delivery: id, deadline: now + this.#leaseMs, now });
    } finally {
      this.#claiming.delete(claiming);
    }
    if (attempt === undefined) return false;
    const delivery: Delivery = { id, event, consumer, key, attempt, timer: undefined };
    this.#open.set(id, delivery);
    this.#byEvent.set(ledgerKey(key, event.id), delivery);
    this.#arm(delivery, this.#leaseMs);
    consumer.peer.sendDelivery(consumer.handle, id, attempt, event);
    return true;
  }

  /**
   * Records what a consumer reports. A delivery not open here (a settle that outlived a restart of
   * this gateway, or came through another gateway) is settled in the store if it is still the
   * event's current delivery there. False when it is neither (settled, revoked, superseded).
   */
  async settle(peer: Peer, deliveryId: string, settlement: Settlement): Promise<boolean> {
    const delivery = this.#open.get(deliveryId);
    if (delivery && delivery.consumer.peer !== peer) return false;
    if (!delivery) {
      if (settlement.outcome !== 'success' && settlement.outcome !== 'failed') return (await this.#ledger().release(deliveryId, {})) !== undefined;
      const ended = await this.#ledger().settle(deliveryId, settlement.outcome, settlement.error);
      if (ended && settlement.outcome === 'failed') this.#events.failed(ended.eventId, settlement.error ?? 'the handler failed', ended.attempts);
      if (ended) this.#metrics.consumed(settlement.outcome);
      return ended !== undefined;
    }
    this.#end(delivery);
    switch (settlement.outcome) {
      case 'release':
        this.#metrics.consumed('released');
        await this.#handBack(delivery, 'released', undefined, 0);
        break;
      case 'retry':
        this.#metrics.consumed('retried');
        await this.#handBack(delivery, 'retry', settlement.error, settlement.delayMs);
        break;
      default:
        this.#metrics.consumed(settlement.outcome);
        try {
          await this.#ledger().settle(delivery.id, settlement.outcome, settlement.error);
        } catch (error) {
          // Not recorded: the lease in the store runs out and the event is delivered again then.
          this.#events.pending(delivery.key, delivery.event, undefined, Date.now() + this.#leaseMs);
          throw error;
        }
        if (settlement.outcome === 'failed') this.#events.failed(delivery.event.id, settlement.error ?? 'the handler failed', delivery.attempt);
    }
    return true;
  }

  /**
   * Moves an open delivery's lease deadline to now + `ms` (default: one lease; at most
   * MAX_EXTEND_LEASES). Returns the lease granted, or undefined when the delivery is not open on this peer.
   */
  async extend(peer: Peer, deliveryId: string, ms: number | undefined): Promise<number | undefined> {
    const delivery = this.#open.get(deliveryId);
    if (delivery?.consumer.peer !== peer) return undefined;
    const granted = Math.min(ms ?? this.#leaseMs, this.#leaseMs * MAX_EXTEND_LEASES);
    this.#arm(delivery, granted);
    await this.#ledger().extend(deliveryId, Date.now() + granted);
    return granted;
  }

  /** Ends the deliveries `match` selects (their consumer or connection is gone) and hands their events back. */
  async recall(match: (consumer: ConsumerRef) => boolean, reason: string): Promise<void> {
    for (const delivery of [...this.#open.values()].filter((open) => match(open.consumer))) {
      this.#end(delivery);
      try {
        await this.#handBack(delivery, reason, undefined, 0);
      } catch (error) {
        this.#log.error('could not hand back a delivery', { event: delivery.event.id, error });
      }
    }
  }

  /**
   * Gateway stop: no delivery starts from now on; the open ones may still settle for up to
   * `timeoutMs`, then the rest are released at once (not counted as attempts: nothing is lost, the
   * next owner runs them), as is any other lease this instance still holds in the store.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.#stopped = true;
    const deadline = Date.now() + timeoutMs;
    while (this.#open.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(1, deadline - Date.now()))));
    for (const delivery of [...this.#open.values()]) {
      this.#end(delivery);
      delivery.consumer.peer.sendRevoked?.(delivery.id);
      await this.#ledger()
        .release(delivery.id, { uncount: true })
        .catch((error: unknown) => this.#log.error('could not release a lease', { event: delivery.event.id, error }));
    }
    await this.#ledger()
      .releaseOwner(this.owner)
      .catch((error: unknown) => this.#log.error('could not release the leases of this gateway', { error }));
  }

  /** Stops the lease timers (gateway shutdown): no delivery expires or starts from now on. */
  stop(): void {
    this.#stopped = true;
    for (const delivery of this.#open.values()) clearTimeout(delivery.timer);
  }

  /** An event whose last lease expired unsettled (its gateway died): failed as a dead letter. */
  async deadLetter(key: GroupKey, event: StoredEvent, attempts: number, lastError: string | undefined, peer: Peer | undefined): Promise<void> {
    const message = lastError ?? 'lease expired';
    if (!(await this.#ledger().deadLetter(key, event.id, attempts, message))) return;
    this.#metrics.consumed('dead_lettered');
    const fields = { event: event.id, domain: event.domain, name: event.name, pid: event.pid, group: key.group, attempts, reason: message };
    if (peer?.note) peer.note('dead letter', 'warn', 'event failed after its last delivery attempt; recorded as a dead letter', fields);
    else this.#log.warn('event failed after its last delivery attempt; recorded as a dead letter', fields);
    this.#events.failed(event.id, message, attempts);
  }

  /** (Re)arms the lease timer of an open delivery. */
  #arm(delivery: Delivery, ms: number): void {
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
    const key = ledgerKey(delivery.key, delivery.event.id);
    if (this.#byEvent.get(key) === delivery) this.#byEvent.delete(key);
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
      await this.#handBack(delivery, 'lease expired', undefined, 0);
    } catch (error) {
      this.#log.error('could not redeliver after a lease expired', { event: event.id, error });
    }
  }

  /** An ended, unsettled delivery: the event is pending again (after `delayMs`), or a dead letter after the last attempt. */
  async #handBack(delivery: Delivery, reason: string, error: string | undefined, delayMs: number): Promise<void> {
    const { event, attempt, key, consumer } = delivery;
    if (attempt >= this.#maxAttempts) return this.deadLetter(key, event, attempt, error ?? reason, consumer.peer);
    const at = Date.now() + delayMs;
    const released = await this.#ledger().release(delivery.id, { availableAt: delayMs > 0 ? at : undefined, error });
    if (released) this.#events.pending(key, event, consumer, at);
  }

  /** A line a consumer can cause once per event: counted per condition on its connection when the peer can. */
  #note(peer: Peer, condition: string, level: 'info' | 'warn', message: string, fields: Record<string, unknown>): void {
    if (peer.note) peer.note(condition, level, message, fields);
    else this.#log[level](message, fields);
  }
}
