/**
 * The backlogs of the consumer groups with members on this gateway (group-backlog.ts: one group's
 * claiming), and what they share: the events routed here lately, kept at hand for their claims.
 */
import type { StoredEvent } from '@eventflow/core';
import type { Logger } from '../log.js';
import { GROUP_POLL_MS } from '../defaults.js';
import { LateClaim, type DeliveryLedger, type GroupKey, type GroupOptions, type GroupRecord } from '../store/ledger.js';
import { groupId, ledgerId, type ConsumerRef, type Consumers } from './consumers.js';
import { GroupBacklog } from './group-backlog.js';
import type { Leases } from './leases.js';

/** Events routed here kept at hand for the claims that follow (not read from the store again). */
const RECENT_EVENTS = 4_096;

/** The backlogs of the groups with members here. */
export class Backlog {
  readonly ledger: () => DeliveryLedger;
  readonly consumers: Consumers;
  readonly leases: Leases;
  readonly #log: Logger;
  /** A claim found a group deleted on another gateway under these members here (Dispatcher#groupDeleted ends them). */
  readonly #deleted: (key: GroupKey, members: readonly ConsumerRef[]) => void;
  readonly #groups = new Map<string, GroupBacklog>();
  readonly #recent = new Map<string, StoredEvent>();
  #stopped = false;
  /** When the last claim failure was logged (one line per GROUP_POLL_MS while the store fails). */
  #loggedAt = 0;

  constructor(ledger: () => DeliveryLedger, consumers: Consumers, leases: Leases, log: Logger, deleted: (key: GroupKey, members: readonly ConsumerRef[]) => void) {
    this.ledger = ledger;
    this.consumers = consumers;
    this.leases = leases;
    this.#log = log;
    this.#deleted = deleted;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** A member registered: its group exists in the store from now on (created at its first registration), and its backlog goes out. */
  join(consumer: ConsumerRef, options: Partial<GroupOptions>): Promise<GroupRecord> {
    return this.#group({ domain: consumer.domain, name: consumer.name, group: consumer.group }).join(options);
  }

  /** An event was routed: each group here that takes it claims (it is in their backlog from now on). True when a group here takes it. */
  route(event: StoredEvent): boolean {
    const keys = this.consumers.groupsFor(event.domain, event.name);
    if (keys.length === 0) return false;
    // Kept at hand for the claims that follow (bounded; a Map iterates oldest first).
    if (this.#recent.size >= RECENT_EVENTS) this.#recent.delete(this.#recent.keys().next().value as string);
    this.#recent.set(event.id, event);
    for (const key of keys) this.#groups.get(groupId(key))?.routed(event);
    return true;
  }

  /** A recently routed event, for a claim (ClaimRequest.known). */
  readonly known = (id: string): StoredEvent | undefined => this.#recent.get(id);

  /** A member's credit came free (`consumer`), and, with `pending`, the events of the key's ledger may hold something claimable. */
  ended(consumer: ConsumerRef | undefined, key: GroupKey, change: 'pending' | 'settled' | 'none', unsettled?: string): void {
    if (consumer && unsettled !== undefined) this.#groups.get(groupId({ domain: consumer.domain, name: consumer.name, group: consumer.group }))?.avoid(unsettled, consumer);
    if (change === 'pending') this.signalLedger(key);
    // An outcome frees the next event of its pid in an ordered group; in others it changes nothing claimable.
    else if (change === 'settled') this.signalLedger(key, (group) => group.ordered);
    if (consumer) this.#groups.get(groupId({ domain: consumer.domain, name: consumer.name, group: consumer.group }))?.wakeSoon();
  }

  /** Every group on the key's ledger looks again (the default groups of a domain share one), or those `only` selects. */
  signalLedger(key: GroupKey, only?: (group: GroupBacklog) => boolean): void {
    const id = ledgerId(key);
    for (const group of this.#groups.values()) if (ledgerId(group.key) === id && (only?.(group) ?? true)) group.signal();
  }

  /**
   * This gateway deleted the group (refused while it had members here): a member registered while the
   * delete was under way records it again at its next claim, as its registration would have after it.
   */
  forget(key: GroupKey): void {
    this.#groups.get(groupId(key))?.forget();
  }

  /** A claim found the group deleted on another gateway: its members here end (a copy: ending them changes the list). */
  deleted(key: GroupKey): void {
    const members = [...this.consumers.members(key)];
    if (members.length === 0) return;
    this.#log.info('consumer group deleted on another gateway; ending its members here', { domain: key.domain, name: key.name, group: key.group, members: members.length });
    this.#deleted(key, members);
  }

  /** A group's members all left: its timer stops. */
  left(key: GroupKey): void {
    if (this.consumers.members(key).length > 0) return;
    this.#groups.get(groupId(key))?.stop();
    this.#groups.delete(groupId(key));
  }

  /** A claim failed (the store), or was rolled back for being late (LateClaim): logged once per GROUP_POLL_MS, and tried again by the group's timer. */
  failed(key: GroupKey, error: unknown): void {
    if (Date.now() - this.#loggedAt < GROUP_POLL_MS) return;
    this.#loggedAt = Date.now();
    const fields = { domain: key.domain, name: key.name, group: key.group, error };
    if (error instanceof LateClaim) this.#log.warn('a claim took longer than its lease in the store (the store or the link to it is slow); rolled back, claiming again', fields);
    else this.#log.error('could not claim events for a consumer group; trying again', fields);
  }

  stop(): void {
    this.#stopped = true;
    for (const group of this.#groups.values()) group.stop();
  }

  #group(key: GroupKey): GroupBacklog {
    const id = groupId(key);
    let group = this.#groups.get(id);
    if (!group) this.#groups.set(id, (group = new GroupBacklog(key, this)));
    return group;
  }
}
