import { streamKey, type StoredEvent } from '@eventflow/core';
import type { Interest } from './interest.js';
import type { Peer } from './peer.js';

/** The peers subscribed to one (domain, name); a peer appears once. */
interface Subscribed {
  readonly domain: string;
  readonly name: string;
  readonly peers: Set<Peer>;
}

/** The subscription index: which connections get an event, by its (domain, name) and `*`. */
export class FanOut {
  readonly #interest: Interest;
  /** streamKey(domain, name) → the peers subscribed. */
  readonly #subscriptions = new Map<string, Subscribed>();

  constructor(interest: Interest) {
    this.#interest = interest;
  }

  subscribe(peer: Peer, domain: string, name: string): void {
    const key = streamKey(domain, name);
    let subscribed = this.#subscriptions.get(key);
    if (!subscribed) this.#subscriptions.set(key, (subscribed = { domain, name, peers: new Set() }));
    if (subscribed.peers.has(peer)) return;
    subscribed.peers.add(peer);
    this.#interest.change(domain, name, +1);
  }

  unsubscribe(peer: Peer, domain: string, name: string): void {
    const key = streamKey(domain, name);
    const subscribed = this.#subscriptions.get(key);
    if (!subscribed?.peers.delete(peer)) return;
    if (subscribed.peers.size === 0) this.#subscriptions.delete(key);
    this.#interest.change(domain, name, -1);
  }

  removePeer(peer: Peer): void {
    for (const { domain, name, peers } of [...this.#subscriptions.values()]) if (peers.has(peer)) this.unsubscribe(peer, domain, name);
  }

  /**
   * Sends the event to every connection subscribed to its name or to `*`; false when there is none.
   * Connections on one key get the same `names` array, one after the other, so that the session
   * encodes the frame once for all of them (connection/encode.ts).
   */
  send(event: StoredEvent): boolean {
    const exact = this.#subscriptions.get(streamKey(event.domain, event.name))?.peers;
    const wildcard = event.name === '*' ? undefined : this.#subscriptions.get(streamKey(event.domain, '*'))?.peers;
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
    for (const subscribed of this.#subscriptions.values()) if (subscribed.domain === domain) for (const peer of subscribed.peers) peers.add(peer);
    for (const peer of peers) peer.sendDeleted(domain, pid, id);
  }

  /** Subscriptions held, one per (connection, domain, name). */
  get count(): number {
    let count = 0;
    for (const { peers } of this.#subscriptions.values()) count += peers.size;
    return count;
  }
}
