import { streamKey } from '@eventflow/core';
import { DEFAULT_GROUP, type GroupKey } from '../store/ledger.js';
import type { Interest } from './interest.js';
import type { Peer } from './peer.js';

/** A connection's consumer: its handle (chosen by the client), what it consumes, and its group ('' = default). */
export interface ConsumerRef {
  readonly peer: Peer;
  readonly handle: string;
  readonly domain: string;
  readonly name: string;
  readonly group: string;
}

/** A group's identity as a map key. */
export const groupId = (key: GroupKey): string => `${streamKey(key.domain, key.name)}\u0000${key.group}`;

/** The consumers registered here, by (domain, name), in registration order (taken in turn). */
export class Consumers {
  readonly #interest: Interest;
  /** streamKey(domain, name) → consumers. */
  readonly #byStream = new Map<string, ConsumerRef[]>();
  #rotation = 0;

  constructor(interest: Interest) {
    this.#interest = interest;
  }

  add(peer: Peer, handle: string, domain: string, name: string, group: string = DEFAULT_GROUP): ConsumerRef {
    const key = streamKey(domain, name);
    const list = this.#byStream.get(key) ?? [];
    const existing = list.find((consumer) => consumer.peer === peer && consumer.handle === handle);
    if (existing) return existing;
    const consumer: ConsumerRef = { peer, handle, domain, name, group };
    list.push(consumer);
    this.#byStream.set(key, list);
    this.#interest.change(domain, name, +1);
    return consumer;
  }

  /** Unregisters the peer's consumer `handle`; returns it, or undefined when there was none. */
  remove(peer: Peer, handle: string): ConsumerRef | undefined {
    for (const [key, list] of this.#byStream) {
      const index = list.findIndex((consumer) => consumer.peer === peer && consumer.handle === handle);
      if (index < 0) continue;
      const [removed] = list.splice(index, 1);
      if (list.length === 0) this.#byStream.delete(key);
      if (removed) this.#interest.change(removed.domain, removed.name, -1);
      return removed;
    }
    return undefined;
  }

  removePeer(peer: Peer): void {
    for (const [key, list] of this.#byStream) {
      const kept = list.filter((consumer) => consumer.peer !== peer);
      for (const gone of list.filter((consumer) => consumer.peer === peer)) this.#interest.change(gone.domain, gone.name, -1);
      if (kept.length === 0) this.#byStream.delete(key);
      else this.#byStream.set(key, kept);
    }
  }

  find(peer: Peer, handle: string): ConsumerRef | undefined {
    return [...this.#byStream.values()].flat().find((candidate) => candidate.peer === peer && candidate.handle === handle);
  }

  /** Whether `consumer` is still registered (not removed, and its connection not gone). */
  has(consumer: ConsumerRef): boolean {
    return this.#byStream.get(streamKey(consumer.domain, consumer.name))?.includes(consumer) ?? false;
  }

  /**
   * Who of `group` may take an event named `eventName`: others than `exclude` when there are any;
   * empty when nobody here is a member. The default groups of the name and of `*` are one ledger,
   * so their members compete; a named group is its (domain, name, group) alone.
   */
  candidates(group: GroupKey, eventName: string, exclude: ConsumerRef | undefined): ConsumerRef[] {
    const inGroup = (list: ConsumerRef[] | undefined): ConsumerRef[] => (list ?? []).filter((consumer) => consumer.group === group.group);
    const candidates =
      group.group === DEFAULT_GROUP
        ? [...inGroup(this.#byStream.get(streamKey(group.domain, eventName))), ...(eventName === '*' ? [] : inGroup(this.#byStream.get(streamKey(group.domain, '*'))))]
        : inGroup(this.#byStream.get(streamKey(group.domain, group.name)));
    if (!exclude || candidates.length === 0) return candidates;
    const others = candidates.filter((consumer) => consumer !== exclude);
    return others.length > 0 ? others : candidates;
  }

  /** The groups with a member here whose events include those named `eventName` of `domain`. */
  groupsFor(domain: string, eventName: string): GroupKey[] {
    const keys = new Map<string, GroupKey>();
    for (const name of eventName === '*' ? [eventName] : [eventName, '*']) {
      for (const consumer of this.#byStream.get(streamKey(domain, name)) ?? []) {
        const key = { domain, name, group: consumer.group };
        keys.set(groupId(key), key);
      }
    }
    return [...keys.values()];
  }

  /** Whether `group` has a member here. */
  hasMembers(group: GroupKey): boolean {
    return (this.#byStream.get(streamKey(group.domain, group.name)) ?? []).some((consumer) => consumer.group === group.group);
  }

  /** Every consumer registered here. */
  all(): ConsumerRef[] {
    return [...this.#byStream.values()].flat();
  }

  /** The next of `candidates` in turn (non-empty). */
  next(candidates: ConsumerRef[]): ConsumerRef {
    return candidates[this.#rotation++ % candidates.length] as ConsumerRef;
  }

  /** Consumers registered, one per (connection, handle). */
  get count(): number {
    let count = 0;
    for (const list of this.#byStream.values()) count += list.length;
    return count;
  }
}
