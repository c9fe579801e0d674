import { streamKey, type StoredEvent } from '@eventflow/core';
import type { EventStore } from '../store/store.js';
import type { Interest } from './interest.js';
import type { Peer } from './peer.js';

interface WaitRef {
  readonly peer: Peer;
  readonly handle: string;
  readonly domain: string;
  readonly pid: string;
  readonly names: ReadonlySet<string>;
  /**
   * Events at or below this position never answer the wait, routed ones included: a domain's pump may hand out a
   * page it read before the wait registered only after it did, and such a page can hold a v4 spoke's outcome that the
   * request's own append positioned ahead of the request (stored before it), which would otherwise answer.
   */
  readonly after: number | undefined;
  /** The event this wait answers (request()): its consume failing fails the wait. */
  readonly request: string | undefined;
  /** When a request()'s wait was registered (ms), for its round trip (metrics). */
  readonly registered: number;
  done: boolean;
}

/** Waits, matched at the gateway by (domain, pid, names); each is answered once, then forgotten. */
export class Waits {
  readonly #store: Pick<EventStore, 'findOutcome'>;
  readonly #interest: Interest;
  /** streamKey(domain, pid) → waits. */
  readonly #byStream = new Map<string, Set<WaitRef>>();
  /**
   * Peer → its open waits by handle: a handle stands for one wait, whatever (domain, pid) it is
   * registered for, so that re-registering a handle replaces its wait instead of adding one that
   * the connection's limit (which counts handles) does not see.
   */
  readonly #byPeer = new Map<Peer, Map<string, WaitRef>>();
  /** Request event id → the waits answering it. */
  readonly #byRequest = new Map<string, Set<WaitRef>>();

  /** A request()'s wait was answered (its outcome, or its consume's failure), `seconds` after its registration. */
  readonly #answered: (domain: string, seconds: number) => void;

  constructor(store: Pick<EventStore, 'findOutcome'>, interest: Interest, answered: (domain: string, seconds: number) => void = () => undefined) {
    this.#store = store;
    this.#interest = interest;
    this.#answered = answered;
  }

  /** Registers a wait; with `after`, only later events answer it, an outcome already stored after it included. */
  async add(peer: Peer, handle: string, domain: string, pid: string, names: string[], after: number | undefined, request?: string): Promise<void> {
    const wait: WaitRef = { peer, handle, domain, pid, names: new Set(names), after, request, registered: request === undefined ? 0 : Date.now(), done: false };
    const key = streamKey(domain, pid);
    // Re-registering a handle replaces its wait, under any (domain, pid); finishing the old one may drop its set.
    const existing = this.#byPeer.get(peer)?.get(handle);
    if (existing) this.#finish(existing);
    let byHandle = this.#byPeer.get(peer);
    if (!byHandle) this.#byPeer.set(peer, (byHandle = new Map()));
    byHandle.set(handle, wait);
    let set = this.#byStream.get(key);
    if (!set) this.#byStream.set(key, (set = new Set()));
    set.add(wait);
    if (request !== undefined) {
      let requested = this.#byRequest.get(request);
      if (!requested) this.#byRequest.set(request, (requested = new Set()));
      requested.add(wait);
    }
    for (const name of names) this.#interest.change(domain, name, +1);
    if (after === undefined) return;
    // Registered first, checked second: an outcome stored in between is seen by one or the other.
    const stored = await this.#store.findOutcome(domain, pid, names, after);
    if (stored && !wait.done) {
      this.#finish(wait, true);
      peer.sendWaited(handle, stored);
    }
  }

  cancel(peer: Peer, handle: string): void {
    const wait = this.#byPeer.get(peer)?.get(handle);
    if (wait) this.#finish(wait);
  }

  /** Cancels the peer's waits whose domain `drop` selects (its rights narrowed); returns their handles. */
  cancelWhere(peer: Peer, drop: (domain: string) => boolean): string[] {
    const cancelled: string[] = [];
    for (const wait of [...(this.#byPeer.get(peer)?.values() ?? [])]) {
      if (!drop(wait.domain)) continue;
      this.#finish(wait);
      cancelled.push(wait.handle);
    }
    return cancelled;
  }

  removePeer(peer: Peer): void {
    for (const wait of [...(this.#byPeer.get(peer)?.values() ?? [])]) this.#finish(wait);
  }

  /** Answers the waits the event finishes (those registered after a position, only with a later event); false when there is none. */
  match(event: StoredEvent): boolean {
    let waited = false;
    for (const wait of this.#byStream.get(streamKey(event.domain, event.pid)) ?? []) {
      if (wait.done || !wait.names.has(event.name) || (wait.after !== undefined && event.position <= wait.after)) continue;
      this.#finish(wait, true);
      wait.peer.sendWaited(wait.handle, event);
      waited = true;
    }
    return waited;
  }

  /**
   * The consume of `eventId` ended failed (thrown, or a dead letter): the waits of requests for it
   * fail now instead of at their timeout. Only waits on this gateway hear of it; elsewhere they keep
   * waiting for an outcome event (v4's semantics).
   */
  consumeFailed(eventId: string, message: string, attempt: number): void {
    for (const wait of [...(this.#byRequest.get(eventId) ?? [])]) {
      this.#finish(wait, true);
      wait.peer.sendWaitFailed?.(wait.handle, wait.domain, `the consumer of event ${eventId} failed: ${message}`, { event: eventId, attempt, error: message });
    }
  }

  /** Waits registered and not answered or cancelled yet. */
  get count(): number {
    let count = 0;
    for (const set of this.#byStream.values()) count += set.size;
    return count;
  }

  /** `answered`: by its outcome or its consume's failure, not cancelled. */
  #finish(wait: WaitRef, answered = false): void {
    if (wait.done) return;
    wait.done = true;
    if (answered && wait.request !== undefined) this.#answered(wait.domain, (Date.now() - wait.registered) / 1000);
    const key = streamKey(wait.domain, wait.pid);
    const set = this.#byStream.get(key);
    set?.delete(wait);
    if (set?.size === 0) this.#byStream.delete(key);
    const byHandle = this.#byPeer.get(wait.peer);
    if (byHandle?.get(wait.handle) === wait) byHandle.delete(wait.handle);
    if (byHandle?.size === 0) this.#byPeer.delete(wait.peer);
    if (wait.request !== undefined) {
      const requested = this.#byRequest.get(wait.request);
      requested?.delete(wait);
      if (requested?.size === 0) this.#byRequest.delete(wait.request);
    }
    for (const name of wait.names) this.#interest.change(wait.domain, name, -1);
  }
}
