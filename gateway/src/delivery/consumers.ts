import { streamKey } from '@eventflow/core';
import { DEFAULT_GROUP, type GroupKey } from '../store/ledger.js';
import type { Interest } from './interest.js';
import type { Peer } from './peer.js';
import type { RetryPolicy } from './retry-policy.js';

/**
 * A connection's consumer: its handle (chosen by the client), what it consumes, its group ('' =
 * default), and its credit: at most `concurrency` deliveries open at once (`open`, counted by
 * leases.ts), as AMQP's prefetch and JetStream's MaxAckPending bound a consumer.
 */
export interface ConsumerRef {
  readonly peer: Peer;
  readonly handle: string;
  readonly domain: string;
  readonly name: string;
  readonly group: string;
  /** Its credit; a registration of the same handle again may change it. */
  concurrency: number;
  /** What a thrown error leads to (retry-policy.ts); undefined: v4's rule, the event is failed. */
  retry: RetryPolicy | undefined;
  /** Deliveries open to it now. */
  open: number;
}

export interface ConsumerSpec {
  group: string;
  concurrency: number;
  retry: RetryPolicy | undefined;
}

/** A group's identity as a map key. */
export const groupId = (key: GroupKey): string => `${streamKey(key.domain, key.name)}\u0000${key.group}`;

/** A group as messages name it: `jobs › run (group "billing")`, `jobs › run (the default group)`. */
export const describeGroup = ({ domain, name, group }: GroupKey): string => `${domain} › ${name} (${group === DEFAULT_GROUP ? 'the default group' : `group ${JSON.stringify(group)}`})`;

/** The group a consumer is a member of. */
export const groupOf = (consumer: ConsumerRef): GroupKey => ({ domain: consumer.domain, name: consumer.name, group: consumer.group });

/** The consumers registered here, by (domain, name) and group, in registration order. */
export class Consumers {
  readonly #interest: Interest;
  /** streamKey(domain, name) → group → members. */
  readonly #byStream = new Map<string, Map<string, ConsumerRef[]>>();
  /**
   * Peer → handle → its consumer. Looking a handle up among every consumer of the gateway made each
   * registration, removal and closed connection cost as much as all the others' consumers together
   * (a connection may hold EVENTFLOW_MAX_SUBSCRIPTIONS of them, and there may be thousands).
   */
  readonly #byPeer = new Map<Peer, Map<string, ConsumerRef>>();
  #count = 0;

  constructor(interest: Interest) {
    this.#interest = interest;
  }

  /** Registers a member. The peer's handle registered again for the same group keeps its deliveries and takes the new limits. */
  add(peer: Peer, handle: string, domain: string, name: string, spec: ConsumerSpec): ConsumerRef {
    const existing = this.find(peer, handle);
    if (existing && existing.domain === domain && existing.name === name && existing.group === spec.group) {
      existing.concurrency = spec.concurrency;
      existing.retry = spec.retry;
      return existing;
    }
    if (existing) this.#drop(existing);
    const consumer: ConsumerRef = { peer, handle, domain, name, group: spec.group, concurrency: spec.concurrency, retry: spec.retry, open: 0 };
    const stream = streamKey(domain, name);
    const groups = this.#byStream.get(stream) ?? new Map<string, ConsumerRef[]>();
    this.#byStream.set(stream, groups);
    const list = groups.get(spec.group);
    if (list) list.push(consumer);
    else groups.set(spec.group, [consumer]);
    let own = this.#byPeer.get(peer);
    if (!own) this.#byPeer.set(peer, (own = new Map()));
    own.set(handle, consumer);
    this.#count += 1;
    this.#interest.change(domain, name, +1);
    return consumer;
  }

  /** Unregisters the peer's consumer `handle`; returns it, or undefined when there was none. */
  remove(peer: Peer, handle: string): ConsumerRef | undefined {
    const removed = this.find(peer, handle);
    if (removed) this.#drop(removed);
    return removed;
  }

  /** Unregisters every consumer of the peer; returns them. */
  removePeer(peer: Peer): ConsumerRef[] {
    const gone = this.ofPeer(peer);
    for (const consumer of gone) this.#drop(consumer);
    return gone;
  }

  /** The peer's consumers. */
  ofPeer(peer: Peer): ConsumerRef[] {
    return [...(this.#byPeer.get(peer)?.values() ?? [])];
  }

  #drop(consumer: ConsumerRef): void {
    const stream = streamKey(consumer.domain, consumer.name);
    const groups = this.#byStream.get(stream);
    const list = groups?.get(consumer.group);
    const index = list?.indexOf(consumer) ?? -1;
    if (!groups || !list || index < 0) return;
    list.splice(index, 1);
    const own = this.#byPeer.get(consumer.peer);
    if (own?.get(consumer.handle) === consumer) own.delete(consumer.handle);
    if (own?.size === 0) this.#byPeer.delete(consumer.peer);
    if (list.length === 0) groups.delete(consumer.group);
    if (groups.size === 0) this.#byStream.delete(stream);
    this.#count -= 1;
    this.#interest.change(consumer.domain, consumer.name, -1);
  }

  find(peer: Peer, handle: string): ConsumerRef | undefined {
    return this.#byPeer.get(peer)?.get(handle);
  }

  /** The members of `group` registered here. */
  members(group: GroupKey): readonly ConsumerRef[] {
    return this.#byStream.get(streamKey(group.domain, group.name))?.get(group.group) ?? [];
  }

  /** The groups with a member here whose events include those named `eventName` of `domain`. */
  groupsFor(domain: string, eventName: string): GroupKey[] {
    const keys: GroupKey[] = [];
    for (const name of eventName === '*' ? [eventName] : [eventName, '*']) {
      for (const group of this.#byStream.get(streamKey(domain, name))?.keys() ?? []) keys.push({ domain, name, group });
    }
    return keys;
  }

  /** Every consumer registered here. */
  all(): ConsumerRef[] {
    return [...this.#byStream.values()].flatMap((groups) => [...groups.values()].flat());
  }

  /** Consumers registered, one per (connection, handle). */
  get count(): number {
    return this.#count;
  }
}

/** The default groups of (domain, name) and (domain, `*`) are one ledger: its key (a named group's is its own). */
export const ledgerId = (key: GroupKey): string => groupId(key.group === DEFAULT_GROUP ? { domain: key.domain, name: '*', group: DEFAULT_GROUP } : key);
