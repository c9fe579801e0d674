/**
 * The deliveries open on this gateway: each holds a lease in the store (the delivery ledger,
 * store/ledger.ts: owner = this gateway instance, deadline) and a timer here, and takes one unit of
 * its consumer's credit until it ends.
 *
 * A delivery ends by a settle (an outcome, a retry after a delay, a hand-back), by its lease running
 * out (revoked: its consumer is told, the event is pending again, an attempt counted), or by its
 * consumer going away. Whatever ends it is written to the store guarded by the delivery id
 * (ledger-writer.ts batches those writes), and the store's answer is the answer: a settle of a
 * delivery the store no longer holds (the lease ran out while this gateway was paused, and another
 * took the event) is refused, and a settle the store could not record fails and leaves the delivery
 * open, so that the consumer sends it again. After the last attempt the event is failed for its group
 * and a dead letter with the last error.
 *
 * A settle that reaches a gateway other than the one holding the delivery (the consumer reconnected
 * elsewhere, or this gateway restarted) is matched against the store's current delivery, and taken
 * only from a connection whose token may consume the stored row's domain.
 */
import { randomBytes } from 'node:crypto';
import { EventflowError } from '@eventflow/core';
import { configDefaults, MAX_EXTEND_LEASES } from '../defaults.js';
import type { Logger } from '../log.js';
import type { GatewayMetrics } from '../metrics.js';
import { mayNameDelivery, type Claimed, type ClaimedDead, type DeliveryLedger, type DeliveryRef, type GroupKey, type LedgerAction } from '../store/ledger.js';
import { groupOf, ledgerId, type ConsumerRef, type Consumers } from './consumers.js';
import type { LedgerWriter } from './ledger-writer.js';
import type { Peer } from './peer.js';
import { retryDelay } from './retry-policy.js';
import { deliverySpan, endDelivery } from '../tracing.js';
import { LeaseClock } from '../store/lease-clock.js';
import type { Decision, Delivery, LeaseEvents, LeaseOptions, Settlement } from './lease-types.js';
import { WaitingReports } from './waiting-reports.js';

export type { LeaseEvents, LeaseOptions, Settlement } from './lease-types.js';

export class Leases {
  readonly #ledger: () => DeliveryLedger;
  readonly #writer: LedgerWriter;
  readonly #consumers: Consumers;
  /** This gateway instance as lease owner. */
  readonly owner: string;
  /** v4's `consumer` of the default group's claims: the gateway id. */
  readonly consumerId: string;
  readonly #log: Logger;
  readonly #metrics: GatewayMetrics;
  readonly #leaseMs: number;
  readonly #maxAttempts: number;
  readonly #clock: LeaseClock;
  readonly #events: LeaseEvents;
  readonly #open = new Map<string, Delivery>();
  /** ledgerId + event id → its open delivery here. */
  readonly #byEvent = new Map<string, Delivery>();
  /** Open deliveries with a report the store has not recorded yet: this gateway's claims leave their leases alone (`held`). */
  readonly #reports: WaitingReports;
  #stopped = false;

  constructor(ledger: () => DeliveryLedger, writer: LedgerWriter, consumers: Consumers, gatewayId: string, log: Logger, metrics: GatewayMetrics, options: LeaseOptions, events: LeaseEvents) {
    this.#ledger = ledger;
    this.#writer = writer;
    this.#consumers = consumers;
    this.owner = `${randomBytes(6).toString('hex')}@${gatewayId}`.slice(0, 64);
    this.consumerId = gatewayId;
    this.#log = log;
    this.#metrics = metrics;
    this.#leaseMs = options.leaseMs ?? configDefaults.EVENTFLOW_CONSUME_LEASE_MS;
    this.#maxAttempts = options.maxAttempts ?? configDefaults.EVENTFLOW_CONSUME_MAX_ATTEMPTS;
    this.#clock = options.clock ?? new LeaseClock();
    this.#events = events;
    this.#reports = new WaitingReports(log);
  }

  get leaseMs(): number {
    return this.#leaseMs;
  }

  /** Now, on the clock leases are written and compared by (store/lease-clock.ts). */
  now(): number {
    return this.#clock.now();
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Deliveries of an event before it is a dead letter, for a member: its retry policy's, else the gateway's. */
  maxAttempts(consumer: ConsumerRef | undefined): number {
    return consumer?.retry?.attempts ?? this.#maxAttempts;
  }

  /** Deliveries open now. */
  get count(): number {
    return this.#open.size;
  }

  /** Whether this gateway has the event open for the group's ledger. */
  isOpen(key: GroupKey, eventId: string): boolean {
    return this.#byEvent.has(`${ledgerId(key)}\u0000${eventId}`);
  }

  /**
   * A claim took an event whose delivery is still open here: its lease ran out in the store before
   * the timer here (they are one lease, measured twice). That delivery is revoked now, without a
   * write (the claim moved the row on); returns its consumer, which the new delivery avoids.
   */
  supersede(key: GroupKey, eventId: string): ConsumerRef | undefined {
    const delivery = this.#byEvent.get(`${ledgerId(key)}\u0000${eventId}`);
    if (!delivery || delivery.settling) return undefined;
    this.#end(delivery, 'revoked', 'lease expired');
    delivery.consumer.peer.sendRevoked?.(delivery.id);
    this.#metrics.consumed('revoked');
    return delivery.consumer;
  }

  /** A claimed event goes to `consumer` (with credit for it), open until `deadline`, the lease its claim wrote; false, nothing sent, once that has passed (the store stalled the claim): another gateway may hold the event by then. */
  open(consumer: ConsumerRef, key: GroupKey, { event, delivery: id, attempt, dataText }: Claimed, deadline: number): boolean {
    const started = Date.now();
    const left = deadline - this.now();
    if (left <= 0) {
      this.#log.warn('a claim came back after its lease had run out in the store (the store was slow); handing the event back', { event: event.id, group: key.group, lateMs: -left });
      return false;
    }
    const span = deliverySpan(event, key.group, attempt, `${consumer.peer.id}/${consumer.handle}`, started);
    const delivery: Delivery = { id, event, consumer, key, attempt, timer: undefined, settling: false, expired: false, report: undefined, started, span };
    // Queue time: from the event's store (its timestamp) to this start.
    this.#metrics.deliveryStarted(key, (started - Date.parse(event.timestamp)) / 1000);
    this.#open.set(id, delivery);
    this.#byEvent.set(`${ledgerId(key)}\u0000${event.id}`, delivery);
    consumer.open += 1;
    this.#arm(delivery, left); // the store's deadline: the claim's round trips are part of the lease
    consumer.peer.sendDelivery(consumer.handle, id, attempt, event, dataText);
    return true;
  }

  /** Claimed, but nobody here has credit for it any more (its members left meanwhile): back to pending at once, not counted. */
  async giveBack(key: GroupKey, claimed: readonly Claimed[]): Promise<void> {
    await Promise.all(claimed.map(({ delivery }) => this.#writer.write({ kind: 'release', delivery, uncount: true }).catch((error: unknown) => this.#log.error('could not release a claim', { delivery, error }))));
    this.#events.ended(undefined, key, 'pending');
  }

  /**
   * Records what a consumer reports. True once the store holds it; false when the delivery is not open here
   * (settled, revoked, superseded), or is another connection's whose domain this peer may not consume. Rejects
   * when the store could not record it: the delivery stays open and the consumer may send the settle again.
   */
  async settle(peer: Peer, deliveryId: string, settlement: Settlement): Promise<boolean> {
    const delivery = this.#open.get(deliveryId);
    if (!delivery) return this.#settleElsewhere(peer, deliveryId, settlement);
    // Another connection's: its client's new one, say, while a silent socket keeps the old one here (up to two ping
    // intervals). Its id names the delivery, as on another gateway (#settleElsewhere), which took it: so does this one.
    const mine = delivery.consumer.peer === peer;
    if (!mine && !(peer.mayConsume?.(delivery.event.domain) ?? false)) return false;
    if (!mine) await peer.consumersRegistered?.();
    if (delivery.settling || this.#open.get(deliveryId) !== delivery) return false;
    const decision = this.#decide(deliveryId, settlement, delivery.attempt, delivery.consumer);
    delivery.settling = true;
    let ended: DeliveryRef | undefined;
    try {
      ended = await this.#writer.write(decision.action);
    } catch (error) {
      delivery.settling = false;
      // The consumer's report is kept: sent again by the client within the lease, or written by the gateway after it.
      delivery.report = decision;
      this.#reports.add(delivery.id);
      if (delivery.expired) void this.#expire(delivery);
      throw error;
    }
    return this.#written(delivery, decision, ended);
  }

  /** A write of the consumer's report for `delivery` was answered: `ended` recorded, or undefined (not current). */
  #written(delivery: Delivery, decision: Decision, ended: DeliveryRef | undefined): boolean {
    // The store answers again: the reports waiting for it are written now, not at the end of their backoff.
    if (this.#reports.count > 0) queueMicrotask(() => this.#retryReports());
    if (!ended) {
      // Not the store's current delivery any more (its lease ran out and another took it).
      this.#end(delivery, 'superseded', 'not the current delivery any more');
      this.#events.ended(delivery.consumer, delivery.key, 'none');
      return false;
    }
    this.#end(delivery, decision.metric, decision.metric === 'success' ? undefined : (decision.failure ?? decision.metric));
    // Handler time: from the delivery's start to the settle the consumer reported (recorded).
    this.#metrics.deliverySettled(delivery.key, (Date.now() - delivery.started) / 1000);
    this.#recorded(decision, ended, delivery.consumer, delivery.key);
    return true;
  }

  /**
   * The lease ran out with a report the store could not record (the client sends a settle again only
   * within the lease). Handing the event back instead ran the handler again once the store was back,
   * as a new attempt, and after the last attempt made a dead letter of an event whose handler had
   * succeeded. So the gateway writes the report itself, and again with backoff while the store fails
   * (waiting-reports.ts: never given up), the delivery kept open meanwhile; this gateway's claims leave
   * its lease alone (`held`).
   */
  async #writeReport(delivery: Delivery, report: Decision): Promise<void> {
    delivery.settling = true;
    let ended: DeliveryRef | undefined;
    try {
      ended = await this.#writer.write(report.action);
    } catch (error) {
      delivery.settling = false;
      if (this.#open.get(delivery.id) === delivery) this.#arm(delivery, this.#reports.failed(delivery.id, error));
      return;
    }
    delivery.settling = false;
    this.#written(delivery, report, ended);
  }

  #retryReports(): void {
    for (const { id, wait } of this.#reports.retrying(Date.now())) {
      const waiting = this.#open.get(id);
      if (waiting?.report && !waiting.settling) this.#arm(waiting, wait);
    }
  }

  /** Deliveries open here whose lease a claim of this gateway must not take over: their consumer's report is still to be written. */
  held(): readonly string[] {
    return this.#reports.ids();
  }

  /** Reports the store has not recorded yet (eventflow_consume_reports_waiting). */
  get reportsWaiting(): number {
    return this.#reports.count;
  }

  /** A settle for a delivery not open here: the store's current delivery, from a connection that may consume its domain. */
  async #settleElsewhere(peer: Peer, deliveryId: string, settlement: Settlement): Promise<boolean> {
    const held = mayNameDelivery(deliveryId) ? await this.#ledger().delivery(deliveryId) : undefined;
    if (!held || !(peer.mayConsume?.(held.domain) ?? false)) return false;
    // A settle its client sent again right behind registering its consumers anew (a reconnect): decided
    // before that registration was done, a throw was recorded failed with no retry policy, for good.
    await peer.consumersRegistered?.();
    const consumer = this.#consumers.ofPeer(peer).find((member) => ledgerId(groupOf(member)) === ledgerId(held.key));
    const decision = this.#decide(deliveryId, settlement, held.attempts, consumer);
    const ended = await this.#writer.write(decision.action);
    if (!ended) return false;
    this.#recorded(decision, ended, undefined, held.key);
    return true;
  }

  /** What a settlement of the delivery `id` (attempt `attempt`) writes, given its consumer's retry policy. */
  #decide(id: string, settlement: Settlement, attempt: number, consumer: ConsumerRef | undefined): Decision {
    const dead = (error: string): Decision => ({ action: { kind: 'dead', delivery: id, error }, metric: 'dead_lettered', failure: error });
    const last = attempt >= this.maxAttempts(consumer);
    switch (settlement.outcome) {
      case 'success':
        return { action: { kind: 'outcome', delivery: id, outcome: 'success' }, metric: 'success', failure: undefined };
      case 'failed': {
        const message = settlement.error ?? 'the handler failed';
        const policy = consumer?.retry;
        // Without a policy, v4's rule: a throw records failed.
        if (!policy) return { action: { kind: 'outcome', delivery: id, outcome: 'failed', error: settlement.error }, metric: 'failed', failure: message };
        if (attempt >= policy.attempts) return dead(message);
        return { action: { kind: 'release', delivery: id, availableAt: this.now() + retryDelay(policy, attempt), error: message }, metric: 'retried', failure: undefined };
      }
      case 'retry':
        if (last) return dead(settlement.error ?? 'retry');
        return { action: { kind: 'release', delivery: id, availableAt: this.now() + settlement.delayMs, error: settlement.error }, metric: 'retried', failure: undefined };
      case 'release':
        if (last) return dead('released');
        return { action: { kind: 'release', delivery: id }, metric: 'released', failure: undefined };
    }
  }

  /** Metrics, the failure's waits and the group's next claim, once the store holds what a settle wrote. */
  #recorded(decision: Decision, ended: DeliveryRef, consumer: ConsumerRef | undefined, key: GroupKey): void {
    this.#metrics.consumed(decision.metric);
    if (decision.metric === 'dead_lettered') {
      const fields = { event: ended.eventId, domain: key.domain, group: key.group, attempts: ended.attempts, reason: decision.failure };
      if (consumer) this.#note(consumer.peer, 'dead letter', 'warn', 'event failed after its last delivery attempt; recorded as a dead letter', fields);
      else this.#log.warn('event failed after its last delivery attempt; recorded as a dead letter', fields);
    }
    if (decision.failure !== undefined) this.#events.failed(ended.eventId, decision.failure, ended.attempts);
    this.#events.ended(consumer, key, decision.action.kind === 'release' ? 'pending' : 'settled');
  }

  /**
   * Moves an open delivery's lease deadline to now + `ms` (default: one lease; at most
   * MAX_EXTEND_LEASES). Returns the lease granted, or undefined when the delivery is not open on this
   * peer or no longer the store's current one.
   */
  async extend(peer: Peer, deliveryId: string, ms: number | undefined): Promise<number | undefined> {
    const granted = Math.min(ms ?? this.#leaseMs, this.#leaseMs * MAX_EXTEND_LEASES);
    const delivery = this.#open.get(deliveryId);
    if (!delivery) {
      const held = mayNameDelivery(deliveryId) ? await this.#ledger().delivery(deliveryId) : undefined;
      if (!held || !(peer.mayConsume?.(held.domain) ?? false)) return undefined;
      return (await this.#ledger().extend(deliveryId, this.now() + granted)) ? granted : undefined;
    }
    if (delivery.consumer.peer !== peer) return undefined;
    const deadline = this.now() + granted;
    if (!(await this.#ledger().extend(deliveryId, deadline))) {
      if (this.#open.get(deliveryId) === delivery) {
        this.#end(delivery, 'superseded', 'not the current delivery any more');
        this.#events.ended(delivery.consumer, delivery.key, 'none');
      }
      return undefined;
    }
    if (this.#open.get(deliveryId) === delivery) this.#arm(delivery, Math.max(0, deadline - this.now())); // the deadline written, not `granted` from the answer
    return granted;
  }

  /**
   * Ends the deliveries `match` selects (their consumer or connection is gone) and hands their events
   * back. `revoke`: the gateway, not the client, ended the consumer, so the client is told of each
   * (`revoked`: its handler's signal aborts, and it does not settle).
   */
  async recall(match: (consumer: ConsumerRef) => boolean, reason: string, revoke = false): Promise<void> {
    // A delivery whose report waits for the store stays until it is written: its consumer did report.
    const recalled = [...this.#open.values()].filter((open) => match(open.consumer) && !open.settling && !open.report);
    for (const delivery of recalled) {
      this.#end(delivery, 'recalled', reason);
      if (revoke) delivery.consumer.peer.sendRevoked?.(delivery.id);
    }
    await Promise.all(recalled.map((delivery) => this.#handBack(delivery, reason)));
  }

  /**
   * Gateway stop: the open deliveries may still settle for up to `timeoutMs`, then the rest are
   * released at once (not counted as attempts: nothing is lost, the next owner runs them), as is
   * any other lease this instance still holds in the store. The caller stops new claims first.
   */
  async drain(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.#open.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(1, deadline - Date.now()))));
    this.#stopped = true;
    const left = [...this.#open.values()];
    for (const delivery of left) {
      this.#end(delivery, 'released', 'the gateway stopped');
      delivery.consumer.peer.sendRevoked?.(delivery.id);
    }
    let handedBack = true;
    await Promise.all(
      left.map((delivery) =>
        // A report the store could not record yet is what the consumer said: written rather than handed back.
        this.#writer.write(delivery.report?.action ?? { kind: 'release', delivery: delivery.id, uncount: true }).catch((error: unknown) => {
          handedBack = false;
          this.#log.error('could not release a lease', { event: delivery.event.id, error });
        }),
      ),
    );
    await this.#ledger()
      .releaseOwner(this.owner)
      .catch((error: unknown) => {
        handedBack = false;
        this.#log.error('could not release the leases of this gateway', { error });
      });
    // The stop goes on (connections, the store); it ends as failed (exit 1), since those events now wait for their lease.
    if (!handedBack) {
      throw new EventflowError('E_EVENTFLOW_STORE_FAILED', "the store did not take back this gateway's leases as it stopped: their events run again once their lease runs out (EVENTFLOW_CONSUME_LEASE_MS), on any gateway");
    }
  }

  /** Stops the lease timers (gateway shutdown): no delivery expires from now on. */
  stop(): void {
    this.#stopped = true;
    for (const delivery of this.#open.values()) clearTimeout(delivery.timer);
  }

  /** Events a claim found out of attempts (their leases ran out on gateways that died): failed as dead letters by the claim. */
  deadLettered(key: GroupKey, letters: readonly ClaimedDead[]): void {
    for (const { event, attempts, lastError } of letters) {
      this.#metrics.consumed('dead_lettered');
      this.#log.warn('event failed after its last delivery attempt; recorded as a dead letter', {
        event: event.id,
        domain: event.domain,
        name: event.name,
        pid: event.pid,
        group: key.group,
        attempts,
        reason: lastError,
      });
      this.#events.failed(event.id, lastError, attempts);
    }
  }

  /** (Re)arms the lease timer of an open delivery. */
  #arm(delivery: Delivery, ms: number): void {
    clearTimeout(delivery.timer);
    if (this.#stopped) return;
    delivery.timer = setTimeout(() => void this.#expire(delivery), ms);
    delivery.timer.unref?.();
  }

  /** Ends a delivery here: no longer open, its credit free, its settle refused from now on; `outcome` (and `failure`) end its span. */
  #end(delivery: Delivery, outcome: string, failure?: string): void {
    clearTimeout(delivery.timer);
    delivery.timer = undefined;
    if (this.#open.get(delivery.id) !== delivery) return;
    endDelivery(delivery.span, outcome, failure);
    this.#open.delete(delivery.id);
    this.#reports.delete(delivery.id);
    delivery.consumer.open = Math.max(0, delivery.consumer.open - 1);
    const key = `${ledgerId(delivery.key)}\u0000${delivery.event.id}`;
    if (this.#byEvent.get(key) === delivery) this.#byEvent.delete(key);
  }

  /** The lease ran out: revoke the delivery and hand the event back (a dead letter after the last attempt). */
  async #expire(delivery: Delivery, checked = false): Promise<void> {
    if (this.#open.get(delivery.id) !== delivery || this.#stopped) return;
    if (delivery.settling) return void (delivery.expired = true);
    if (delivery.report) return this.#writeReport(delivery, delivery.report);
    // The store's deadline ends the lease, not this timer: the client, back on another gateway (this one not knowing its
    // connection gone), may have extended it there. Handed back here, the event ran again beside the handler granted that.
    if (!checked) {
      const left = ((await this.#ledger().delivery(delivery.id).catch(() => undefined))?.deadline ?? 0) - this.now();
      return left > 0 ? this.#arm(delivery, left) : this.#expire(delivery, true);
    }
    this.#end(delivery, 'revoked', 'lease expired');
    const { event, consumer, attempt } = delivery;
    this.#note(consumer.peer, 'lease expired', 'info', 'delivery lease expired; revoking it', { event: event.id, delivery: delivery.id, connection: consumer.peer.id, attempt });
    consumer.peer.sendRevoked?.(delivery.id);
    // A delivery ends once in the counter: a last attempt's as the dead letter it becomes (#handBack), as a throw's does.
    if (attempt < this.maxAttempts(consumer)) this.#metrics.consumed('revoked');
    await this.#handBack(delivery, 'lease expired');
  }

  /** An ended, unsettled delivery: pending again, or a dead letter after the last attempt. Store failures are logged: the lease in the store runs out by itself. */
  async #handBack(delivery: Delivery, reason: string): Promise<void> {
    const { event, attempt, key, consumer } = delivery;
    const last = attempt >= this.maxAttempts(consumer);
    try {
      const ended = await this.#writer.write(last ? { kind: 'dead', delivery: delivery.id, error: reason } : { kind: 'release', delivery: delivery.id });
      if (ended && last) {
        this.#metrics.consumed('dead_lettered');
        const fields = { event: event.id, domain: event.domain, name: event.name, pid: event.pid, group: key.group, attempts: attempt, reason };
        this.#note(consumer.peer, 'dead letter', 'warn', 'event failed after its last delivery attempt; recorded as a dead letter', fields);
        this.#events.failed(event.id, reason, attempt);
      }
    } catch (error) {
      this.#log.error('could not hand a delivery back; its lease runs out in the store', { event: event.id, reason, error });
    }
    this.#events.ended(consumer, key, 'pending', event.id);
  }

  /** A line a consumer can cause once per event: counted per condition on its connection when the peer can. */
  #note(peer: Peer, condition: string, level: 'info' | 'warn', message: string, fields: Record<string, unknown>): void {
    if (peer.note) peer.note(condition, level, message, fields);
    else this.#log[level](message, fields);
  }
}
