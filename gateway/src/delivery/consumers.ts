import { streamKey } from '@eventflow/core';
import type { Interest } from './interest.js';
import type { Peer } from './peer.js';

/** A connection's consumer: its handle (chosen by the client) and what it consumes. */
export interface ConsumerRef {
  readonly peer: Peer;
  readonly handle: string;
  readonly domain: string;
  readonly name: string;
}

/** The consumers registered here, by (domain, name), in registration order (taken in turn). */
export class Consumers {
  readonly #interest: Interest;
  /** streamKey(domain, name) → consumers. */
  readonly #byStream = new Map<string, ConsumerRef[]>();
  #rotation = 0;

  constructor(interest: Interest) {
    this.#interest = interest;
  }

  add(peer: Peer, handle: string, domain: string, name: string): void {
    const key = streamKey(domain, name);
    const list = this.#byStream.get(key) ?? [];
    if (list.some((consumer) => consumer.peer === peer && consumer.handle === handle)) return;
    list.push({ peer, handle, domain, name });
    this.#byStream.set(key, list);
    this.#interest.change(domain, name, +1);
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

  /** Who may take an event of (domain, name): others than `exclude` when there are any; empty when nobody here consumes it. */
  candidates(domain: string, name: string, exclude: ConsumerRef | undefined): ConsumerRef[] {
    const exact = this.#byStream.get(streamKey(domain, name)) ?? [];
    const wildcard = name === '*' ? [] : (this.#byStream.get(streamKey(domain, '*')) ?? []);
    const candidates = wildcard.length === 0 ? exact : [...exact, ...wildcard];
    if (!exclude || candidates.length === 0) return candidates;
    const others = candidates.filter((consumer) => consumer !== exclude);
    return others.length > 0 ? others : candidates;
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
