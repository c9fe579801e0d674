/**
 * Hands routed events to this gateway's connections: every matching subscription, the matching
 * waits, and exactly one consumer. Tracks deliveries until they are settled and hands back the
 * ones whose connection went away or whose lease expired.
 *
 * Leases: every delivery is open for `leaseMs` (the consumer may `extend` it). When the lease
 * expires the delivery is revoked (its consumer is told; its settle is refused from then on) and
 * the event is delivered again, to another consumer if there is one. Only one delivery of an
 * event is open at a time. The attempt number follows the event across redeliveries (lease
 * expiry, hand-back, release); a delivery not settled at attempt `maxAttempts` makes the event
 * failed and a dead letter (see EventStore.deadLetter) instead of being delivered again.
 *
 * A routed event is a notification, not the payload: the dispatcher then reads the domain's
 * published events after the last one it handed out, from the store, in position order. Routers
 * (a hub mesh especially) may deliver notifications out of order or twice; reading the log keeps
 * what connections receive gap-free, duplicate-free and ordered, which resuming by position
 * relies on. Stores commit in position order (SQLite: one writer; MySQL: a sequence row lock),
 * so once a position is visible every lower one is too.
 */
import type { StoredEvent } from '@eventflow/core';
import type { RouteTarget, Router } from '../router/router.js';
import type { EventStore, Outcome } from '../store/store.js';
import type { Logger } from '../log.js';
import { noMetrics, type GatewayMetrics } from '../metrics.js';

/** What the dispatcher needs from a connection. */
export interface Peer {
  readonly id: string;
  sendEvent(event: StoredEvent, names: string[]): void;
  sendDelivery(consumer: string, delivery: string, attempt: number, event: StoredEvent): void;
  sendWaited(wait: string, event: StoredEvent): void;
  sendDeleted(domain: string, pid: string, id: string | undefined): void;
  /** The delivery is no longer open (its lease expired); optional for peers that hold no consumers. */
  sendRevoked?(delivery: string): void;
  /** Logs a line this peer can cause once per event, counted per condition (Session.note); else the dispatcher logs it. */
  note?(condition: string, level: 'info' | 'warn', message: string, fields: Record<string, unknown>): void;
}

interface ConsumerRef {
  readonly peer: Peer;
  readonly handle: string;
  readonly domain: string;
  readonly name: string;
}

interface WaitRef {
  readonly peer: Peer;
  readonly handle: string;
  readonly domain: string;
  readonly pid: string;
  readonly names: ReadonlySet<string>;
  done: boolean;
}

interface Delivery {
  readonly id: string;
  readonly event: StoredEvent;
  readonly consumer: ConsumerRef;
  readonly attempt: number;
  /** Expires the lease; cleared when the delivery closes. */
  timer: ReturnType<typeof setTimeout> | undefined;
}

export interface DispatcherOptions {
  /**
   * Whether this gateway decides that an event nobody here takes is an orphan (the embedded
   * router); in a hub mesh the hub that routed the event decides.
   */
  markOrphans?: boolean;
  /** How long a delivery stays open without being settled or extended (EVENTFLOW_CONSUME_LEASE_MS). */
  leaseMs?: number;
  /** Deliveries of one event before it is failed as a dead letter (EVENTFLOW_CONSUME_MAX_ATTEMPTS). */
  maxAttempts?: number;
  metrics?: GatewayMetrics;
}

/** `extend` grants at most this many leases at once. */
const MAX_EXTEND_LEASES = 10;

const keyOf = (a: string, b: string): string => `${a}\u001f${b}`;

export class Dispatcher implements RouteTarget {
  readonly #store: EventStore;
  readonly #router: Router;
  readonly #consumerId: string;
  readonly #log: Logger;

  /** domain␟name → peers subscribed; a peer appears once per key. */
  readonly #subscriptions = new Map<string, Set<Peer>>();
  /** domain␟name → consumers, in registration order (rotated for fairness). */
  readonly #consumers = new Map<string, ConsumerRef[]>();
  /** domain␟pid → waits. */
  readonly #waits = new Map<string, Set<WaitRef>>();
  /**
   * Peer → its open waits by handle: a handle stands for one wait, whatever (domain, pid) it is
   * registered for, so that re-registering a handle replaces its wait instead of adding one that
   * the connection's limit (which counts handles) does not see.
   */
  readonly #waitsByPeer = new Map<Peer, Map<string, WaitRef>>();
  readonly #deliveries = new Map<string, Delivery>();
  /** domain␟name → number of local registrations, to tell the router about interest. */
  readonly #interest = new Map<string, number>();
  #nextDelivery = 1;
  #rotation = 0;
  /** domain → the position up to which its published events have been handed out. */
  readonly #cursors = new Map<string, number>();
  /** domain → the running pump; a second notification meanwhile asks for one more pass. */
  readonly #pumps = new Map<string, { again: boolean; done: Promise<void> }>();
  #start = 0;
  readonly #markOrphans: boolean;
  readonly #leaseMs: number;
  readonly #maxAttempts: number;
  readonly #metrics: GatewayMetrics;
  #stopped = false;

  constructor(store: EventStore, router: Router, consumerId: string, log: Logger, options: DispatcherOptions = {}) {
    this.#store = store;
    this.#router = router;
    this.#consumerId = consumerId;
    this.#log = log;
    this.#markOrphans = options.markOrphans ?? router.kind === 'local';
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#maxAttempts = options.maxAttempts ?? 5;
    this.#metrics = options.metrics ?? noMetrics;
  }

  /** Events published before this position were routed by an earlier run; routing starts after it. */
  async start(): Promise<void> {
    this.#start = await this.#store.head();
  }

  /** Stops the lease timers (gateway shutdown): no delivery expires from now on. */
  stop(): void {
    this.#stopped = true;
    for (const delivery of this.#deliveries.values()) clearTimeout(delivery.timer);
  }

  // ── registrations ──

  subscribe(peer: Peer, domain: string, name: string): void {
    const key = keyOf(domain, name);
    let peers = this.#subscriptions.get(key);
    if (!peers) this.#subscriptions.set(key, (peers = new Set()));
    if (peers.has(peer)) return;
    peers.add(peer);
    this.#changeInterest(domain, name, +1);
  }

  unsubscribe(peer: Peer, domain: string, name: string): void {
    const key = keyOf(domain, name);
    const peers = this.#subscriptions.get(key);
    if (!peers?.delete(peer)) return;
    if (peers.size === 0) this.#subscriptions.delete(key);
    this.#changeInterest(domain, name, -1);
  }

  addConsumer(peer: Peer, handle: string, domain: string, name: string): void {
    const key = keyOf(domain, name);
    const list = this.#consumers.get(key) ?? [];
    if (list.some((consumer) => consumer.peer === peer && consumer.handle === handle)) return;
    list.push({ peer, handle, domain, name });
    this.#consumers.set(key, list);
    this.#changeInterest(domain, name, +1);
  }

  async removeConsumer(peer: Peer, handle: string): Promise<void> {
    for (const [key, list] of this.#consumers) {
      const index = list.findIndex((consumer) => consumer.peer === peer && consumer.handle === handle);
      if (index < 0) continue;
      const [removed] = list.splice(index, 1);
      if (list.length === 0) this.#consumers.delete(key);
      if (removed) {
        this.#changeInterest(removed.domain, removed.name, -1);
        await this.#handBack((delivery) => delivery.consumer === removed, 'consumer removed');
      }
      return;
    }
  }

  /** Registers a wait; `after` also matches an outcome already stored after that position. */
  async addWait(peer: Peer, handle: string, domain: string, pid: string, names: string[], after: number | undefined): Promise<void> {
    const wait: WaitRef = { peer, handle, domain, pid, names: new Set(names), done: false };
    const key = keyOf(domain, pid);
    // Re-registering a handle replaces its wait, under any (domain, pid); finishing the old one may drop its set.
    const existing = this.#waitsByPeer.get(peer)?.get(handle);
    if (existing) this.#finishWait(existing);
    let byHandle = this.#waitsByPeer.get(peer);
    if (!byHandle) this.#waitsByPeer.set(peer, (byHandle = new Map()));
    byHandle.set(handle, wait);
    let set = this.#waits.get(key);
    if (!set) this.#waits.set(key, (set = new Set()));
    set.add(wait);
    for (const name of names) this.#changeInterest(domain, name, +1);
    if (after === undefined) return;
    // Registered first, checked second: an outcome stored in between is seen by one or the other.
    const stored = await this.#store.findOutcome(domain, pid, names, after);
    if (stored && !wait.done) {
      this.#finishWait(wait);
      peer.sendWaited(handle, stored);
    }
  }

  cancelWait(peer: Peer, handle: string): void {
    const wait = this.#waitsByPeer.get(peer)?.get(handle);
    if (wait) this.#finishWait(wait);
  }

  /** Cancels the peer's waits whose domain `drop` selects (its rights narrowed); returns their handles. */
  cancelWaitsWhere(peer: Peer, drop: (domain: string) => boolean): string[] {
    const cancelled: string[] = [];
    for (const set of [...this.#waits.values()]) {
      for (const wait of set) {
        if (wait.peer !== peer || !drop(wait.domain)) continue;
        this.#finishWait(wait);
        cancelled.push(wait.handle);
      }
    }
    return cancelled;
  }

  /** Forgets everything of a closed connection; its unsettled deliveries go to other consumers. */
  async removePeer(peer: Peer): Promise<void> {
    for (const [key, peers] of this.#subscriptions) {
      if (!peers.has(peer)) continue;
      const [domain = '', name = ''] = key.split('\u001f');
      this.unsubscribe(peer, domain, name);
    }
    for (const [key, list] of this.#consumers) {
      const kept = list.filter((consumer) => consumer.peer !== peer);
      for (const gone of list.filter((consumer) => consumer.peer === peer)) this.#changeInterest(gone.domain, gone.name, -1);
      if (kept.length === 0) this.#consumers.delete(key);
      else this.#consumers.set(key, kept);
    }
    for (const wait of [...(this.#waitsByPeer.get(peer)?.values() ?? [])]) this.#finishWait(wait);
    await this.#handBack((delivery) => delivery.consumer.peer === peer, 'connection closed');
  }

  // ── routing ──

  /** A router says `event` was published: hand out the domain's new events, in order. */
  route(event: StoredEvent): Promise<void> {
    const running = this.#pumps.get(event.domain);
    if (running) {
      running.again = true;
      return running.done;
    }
    const pump = { again: true, done: Promise.resolve() };
    pump.done = (async () => {
      try {
        while (pump.again) {
          pump.again = false;
          await this.#pump(event.domain);
        }
      } finally {
        this.#pumps.delete(event.domain);
      }
    })();
    this.#pumps.set(event.domain, pump);
    return pump.done;
  }

  async #pump(domain: string): Promise<void> {
    for (;;) {
      const after = this.#cursors.get(domain) ?? this.#start;
      const page = await this.#store.readPublishedAfter({ domain, name: '*' }, after, 500);
      const orphans: string[] = [];
      for (const event of page) {
        this.#cursors.set(domain, event.position);
        if (!(await this.#handOut(event))) orphans.push(event.id);
      }
      // One store transaction per page: per event, marking orphans cost as much as storing them.
      if (this.#markOrphans && orphans.length > 0) {
        this.#metrics.orphaned(orphans.length);
        await this.#store.markOrphans(orphans);
      }
      if (page.length < 500) return;
    }
  }

  /** Hands the event to its recipients here; false when there is none (an orphan, if this gateway decides that). */
  async #handOut(event: StoredEvent): Promise<boolean> {
    const subscribed = this.#fanOut(event);

    let waited = false;
    for (const wait of this.#waits.get(keyOf(event.domain, event.pid)) ?? []) {
      if (wait.done || !wait.names.has(event.name)) continue;
      this.#finishWait(wait);
      wait.peer.sendWaited(wait.handle, event);
      waited = true;
    }

    const consumed = await this.#deliver(event, 1, undefined);
    return subscribed || waited || consumed;
  }

  /**
   * Sends the event to every connection subscribed to its name or to `*`; false when there is none.
   * Connections on one key get the same `names` array, one after the other, so that the session
   * encodes the frame once for all of them (session.ts encodeEvent).
   */
  #fanOut(event: StoredEvent): boolean {
    const exact = this.#subscriptions.get(keyOf(event.domain, event.name));
    const wildcard = event.name === '*' ? undefined : this.#subscriptions.get(keyOf(event.domain, '*'));
    if (!wildcard) {
      if (!exact) return false;
      const names = [event.name];
      for (const peer of exact) peer.sendEvent(event, names);
      return true;
    }
    // Subscribed to both: one frame naming both, so the client's listeners of each get it once.
    const both = [event.name, '*'];
    const star = ['*'];
    if (exact) {
      const names = [event.name];
      for (const peer of exact) peer.sendEvent(event, wildcard.has(peer) ? both : names);
    }
    for (const peer of wildcard) if (!exact?.has(peer)) peer.sendEvent(event, star);
    return true;
  }

  /** Tells every connection subscribed to anything in the domain that events were deleted. */
  deleted(domain: string, pid: string, id?: string): void {
    const peers = new Set<Peer>();
    const prefix = `${domain}\u001f`;
    for (const [key, subscribed] of this.#subscriptions) if (key.startsWith(prefix)) for (const peer of subscribed) peers.add(peer);
    for (const peer of peers) peer.sendDeleted(domain, pid, id);
  }

  /**
   * Records a consumer's outcome; `release` hands the event to another consumer. False when the
   * delivery is not open on this peer (settled, handed back, revoked, or another peer's).
   */
  async settle(peer: Peer, deliveryId: string, outcome: Outcome | 'release'): Promise<boolean> {
    const delivery = this.#open(peer, deliveryId);
    if (!delivery) return false;
    this.#close(delivery);
    this.#metrics.consumed(outcome === 'release' ? 'released' : outcome);
    if (outcome === 'release') await this.#redeliver(delivery, 'released');
    else await this.#store.settle(delivery.event.id, outcome);
    return true;
  }

  /**
   * Moves an open delivery's lease deadline to now + `ms` (default: one lease; at most ten).
   * Returns the lease granted, or undefined when the delivery is not open on this peer.
   */
  extend(peer: Peer, deliveryId: string, ms: number | undefined): number | undefined {
    const delivery = this.#open(peer, deliveryId);
    if (!delivery) return undefined;
    const granted = Math.min(ms ?? this.#leaseMs, this.#leaseMs * MAX_EXTEND_LEASES);
    this.#lease(delivery, granted);
    return granted;
  }

  get stats(): { subscriptions: number; consumers: number; waits: number; deliveries: number } {
    let consumers = 0;
    for (const list of this.#consumers.values()) consumers += list.length;
    let waits = 0;
    for (const set of this.#waits.values()) waits += set.size;
    return { subscriptions: this.#subscriptions.size, consumers, waits, deliveries: this.#deliveries.size };
  }

  // ── internals ──

  /** Claims the event for one consumer and sends it; false when nobody here consumes it. */
  /**
   * A consumer came back with its position: events of its (domain, name) published after it that
   * nobody claimed (published while no consumer was connected, or handed back when none was left)
   * go to it now. The claim guard keeps each to one consumer, also across gateways.
   */
  async catchUp(peer: Peer, handle: string, after: number): Promise<void> {
    const consumer = [...this.#consumers.values()].flat().find((candidate) => candidate.peer === peer && candidate.handle === handle);
    if (!consumer) return;
    const registered = (): boolean => this.#consumers.get(keyOf(consumer.domain, consumer.name))?.includes(consumer) ?? false;
    try {
      for (let last = after; ; ) {
        const page = await this.#store.readPublishedAfter({ domain: consumer.domain, name: consumer.name }, last, 200);
        for (const event of page) {
          last = event.position;
          if (!registered()) return;
          if (await this.#store.claimForConsumer(event.id, this.#consumerId)) this.#hand(consumer, event, 1);
        }
        if (page.length < 200) return;
      }
    } catch (error) {
      this.#log.error('consumer catch-up failed', { consumer: handle, error });
    }
  }

  async #deliver(event: StoredEvent, attempt: number, exclude: ConsumerRef | undefined): Promise<boolean> {
    const candidates = this.#candidates(event.domain, event.name);
    if (candidates.length === 0) return false;
    const others = exclude ? candidates.filter((consumer) => consumer !== exclude) : candidates;
    const pool = others.length > 0 ? others : candidates;
    // v4's spoke claim: only a gateway that has a consumer for the event claims it.
    if (!(await this.#store.claimForConsumer(event.id, this.#consumerId))) return true;
    this.#hand(pool[this.#rotation++ % pool.length] as ConsumerRef, event, attempt);
    return true;
  }

  /** Opens a delivery of a claimed event to one consumer, under a lease. */
  #hand(consumer: ConsumerRef, event: StoredEvent, attempt: number): void {
    const delivery: Delivery = { id: `d${this.#nextDelivery++}`, event, consumer, attempt, timer: undefined };
    this.#deliveries.set(delivery.id, delivery);
    this.#lease(delivery, this.#leaseMs);
    consumer.peer.sendDelivery(consumer.handle, delivery.id, attempt, event);
  }

  /** The delivery, if it is open on this peer. */
  #open(peer: Peer, deliveryId: string): Delivery | undefined {
    const delivery = this.#deliveries.get(deliveryId);
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
  #close(delivery: Delivery): void {
    clearTimeout(delivery.timer);
    delivery.timer = undefined;
    this.#deliveries.delete(delivery.id);
  }

  /** The lease ran out: revoke the delivery and hand the event on (another consumer first). */
  async #expire(delivery: Delivery): Promise<void> {
    if (this.#deliveries.get(delivery.id) !== delivery || this.#stopped) return;
    this.#close(delivery);
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

  /** Delivers a closed, unsettled delivery's event again with attempt + 1, or dead-letters it after the last attempt. */
  async #redeliver(delivery: Delivery, reason: string): Promise<void> {
    const { event, attempt } = delivery;
    if (this.#stopped) {
      // Shutting down: every connection is closing, so handing the event around would only burn
      // its attempts. The claim is cleared, as for a delivery with no consumer left.
      await this.#store.releaseConsumerClaim(event.id);
      return;
    }
    if (attempt >= this.#maxAttempts) {
      // The consumer claim stays: the event is settled (failed), as by a consumer.
      const recorded = await this.#store.deadLetter(event.id, attempt, reason);
      const fields = { event: event.id, domain: event.domain, name: event.name, pid: event.pid, attempts: attempt, reason };
      if (recorded) this.#metrics.consumed('dead_lettered');
      if (recorded) this.#note(delivery.consumer.peer, 'dead letter', 'warn', 'event failed after its last delivery attempt; recorded as a dead letter', fields);
      return;
    }
    await this.#store.releaseConsumerClaim(event.id);
    const delivered = await this.#deliver(event, attempt + 1, delivery.consumer);
    if (!delivered) this.#note(delivery.consumer.peer, 'handed back', 'info', 'delivery handed back with no other consumer; it stays unclaimed', { event: event.id, reason });
  }

  async #handBack(match: (delivery: Delivery) => boolean, reason: string): Promise<void> {
    const orphaned = [...this.#deliveries.values()].filter(match);
    for (const delivery of orphaned) {
      this.#close(delivery);
      try {
        await this.#redeliver(delivery, reason);
      } catch (error) {
        this.#log.error('could not hand back a delivery', { event: delivery.event.id, error });
      }
    }
  }

  #candidates(domain: string, name: string): ConsumerRef[] {
    const exact = this.#consumers.get(keyOf(domain, name)) ?? [];
    const wildcard = name === '*' ? [] : (this.#consumers.get(keyOf(domain, '*')) ?? []);
    return wildcard.length === 0 ? exact : [...exact, ...wildcard];
  }

  /** A line a consumer can cause once per event: counted per condition on its connection when the peer can. */
  #note(peer: Peer, condition: string, level: 'info' | 'warn', message: string, fields: Record<string, unknown>): void {
    if (peer.note) peer.note(condition, level, message, fields);
    else this.#log[level](message, fields);
  }

  #finishWait(wait: WaitRef): void {
    if (wait.done) return;
    wait.done = true;
    const key = keyOf(wait.domain, wait.pid);
    const set = this.#waits.get(key);
    set?.delete(wait);
    if (set?.size === 0) this.#waits.delete(key);
    const byHandle = this.#waitsByPeer.get(wait.peer);
    if (byHandle?.get(wait.handle) === wait) byHandle.delete(wait.handle);
    if (byHandle?.size === 0) this.#waitsByPeer.delete(wait.peer);
    for (const name of wait.names) this.#changeInterest(wait.domain, name, -1);
  }

  #changeInterest(domain: string, name: string, delta: number): void {
    const key = keyOf(domain, name);
    const before = this.#interest.get(key) ?? 0;
    const after = before + delta;
    if (after <= 0) this.#interest.delete(key);
    else this.#interest.set(key, after);
    if (before === 0 && after > 0) this.#router.setInterest(domain, name, true);
    else if (before > 0 && after <= 0) this.#router.setInterest(domain, name, false);
  }
}
