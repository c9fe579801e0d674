/**
 * Each consumer group's backlog, handed to its members here as their credit allows.
 *
 * The backlog is the store's: the group's rows in the delivery ledger (store/ledger.ts), every
 * published event of its (domain, name) since the group was created that has no outcome for it.
 * This gateway claims from it only what its members can take now: the sum of their free credit
 * (`concurrency` less their open deliveries), in pages of at most CLAIM_BATCH events per store
 * transaction, and hands each claimed event to a member with free credit, in turn. So a member that
 * joins gets the next claims at once, a slow one is never sent more than its credit, and gateways
 * share a group by what their members can take.
 *
 * A group claims again when credit comes free (a settle), when something may have become claimable
 * (an event of it was routed here, a delivery here ended without an outcome, a dead letter was
 * requeued), and on a timer once a claim found less than it asked for: at the earliest lease deadline
 * or retry time the store reported, and at least every GROUP_POLL_MS. That timer is how a lease left
 * by a gateway that died is taken over, how a release or settle on another gateway is seen, and how
 * the group resumes after the store failed: no pass has to finish first, and no restart is needed.
 * Once a claim has come up short, and while nothing but routes came since, a store that can (SQLite,
 * MySQL) leases the group's new events in their append's transaction instead (`#claimer`,
 * store/ledger.ts AppendClaimer), also while a claim of the routed events it did not lease is under
 * way: the members' credit bounds those leases as it bounds claims.
 */
import { randomBytes } from 'node:crypto';
import type { StoredEvent } from '@eventflow/core';
import { CLAIM_BATCH, GROUP_POLL_MS, MAX_TIMER_MS } from '../defaults.js';
import type { AppendClaimer, Claimed, GroupKey, GroupOptions, GroupRecord } from '../store/ledger.js';
import type { Backlog } from './backlog.js';
import type { ConsumerRef } from './consumers.js';

/** Claims of one group under way at once, at most. */
const MAX_CLAIMS = 3;
/** A claim made while another is under way takes at least this many events. */
const MIN_OVERLAPPING_CLAIM = 16;
/** Avoid hints kept per group at most. */
const AVOID_MAX = 10_000;
/** After a member joins, a claim that comes up short looks again this soon, for GROUP_POLL_MS. */
const JOINED_RETRY_MS = 50;

/** One group's claiming on this gateway. */
export class GroupBacklog {
  readonly key: GroupKey;
  readonly #backlog: Backlog;
  #record: Promise<GroupRecord> | undefined;
  #ordered: boolean | undefined;
  /** Claims under way, and the credit they were made for. */
  #inFlight = 0;
  #reserved = 0;
  /** The last claim took less than it asked for: nothing more until something changes (or the timer). */
  #drained = false;
  /** Signalled since the claims under way read the store: they may have missed what changed. */
  #dirty = false;
  /** The newest position of an event of the group routed here. */
  #routedUpTo: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;
  /** Store failures in a row: the retry timer backs off. */
  #failures = 0;
  /** Where the next member is looked for (turns between members with credit). */
  #turn = 0;
  /** Event id → the member it last went to without an outcome: another is preferred for it. */
  readonly #avoid = new Map<string, ConsumerRef>();
  /**
   * A member joined: until then a short claim looks again within JOINED_RETRY_MS, not at the poll.
   * The backlog may be there and locked by another gateway's claim under way (SKIP LOCKED), whose
   * members' settles do not reach this gateway: the new member would wait for the poll (1 s) for its
   * first job, as the MariaDB credit test saw now and then (742 ms, 1,061 ms).
   */
  #joinedUntil = 0;
  /** Leases given to appends under way (the store's claimAtAppend), not committed yet. */
  #atAppend = 0;
  /** Every event of the group up to this position was leased at its append: its route needs no claim. */
  #leasedUpTo = 0;
  /**
   * Events leased at their append whose route has not come yet (it needs no claim): where the store
   * cannot tell `covered` (MySQL: a batch may commit before the route of the one before it).
   */
  readonly #leasedAtAppend = new Set<string>();
  /** Event id → the store deadline of its lease taken at append, until the commit hands it out (cleared once no lease is asked for). */
  readonly #appendDeadlines = new Map<string, number>();
  /**
   * The last claim came up short and nothing but routes came since: the events routed and not leased at
   * their append (`#unleased`) are all a claim can find, so it claims just as many, and appends go on
   * leasing with the rest of the credit while it is under way. On MariaDB a claim takes longer than the
   * gap between two events at a steady 500/s: a claim that took all the credit kept every append from
   * leasing, and each claim's routes made the next one.
   */
  #live = false;
  #unleased = 0;
  /** Its members left (stop): a claim under way then must not arm the store's leases at append again. */
  #left = false;
  /** A wake is queued for the end of this run of microtasks (wakeSoon). */
  #wakeQueued = false;
  /**
   * While the members wait for work (`#live`), the store leases new events in their append's
   * transaction, up to the free credit: no claim per event, and the job goes out once it is stored
   * instead of after its route.
   */
  readonly #claimer: AppendClaimer = {
    lease: (event) => {
      const backlog = this.#backlog;
      if (!this.#live || backlog.stopped || this.#free() - this.#reserved - this.#atAppend <= 0) return undefined;
      this.#atAppend += 1;
      const now = backlog.leases.now();
      const deadline = now + backlog.leases.leaseMs;
      this.#appendDeadlines.set(event.id, deadline);
      return { owner: backlog.leases.owner, consumer: backlog.leases.consumerId, deadline, now };
    },
    committed: (claimed, given, covered) => {
      this.#atAppend -= given;
      const deadlines = claimed.map((one) => this.#appendDeadlines.get(one.event.id) ?? this.#backlog.leases.now() + this.#backlog.leases.leaseMs);
      if (this.#atAppend === 0) this.#appendDeadlines.clear();
      else for (const one of claimed) this.#appendDeadlines.delete(one.event.id);
      if (covered !== undefined) this.#leasedUpTo = Math.max(this.#leasedUpTo, covered);
      else {
        // Bounded: one forgotten costs a claim.
        if (this.#leasedAtAppend.size + claimed.length > AVOID_MAX) this.#leasedAtAppend.clear();
        for (const one of claimed) this.#leasedAtAppend.add(one.event.id);
      }
      // Called by the store right after its commit: nothing here may fail the append. A lease not
      // handed out runs out and its event is claimed again.
      try {
        this.#hand(claimed, (_, i) => deadlines[i] as number);
      } catch (error) {
        this.#backlog.failed(this.key, error);
      }
    },
    abandoned: (given) => {
      this.#atAppend -= given;
      if (this.#atAppend === 0) this.#appendDeadlines.clear();
    },
  };

  constructor(key: GroupKey, backlog: Backlog) {
    this.key = key;
    this.#backlog = backlog;
  }

  /** The group in the store with `options` (created now if it is not); then its backlog goes out. */
  async join(options: Partial<GroupOptions>): Promise<GroupRecord> {
    const previous = this.#record;
    const record = this.#backlog.ledger().ensureGroup(this.key, options);
    this.#record = record;
    // Failed (the store): the members already here go on with the group as they had it, so that their
    // claims still tell a delete elsewhere (#claim) from a group never recorded here.
    record.catch(() => {
      if (this.#record === record) this.#record = previous;
    });
    const joined = await record;
    this.#ordered = joined.ordered;
    this.#joinedUntil = this.#backlog.leases.now() + GROUP_POLL_MS;
    this.signal();
    return joined;
  }

  /** This gateway deleted the group (a member registered meanwhile): recorded again at the next claim. */
  forget(): void {
    this.#record = undefined;
    this.#ordered = undefined;
  }

  /** Whether the group is ordered, as last read (unknown: treated as ordered, so that nothing waits). */
  get ordered(): boolean {
    return this.#ordered ?? true;
  }

  /** An event of the group was routed here. */
  routed(event: StoredEvent): void {
    this.#routedUpTo = Math.max(this.#routedUpTo ?? 0, event.position);
    if (this.#leasedAtAppend.delete(event.id) || event.position <= this.#leasedUpTo) return;
    this.#unleased += 1;
    this.#drained = false;
    this.wake();
  }

  /** Something may be claimable now. */
  signal(): void {
    this.#live = false;
    this.#drained = false;
    this.#dirty = true;
    this.wakeSoon();
  }

  /**
   * Claims while members have credit no claim is made for yet and the backlog may hold something:
   * up to MAX_CLAIMS claims at once (each its own transaction: on MariaDB they overlap their round
   * trips, and SKIP LOCKED keeps them on different rows).
   */
  wake(): void {
    // #left: a claim under way when the members left must not claim for a later member's GroupBacklog.
    while (!this.#drained && !this.#backlog.stopped && !this.#left && this.#inFlight < MAX_CLAIMS) {
      const limit = Math.min(CLAIM_BATCH, this.#free() - this.#reserved, this.#live ? this.#unleased : Infinity);
      // A small claim while another is under way waits for it (or for more credit): it would cost a
      // transaction for a few events. Half the members' credit: on MariaDB a drain of 2 × 64 ran 12%
      // faster than with a quarter (fewer, larger pages: the database's CPU is the limit there).
      if (limit <= 0 || (this.#inFlight > 0 && limit < Math.max(MIN_OVERLAPPING_CLAIM, this.#credit() / 2))) return;
      this.#inFlight += 1;
      this.#reserved += limit;
      if (this.#live) this.#unleased -= limit;
      void this.#claim(limit, this.#live);
    }
  }

  /**
   * Wakes once the current run of microtasks is over: the settles of one ledger batch end one after
   * the other in it, and a wake at each would claim the credit the first one freed alone, a store
   * transaction for one event (a drain made every other claim one of a single event: on MariaDB ~6
   * ms of the database's time each), while the rest waited for the next.
   */
  wakeSoon(): void {
    if (this.#wakeQueued) return;
    this.#wakeQueued = true;
    queueMicrotask(() => {
      this.#wakeQueued = false;
      this.wake();
    });
  }

  stop(): void {
    this.#left = true;
    this.#live = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    void this.#record?.then((record) => this.#backlog.ledger().claimAtAppend?.(record, undefined)).catch(() => undefined);
  }

  /** The members' credit, free or not. */
  #credit(): number {
    let credit = 0;
    for (const member of this.#members()) credit += member.concurrency;
    return credit;
  }

  /** Free credit of the members here. */
  #free(): number {
    let free = 0;
    for (const member of this.#members()) free += Math.max(0, member.concurrency - member.open);
    return free;
  }

  #members(): readonly ConsumerRef[] {
    return this.#backlog.consumers.members(this.key);
  }

  async #claim(limit: number, live: boolean): Promise<void> {
    const backlog = this.#backlog;
    // A microtask later: the routes of one pump page (or the settles of one batch) make one claim.
    await Promise.resolve();
    try {
      const recorded = (this.#record ??= backlog.ledger().ensureGroup(this.key));
      const record = await recorded;
      this.#ordered = record.ordered;
      const leases = backlog.leases;
      // The most lenient member's attempts (a member without a retry policy has the gateway's): not at
      // least the gateway's, which gave a lease left by a killed gateway deliveries past `retry.attempts`.
      // A loop, not Math.max(...): spread as arguments, some 150,000 members overflowed the stack, and every claim of the group failed.
      let maxAttempts = 0;
      for (const member of this.#members()) maxAttempts = Math.max(maxAttempts, leases.maxAttempts(member));
      if (maxAttempts === 0) maxAttempts = leases.maxAttempts(undefined);
      const now = leases.now();
      const deadline = now + leases.leaseMs;
      // From here the claim reads the store: a signal or route after this may be something it does not see.
      this.#dirty = false;
      if (!live) this.#unleased = 0;
      const result = await backlog.ledger().claim({
        group: record,
        owner: leases.owner,
        consumer: leases.consumerId,
        secret: randomBytes(16).toString('hex'),
        deadline,
        now,
        limit,
        maxAttempts,
        upTo: this.#routedUpTo,
        known: backlog.known,
        held: leases.held(),
        // Its leases must still have time left at its commit: committed late, they went to nobody and kept their attempt.
        clock: () => leases.now(),
      });
      this.#failures = 0;
      if (result.missing) {
        // Deleted since the group was recorded here. When a registration here (join) or this gateway's
        // own delete (forget) has replaced the record meanwhile, the next claim goes by that. Else it was
        // deleted on another gateway under the members here: recording it again, at the head, would undo
        // the delete and skip the events published in between unseen, so they end instead (the
        // dispatcher's), and this backlog stops (`left`; while it still has the record, by which it
        // takes back the store's leases at append).
        if (this.#record === recorded) {
          backlog.deleted(this.key);
          this.#record = undefined;
        }
        this.#dirty = true;
      }
      if (result.dead.length > 0) {
        leases.deadLettered(this.key, result.dead);
        // In an ordered group a dead letter is its event's outcome: the pid's next event, which this claim read as
        // held back, is free now. Claimed again at once; it waited for the group's poll (1 s).
        if (record.ordered) this.#dirty = true;
      }
      this.#hand(result.claimed, () => deadline);
      if (result.claimed.length + result.dead.length < limit && !result.missing) {
        // Drained, unless something changed while it was being read (routes: the events a live claim takes).
        if (!this.#dirty) {
          this.#drained = this.#unleased === 0;
          this.#live = !record.ordered;
        }
        const now = leases.now();
        this.#arm(Math.min(result.nextDue ?? Infinity, now + (now < this.#joinedUntil ? JOINED_RETRY_MS : GROUP_POLL_MS)));
        if (this.#live && !backlog.stopped && !this.#left) backlog.ledger().claimAtAppend?.(record, this.#claimer);
      }
    } catch (error) {
      this.#live = false;
      this.#failures += 1;
      backlog.failed(this.key, error);
      this.#drained = true;
      this.#arm(backlog.leases.now() + Math.min(GROUP_POLL_MS, 50 * 2 ** Math.min(this.#failures, 5)));
    } finally {
      this.#inFlight -= 1;
      this.#reserved -= limit;
    }
    this.wake();
  }

  /**
   * Claimed events to members with free credit, in turn, each under the lease its claim wrote
   * (`deadline`); those none can take, and those whose lease ran out before the claim came back, are
   * given back.
   */
  #hand(claimed: readonly Claimed[], deadline: (one: Claimed, index: number) => number): void {
    const backlog = this.#backlog;
    const unsent = [];
    for (const [i, one] of claimed.entries()) {
      const stale = backlog.leases.supersede(this.key, one.event.id);
      const member = this.#next(stale ?? this.#avoid.get(one.event.id));
      this.#avoid.delete(one.event.id);
      if (!member || backlog.stopped || !backlog.leases.open(member, this.key, one, deadline(one, i))) unsent.push(one);
    }
    if (unsent.length > 0) void backlog.leases.giveBack(this.key, unsent);
  }

  /** The event ended unsettled with `consumer`: its next delivery goes to another member if one has credit. */
  avoid(eventId: string, consumer: ConsumerRef): void {
    // Bounded: a hint, not a ledger (a burst of expiries of a dead worker, say).
    if (this.#avoid.size >= AVOID_MAX) this.#avoid.clear();
    this.#avoid.set(eventId, consumer);
  }

  /** The next member with free credit, in turn; `avoid` only when no other has credit. */
  #next(avoid: ConsumerRef | undefined): ConsumerRef | undefined {
    const members = this.#members();
    let fallback: ConsumerRef | undefined;
    for (let i = 0; i < members.length; i++) {
      const member = members[(this.#turn + i) % members.length] as ConsumerRef;
      if (member.open >= member.concurrency) continue;
      if (member === avoid) {
        fallback = member;
        continue;
      }
      this.#turn = (this.#turn + i + 1) % members.length;
      return member;
    }
    return fallback;
  }

  /** One timer: the earliest time (the lease clock's) something of the group may be claimable again. */
  #arm(at: number): void {
    if (this.#backlog.stopped || this.#left || (this.#timer !== undefined && this.#timerAt <= at)) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    // A few ms late, so that the deadline has passed on every clock reading of the claim.
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      if (this.#members().length > 0) this.signal();
    }, Math.min(MAX_TIMER_MS, Math.max(0, at - this.#backlog.leases.now()) + 5));
    this.#timer.unref();
  }
}
