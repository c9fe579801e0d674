/**
 * Each consumer group's backlog, delivered from the store's delivery ledger (store/ledger.ts):
 * the events of the group's (domain, name) published after the group was created that have no
 * outcome for it, in position order, whether or not a member was connected when they were
 * published. A pass per group reads them from the lowest position that may still be pending
 * (`scanFrom`) and leases each free one to a member (leases.ts); the claim is a guarded update
 * in the store, so each event goes to one member of the group across all gateways.
 *
 * A pass runs when a member registers, when an event of the group is routed, when a delivery of
 * this gateway ends without an outcome, and when the nearest lease deadline or retry time seen in
 * the store passes (the sweep: one timer, not a poll), which is how the leases of a gateway that
 * died are delivered again by the others, or by itself after a restart.
 */
import type { StoredEvent } from '@eventflow/core';
import type { Logger } from '../log.js';
import { ledgerColumns, type DeliveryLedger, type GroupKey, type GroupRecord } from '../store/ledger.js';
import { groupId, type ConsumerRef, type Consumers } from './consumers.js';
import { ledgerKey, type Leases } from './leases.js';

/** Backlog rows read per page of a pass. */
const PAGE = 256;
/** setTimeout cannot wait longer than 2^31-1 ms. */
const MAX_TIMER = 2 ** 31 - 1;

interface GroupState {
  readonly key: GroupKey;
  readonly record: Promise<GroupRecord>;
  /** createdPosition, once the record is read. */
  created: number | undefined;
  /** The position of the last event of the group routed here. */
  routedUpTo: number;
  /** Every event at or below it has an outcome for the group, or is open on this gateway. */
  scanFrom: number;
  /** A delivery ended below scanFrom during a pass: the next pass starts there. */
  rewind: number | undefined;
  pass: { again: boolean; done: Promise<void> } | undefined;
}

export class Backlog {
  readonly #ledger: () => DeliveryLedger;
  readonly #consumers: Consumers;
  readonly #leases: Leases;
  readonly #log: Logger;
  readonly #groups = new Map<string, GroupState>();
  /** ledgerKey → the member that last had the event: another is preferred for its next delivery. */
  readonly #avoid = new Map<string, ConsumerRef>();
  #sweep: ReturnType<typeof setTimeout> | undefined;
  #sweepAt: number | undefined;
  #stopped = false;

  constructor(ledger: () => DeliveryLedger, consumers: Consumers, leases: Leases, log: Logger) {
    this.#ledger = ledger;
    this.#consumers = consumers;
    this.#leases = leases;
    this.#log = log;
  }

  /** A member registered: its group exists in the store from now on (created at its first registration), and its backlog goes out. */
  async join(consumer: ConsumerRef): Promise<GroupRecord> {
    const state = this.#state({ domain: consumer.domain, name: consumer.name, group: consumer.group });
    const record = await state.record;
    this.#run(state);
    return record;
  }

  /**
   * A routed event (routes come in position order per domain): straight to a member of each group
   * here that is caught up (nothing of its backlog before it is pending here), else through a pass.
   * True when a group here takes it.
   */
  async route(event: StoredEvent): Promise<boolean> {
    const keys = this.#consumers.groupsFor(event.domain, event.name);
    for (const key of keys) {
      const state = this.#state(key);
      const caughtUp = state.created !== undefined && !state.pass && state.rewind === undefined && state.scanFrom >= state.routedUpTo;
      state.routedUpTo = Math.max(state.routedUpTo, event.position);
      if (!caughtUp || this.#stopped) {
        this.#run(state);
        continue;
      }
      const candidates = this.#consumers.candidates(key, event.name, undefined);
      let started = false;
      try {
        started = candidates.length > 0 && (await this.#leases.start(this.#consumers.next(candidates), key, event));
      } catch (error) {
        this.#log.error('could not deliver a routed event', { event: event.id, error });
      }
      if (started) state.scanFrom = Math.max(state.scanFrom, event.position);
      else this.#run(state);
    }
    return keys.length > 0;
  }

  /** A delivery ended without an outcome: the event is pending again for every group state on its ledger. */
  pending(key: GroupKey, event: StoredEvent, avoid: ConsumerRef | undefined, at: number): void {
    const own = this.#groups.get(groupId(key));
    // Due now: straight to another member, without a pass (a burst of expiries must not rescan the backlog for each).
    if (own && at <= Date.now() && !this.#stopped) return void this.#redeliver(own, key, event, avoid, at);
    this.#rewind(key, event, avoid, at);
  }

  async #redeliver(state: GroupState, key: GroupKey, event: StoredEvent, avoid: ConsumerRef | undefined, at: number): Promise<void> {
    try {
      const candidates = this.#consumers.candidates(state.key, event.name, avoid);
      if (candidates.length > 0 && (await this.#leases.start(this.#consumers.next(candidates), state.key, event))) return;
    } catch (error) {
      this.#log.error('could not deliver an event again', { event: event.id, error });
    }
    this.#rewind(key, event, avoid, at);
  }

  /** The event is pending again below scanFrom: the next pass of each group state on its ledger starts there. */
  #rewind(key: GroupKey, event: StoredEvent, avoid: ConsumerRef | undefined, at: number): void {
    if (avoid) this.#avoid.set(ledgerKey(key, event.id), avoid);
    const { gname, grp } = ledgerColumns(key);
    for (const state of this.#groups.values()) {
      const columns = ledgerColumns(state.key);
      if (state.key.domain !== key.domain || columns.gname !== gname || columns.grp !== grp) continue;
      if (state.key.name !== '*' && state.key.name !== event.name) continue;
      state.rewind = Math.min(state.rewind ?? Infinity, event.position - 1);
      if (at <= Date.now()) this.#run(state);
    }
    if (at > Date.now()) this.#arm(at);
  }

  /** Runs every group's pass (a dead letter requeued, a group deleted elsewhere). */
  kick(from?: { key: GroupKey; position: number }): void {
    for (const state of this.#groups.values()) {
      if (from && groupId(from.key) === groupId(state.key)) state.rewind = Math.min(state.rewind ?? Infinity, from.position - 1);
      this.#run(state);
    }
  }

  /** Forgets a deleted group's state here (its members stay registered and recreate it on their next registration). */
  forget(key: GroupKey): void {
    this.#groups.delete(groupId(key));
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#sweep);
  }

  #state(key: GroupKey): GroupState {
    const id = groupId(key);
    let state = this.#groups.get(id);
    if (!state) {
      const record = this.#ledger().ensureGroup(key);
      state = { key, record, created: undefined, routedUpTo: 0, scanFrom: 0, rewind: undefined, pass: undefined };
      const created = state;
      void record.then((group) => void (created.created = group.createdPosition), () => undefined);
      this.#groups.set(id, state);
      // A failed creation is tried again by the next registration.
      record.catch(() => this.#groups.get(id) === state && this.#groups.delete(id));
    }
    return state;
  }

  /** Runs the group's pass; one at a time per group, a request meanwhile asks for one more. */
  #run(state: GroupState): void {
    if (this.#stopped) return;
    if (state.pass) {
      state.pass.again = true;
      return;
    }
    const pass = { again: true, done: Promise.resolve() };
    state.pass = pass;
    pass.done = (async () => {
      try {
        while (pass.again && !this.#stopped) {
          pass.again = false;
          await this.#pass(state);
        }
      } catch (error) {
        this.#log.error('consumer group backlog pass failed', { domain: state.key.domain, name: state.key.name, group: state.key.group, error });
        // Tried again at the next trigger, or by the sweep.
        this.#arm(Date.now() + this.#leases.leaseMs);
      } finally {
        state.pass = undefined;
      }
    })();
  }

  async #pass(state: GroupState): Promise<void> {
    const record = await state.record;
    if (!this.#consumers.hasMembers(state.key)) return;
    let cursor = Math.max(record.createdPosition, Math.min(state.scanFrom, state.rewind ?? Infinity));
    state.rewind = undefined;
    let hold: number | undefined;
    for (;;) {
      const page = await this.#ledger().unsettled(record, cursor, PAGE);
      for (const row of page) {
        if (this.#stopped) return;
        const { event } = row;
        cursor = event.position;
        if (row.foreign || this.#leases.isOpen(state.key, event.id)) continue;
        const now = Date.now();
        const busyUntil = Math.max(row.deadline ?? 0, row.availableAt ?? 0);
        if (busyUntil > now) {
          // Leased by another gateway (or by this one before a restart), or waiting for its retry delay.
          hold ??= event.position - 1;
          this.#arm(busyUntil);
          continue;
        }
        if (row.attempts >= this.#leases.maxAttempts) {
          await this.#leases.deadLetter(state.key, event, row.attempts, row.lastError ?? 'lease expired', undefined);
          continue;
        }
        const avoidKey = ledgerKey(state.key, event.id);
        const candidates = this.#consumers.candidates(state.key, event.name, this.#avoid.get(avoidKey));
        if (candidates.length === 0) {
          hold ??= event.position - 1;
          continue;
        }
        this.#avoid.delete(avoidKey);
        if (!(await this.#leases.start(this.#consumers.next(candidates), state.key, event))) {
          // Another gateway took it: it comes back here only if that lease runs out.
          hold ??= event.position - 1;
          this.#arm(now + this.#leases.leaseMs);
        }
      }
      if (page.length < PAGE) break;
    }
    state.scanFrom = Math.min(hold ?? cursor, state.rewind ?? Infinity);
  }

  /** The sweep: one timer on the nearest time a held event may become free; it runs every group's pass. */
  #arm(at: number): void {
    if (this.#stopped || (this.#sweepAt !== undefined && this.#sweepAt <= at)) return;
    clearTimeout(this.#sweep);
    this.#sweepAt = at;
    // A few ms late, so that the deadline has passed on every clock reading of the pass.
    this.#sweep = setTimeout(() => {
      this.#sweep = undefined;
      this.#sweepAt = undefined;
      this.kick();
    }, Math.min(MAX_TIMER, Math.max(0, at - Date.now()) + 5));
    this.#sweep.unref();
  }
}
