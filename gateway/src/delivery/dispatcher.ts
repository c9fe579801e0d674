/**
 * Hands routed events to this gateway's connections: every matching subscription (fan-out.ts),
 * the matching waits (waits.ts), and exactly one consumer (consumers.ts, leases.ts). The
 * dispatcher owns these indexes for the whole gateway; each connection's own view of its
 * registrations is its Session's, which registers here.
 *
 * A routed event is a notification, not the payload: the dispatcher then reads the domain's
 * published events after the last one it handed out, from the store, in position order. Routers
 * (a hub mesh especially) may deliver notifications out of order or twice; reading the log keeps
 * what connections receive gap-free, duplicate-free and ordered, which resuming by position
 * relies on. Stores commit in position order (SQLite: one writer; MySQL: a sequence row lock),
 * so once a position is visible every lower one is too.
 */
import type { StoredEvent } from '@eventflow/core';
import { EventflowError } from '@eventflow/core';
import { configDefaults, PULL_AGAIN_MS, PUMP_PAGE } from '../defaults.js';
import type { Logger } from '../log.js';
import { noMetrics, type GatewayMetrics } from '../metrics.js';
import type { RouteTarget, Router } from '../router/router.js';
import type { EventStore } from '../store/store.js';
import { DEFAULT_GROUP, type GroupKey, type GroupOptions, type GroupRecord } from '../store/ledger.js';
import { Backlog } from './backlog.js';
import { Consumers, describeGroup, groupOf, type ConsumerRef, type ConsumerSpec } from './consumers.js';
import { LedgerWriter } from './ledger-writer.js';
import { FanOut } from './fan-out.js';
import { Interest } from './interest.js';
import { PatternIndex, PatternPump, type PatternFilter } from './patterns.js';
import { Leases, type LeaseOptions, type Settlement } from './leases.js';
import type { Peer } from './peer.js';
import { Waits } from './waits.js';

export type { Peer } from './peer.js';


export interface DispatcherOptions extends LeaseOptions {
  /**
   * Whether this gateway decides that an event nobody here takes is an orphan (the embedded
   * router); in a hub mesh the hub that routed the event decides.
   */
  markOrphans?: boolean;
  metrics?: GatewayMetrics;
  /** Consumer groups a domain may have (EVENTFLOW_MAX_GROUPS_PER_DOMAIN): a registration that would create one more is refused. */
  maxGroupsPerDomain?: number;
}

/** What the gateway holds now; the one source of the registration gauges (metrics.ts). */
export interface DispatcherStats {
  /** One per (connection, domain, name). */
  subscriptions: number;
  /** One per (connection, consumer handle). */
  consumers: number;
  /** Registered and not answered or cancelled yet. */
  waits: number;
  /** Deliveries open (sent, not settled, recalled or revoked yet). */
  deliveries: number;
  /** Consumers' reports the store has not recorded yet: the gateway writes them again, with backoff, until it does. */
  reportsWaiting: number;
}

export class Dispatcher implements RouteTarget {
  readonly #store: EventStore;
  readonly #fanOut: FanOut;
  readonly #waits: Waits;
  readonly #consumers: Consumers;
  readonly #leases: Leases;
  readonly #backlog: Backlog;
  readonly #patternIndex = new PatternIndex();
  readonly #patterns: PatternPump;
  readonly #router: Pick<Router, 'setPatternInterest'>;
  /** What the router was last told: whether there is a pattern subscription here. */
  #patternsTold = false;
  /** domain → the position up to which its published events have been handed out. */
  readonly #cursors = new Map<string, number>();
  /**
   * domain → the newest position a router told of since its pump's last pass began: the pass reads
   * through it (EventStore.readPublishedAfter's `upTo`, which a store that just committed it may
   * answer from memory). Infinity for a notification without a position (a pull again): the store.
   */
  readonly #wanted = new Map<string, number>();
  /** domain → the running pump; a second notification meanwhile asks for one more pass. */
  readonly #pumps = new Map<string, { again: boolean; done: Promise<void> }>();
  /** domain → the timer of its pull again after a failed one (PULL_AGAIN_MS); none once stopped. */
  readonly #pullsAgain = new Map<string, ReturnType<typeof setTimeout>>();
  #stopped = false;
  #start = 0;
  readonly #markOrphans: boolean;
  readonly #maxGroupsPerDomain: number;
  /** domain → the registration creating a group there now; the next one waits for it (#oneGroupAtATime). */
  readonly #creatingGroups = new Map<string, Promise<unknown>>();
  readonly #metrics: GatewayMetrics;
  /** The consumer id this gateway claims events with (v4's `consumed_spoke`). */
  readonly #claimant: string;
  readonly #log: Logger;

  constructor(store: EventStore, router: Router, consumerId: string, log: Logger, options: DispatcherOptions = {}) {
    this.#store = store;
    this.#log = log;
    this.#router = router;
    this.#markOrphans = options.markOrphans ?? router.kind === 'local';
    this.#maxGroupsPerDomain = options.maxGroupsPerDomain ?? configDefaults.EVENTFLOW_MAX_GROUPS_PER_DOMAIN;
    this.#metrics = options.metrics ?? noMetrics;
    this.#claimant = consumerId;
    const interest = new Interest(router);
    this.#fanOut = new FanOut(interest);
    this.#waits = new Waits(store, interest, (domain, seconds) => this.#metrics.requestAnswered(domain, seconds));
    this.#consumers = new Consumers(interest);
    const ledger = () => store.ledger();
    this.#leases = new Leases(ledger, new LedgerWriter(ledger, () => store.appendsDue(), (actions) => store.applyWithAppends?.(actions)), this.#consumers, consumerId, log, this.#metrics, options, {
      ended: (consumer, key, change, unsettled) => this.#backlog.ended(consumer, key, change, unsettled),
      failed: (eventId, message, attempt) => this.#waits.consumeFailed(eventId, message, attempt),
    });
    this.#backlog = new Backlog(ledger, this.#consumers, this.#leases, log, (key, members) => this.#groupDeleted(key, members));
    this.#patterns = new PatternPump(store, this.#patternIndex, (error) => log.error('pattern subscriptions: reading published events failed', { error }));
  }

  /** This gateway instance as the owner of leases in the store. */
  get leaseOwner(): string {
    return this.#leases.owner;
  }

  /** A dead letter went back to its group's backlog: it is delivered again. */
  requeued(key: GroupKey): void {
    this.#backlog.signalLedger(key);
  }

  /** Members of the group registered on this gateway. */
  members(key: GroupKey): number {
    return this.#consumers.members(key).length;
  }

  /** A group was deleted: its state here is forgotten. */
  forgetGroup(key: GroupKey): void {
    this.#backlog.forget(key);
  }

  /** Adds (or replaces) a pattern subscription; `head` is the store's head read before (patterns.ts). */
  subscribePattern(peer: Peer, handle: string, filter: PatternFilter, head: number): void {
    this.#patternIndex.add(peer, handle, filter);
    this.#patterns.added(head);
    this.#patternInterest();
  }

  unsubscribePattern(peer: Peer, handle: string): void {
    this.#patternIndex.remove(peer, handle);
    this.#patterns.emptied();
    this.#patternInterest();
  }

  /** Tells the router when the first pattern subscription came or the last one went (Router.setPatternInterest). */
  #patternInterest(): void {
    const interested = this.#patternIndex.count > 0;
    if (interested === this.#patternsTold) return;
    this.#patternsTold = interested;
    this.#router.setPatternInterest?.(interested);
  }

  routePatterns(domain: string | undefined): void {
    if (domain === undefined || this.#patternIndex.matches(domain)) this.#patterns.notify();
  }

  /** Events published before this position were routed by an earlier run; routing starts after it. */
  async start(): Promise<void> {
    this.#start = await this.#store.head();
  }

  /**
   * Gateway stop, first step: no delivery starts from now on; open ones may settle for up to
   * `timeoutMs` (their connections stay open meanwhile), then the rest are released in the store.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.#backlog.stop();
    await this.#leases.drain(timeoutMs);
  }

  /** Stops the lease and claim timers (gateway shutdown): no delivery expires or starts from now on. */
  stop(): void {
    this.#backlog.stop();
    this.#leases.stop();
    this.#stopped = true;
    for (const timer of this.#pullsAgain.values()) clearTimeout(timer);
    this.#pullsAgain.clear();
    this.#patterns.stop();
  }

  // ── registrations (Session calls these) ──

  subscribe(peer: Peer, domain: string, name: string): void {
    this.#fanOut.subscribe(peer, domain, name);
  }

  unsubscribe(peer: Peer, domain: string, name: string): void {
    this.#fanOut.unsubscribe(peer, domain, name);
  }

  /**
   * Registers a member of the consumer group (domain, name, spec.group) ('' = the default group),
   * with its credit and retry policy; `options` given are stored with the group. The group exists in
   * the store once this resolves; its backlog is then delivered (backlog.ts).
   */
  async addConsumer(peer: Peer, handle: string, domain: string, name: string, spec: ConsumerSpec, options: Partial<GroupOptions> = {}): Promise<GroupRecord> {
    const key = { domain, name, group: spec.group };
    const join = (): Promise<GroupRecord> => this.#join(peer, handle, domain, name, spec, options);
    const ledger = this.#store.ledger();
    if (this.#consumers.members(key).length > 0 || (await ledger.group(key))) return join();
    // A new group only while the domain has room (one more group is one more row per event for ever).
    // Checked and created one at a time per domain on this gateway: registrations checked side by side
    // each saw the room that only one of them could take, and together passed the limit.
    return this.#oneGroupAtATime(domain, async () => {
      if (this.#consumers.members(key).length === 0 && !(await ledger.group(key)) && (await ledger.countGroups(domain)) >= this.#maxGroupsPerDomain) {
        throw new EventflowError(
          'E_EVENTFLOW_LIMIT_EXCEEDED',
          `domain "${domain}" has ${this.#maxGroupsPerDomain} consumer groups already (EVENTFLOW_MAX_GROUPS_PER_DOMAIN); delete one (eventflow group-delete) or join an existing group`,
          { details: { limit: 'EVENTFLOW_MAX_GROUPS_PER_DOMAIN', value: this.#maxGroupsPerDomain } },
        );
      }
      return join();
    });
  }

  #oneGroupAtATime<T>(domain: string, work: () => Promise<T>): Promise<T> {
    const run = (this.#creatingGroups.get(domain) ?? Promise.resolve()).then(work);
    const settled = run.catch(() => undefined);
    this.#creatingGroups.set(domain, settled);
    void settled.then(() => this.#creatingGroups.get(domain) === settled && this.#creatingGroups.delete(domain));
    return run;
  }

  async #join(peer: Peer, handle: string, domain: string, name: string, spec: ConsumerSpec, options: Partial<GroupOptions>): Promise<GroupRecord> {
    const consumer = this.#consumers.add(peer, handle, domain, name, spec);
    try {
      return await this.#backlog.join(consumer, options);
    } catch (error) {
      if (this.#consumers.remove(peer, handle)) this.#backlog.left(groupOf(consumer));
      throw error;
    }
  }

  /**
   * Unregisters a consumer; its open deliveries go to other consumers. `ended`: the gateway ended it
   * (#groupDeleted), not its client, which is then told of each delivery taken back (`revoked`).
   */
  async removeConsumer(peer: Peer, handle: string, ended = false): Promise<void> {
    const removed = this.#consumers.remove(peer, handle);
    if (!removed) return;
    this.#backlog.left(groupOf(removed));
    await this.#leases.recall((consumer) => consumer === removed, ended ? 'consumer group deleted' : 'consumer removed', ended);
  }

  /**
   * A claim here found the group deleted under its members here: deleted on another gateway (this one
   * refuses a delete while the group has members here). Recording it again at the head, as claims did,
   * undid the operator's delete and silently skipped the events published in between; instead each
   * member ends and its client is told (E_EVENTFLOW_GROUP_DELETED). A registration from then on records
   * a new group, as any first registration does.
   */
  #groupDeleted(key: GroupKey, members: readonly ConsumerRef[]): void {
    const message = `consume: the consumer group ${describeGroup(key)} was deleted, so the gateway ended this consumer and nothing more is delivered to it; register the consumer again to start a new group from now (without the events published since the delete), or ask the operator who deleted it`;
    for (const { peer, handle } of members) {
      if (peer.endConsumer) peer.endConsumer(handle, 'E_EVENTFLOW_GROUP_DELETED', message, { ...key });
      else void this.removeConsumer(peer, handle, true);
    }
  }

  /** Registers a wait; with `after`, only later events answer it, an outcome already stored after it included. */
  addWait(peer: Peer, handle: string, domain: string, pid: string, names: string[], after: number | undefined, request?: string): Promise<void> {
    return this.#waits.add(peer, handle, domain, pid, names, after, request);
  }

  cancelWait(peer: Peer, handle: string): void {
    this.#waits.cancel(peer, handle);
  }

  /** Cancels the peer's waits whose domain `drop` selects (its rights narrowed); returns their handles. */
  cancelWaitsWhere(peer: Peer, drop: (domain: string) => boolean): string[] {
    return this.#waits.cancelWhere(peer, drop);
  }

  /** Forgets everything of a closed connection; its unsettled deliveries go to other consumers. */
  async removePeer(peer: Peer): Promise<void> {
    this.#fanOut.removePeer(peer);
    this.#patternIndex.removePeer(peer);
    this.#patterns.emptied();
    this.#patternInterest();
    for (const gone of this.#consumers.removePeer(peer)) this.#backlog.left(groupOf(gone));
    this.#waits.removePeer(peer);
    await this.#leases.recall((consumer) => consumer.peer === peer, 'connection closed');
  }

  // ── routing ──

  /** A router says `event` was published: hand out the domain's new events, in order. */
  route(event: Pick<StoredEvent, 'domain'> & Partial<Pick<StoredEvent, 'position'>>): Promise<void> {
    this.#patterns.notify();
    const position = typeof event.position === 'number' ? event.position : Infinity;
    this.#wanted.set(event.domain, Math.max(this.#wanted.get(event.domain) ?? 0, position));
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
      } catch (error) {
        this.#pullAgain(event.domain);
        throw error;
      } finally {
        this.#pumps.delete(event.domain);
      }
    })();
    this.#pumps.set(event.domain, pump);
    return pump.done;
  }

  #pullAgain(domain: string): void {
    if (this.#stopped || this.#pullsAgain.has(domain)) return;
    const timer = setTimeout(() => {
      this.#pullsAgain.delete(domain);
      // Failed again: told once already (the router logged it), and pulled again after as long.
      this.route({ domain }).catch(() => undefined);
    }, PULL_AGAIN_MS);
    timer.unref?.();
    this.#pullsAgain.set(domain, timer);
  }

  /**
   * A hub's `publish` record: a new event is routed; one already handed out here (a v4 hub took back a stuck
   * claim and sent it again, eventflow-v4.md §11 A1) is pending again for the default groups here, which share
   * v4's claim columns with v4 spokes; not for subscribers or waits, which have it, nor for named groups, whose
   * ledger no v4 peer touches. The ledger's guarded claim keeps it to one consumer across the mesh, and a
   * delivery of it still open here keeps it, taking v4's claim column back from the hub under its lease only:
   * the hub also routes this gateway's own publishes back here, often while the claim is still in flight, and
   * a claim written then would beat the gateway's own and strand the event (store.retakeConsumerClaim).
   */
  async routeAnnounced(event: StoredEvent): Promise<void> {
    if (event.position > (this.#cursors.get(event.domain) ?? this.#start)) return this.route(event);
    for (const key of this.#consumers.groupsFor(event.domain, event.name)) {
      if (key.group !== DEFAULT_GROUP) continue;
      if (this.#leases.isOpen(key, event.id)) await this.#store.retakeConsumerClaim(event.id, this.#claimant, { owner: this.#leases.owner, now: this.#leases.now() });
      else this.#backlog.signalLedger(key);
    }
  }

  async #pump(domain: string): Promise<void> {
    const upTo = this.#wanted.get(domain) ?? Infinity;
    this.#wanted.delete(domain);
    for (;;) {
      const after = this.#cursors.get(domain) ?? this.#start;
      const page = await this.#store.readPublishedAfter({ domain, name: '*' }, after, PUMP_PAGE, upTo === Infinity ? undefined : upTo);
      const orphans: string[] = [];
      for (const event of page) {
        this.#cursors.set(domain, event.position);
        if (!this.#distribute(event)) orphans.push(event.id);
      }
      // One store transaction per page: per event, marking orphans cost as much as storing them.
      if (this.#markOrphans && orphans.length > 0) {
        this.#metrics.orphaned(orphans.length);
        // Bookkeeping only: a failure (another process's SQLite write lock, a full disk) stopped the
        // pump, and the domain's events after this page waited for its next publish.
        await this.#store.markOrphans(orphans).catch((error: unknown) => this.#log.warn('could not mark events no one took as orphans', { domain, error }));
      }
      if (page.length < PUMP_PAGE) return;
    }
  }

  /** Gives the event to its recipients here; false when there is none (an orphan, if this gateway decides that). */
  #distribute(event: StoredEvent): boolean {
    // Pattern subscriptions get the event from their own pump, in position order across domains.
    const subscribed = this.#fanOut.send(event) || this.#patternIndex.wants(event);
    const waited = this.#waits.match(event);
    // The groups here claim it from their backlog in the store (one claim for the page's events).
    const consumed = this.#backlog.route(event);
    return subscribed || waited || consumed;
  }

  /** Tells every connection subscribed to anything in the domain that events were deleted. */
  deleted(domain: string, pid: string, id?: string): void {
    this.#fanOut.deleted(domain, pid, id);
  }

  // ── deliveries ──

  /**
   * Records a consumer's outcome; `release` hands the event to another consumer. False when the
   * delivery is not open on this peer (settled, recalled, revoked, superseded, or another's);
   * rejects when the store could not record it.
   */
  settle(peer: Peer, deliveryId: string, settlement: Settlement): Promise<boolean> {
    return this.#leases.settle(peer, deliveryId, settlement);
  }

  /**
   * Moves an open delivery's lease deadline to now + `ms` (default: one lease; at most
   * MAX_EXTEND_LEASES). Returns the lease granted, or undefined when the delivery is not open on this peer.
   */
  extend(peer: Peer, deliveryId: string, ms: number | undefined): Promise<number | undefined> {
    return this.#leases.extend(peer, deliveryId, ms);
  }

  get stats(): DispatcherStats {
    return { subscriptions: this.#fanOut.count + this.#patternIndex.count, consumers: this.#consumers.count, waits: this.#waits.count, deliveries: this.#leases.count, reportsWaiting: this.#leases.reportsWaiting };
  }
}
