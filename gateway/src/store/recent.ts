/**
 * The published events this store just committed, kept so that the reads right after them (the
 * dispatcher's read-back of every batch, a replay catching up) are answered from memory instead of
 * a query and a JSON.parse per row: at tens of thousands of publishes a second that read-back was
 * a tenth of the gateway's CPU on SQLite, and on MySQL a round trip of every batch (two of a
 * request()'s ~14, bench/README.md › work, nineteenth session).
 *
 * The window (from, to] is complete: it holds every published, fired event at those positions.
 *
 * SQLite: each batch reads SQLite's `data_version` (which changes when ANOTHER connection commits)
 * inside its write transaction, and extends the window when no other connection has committed since
 * the last one (the head is then the window's end); otherwise the window starts again at the batch,
 * from the head read from the database. A read, and the head itself (`headAt`), are served from
 * it only while data_version is unchanged, so whatever anyone else wrote or deleted since is read
 * from the database as before. A `PRAGMA data_version` costs a third of the head's query with it
 * (12 against 16 µs a call in a request's round trip, where the store asked four times),
 * bench/README.md › work, tenth session.
 *
 * MySQL: other gateways and v4 spokes write to the same tables, and nothing in memory tells the head.
 * A batch's positions are taken under the sequence lock, so a batch whose head before (`before`) is
 * the window's end extends it: nobody positioned an event in between. Only a reader that names the
 * position it needs (`readThrough`: the dispatcher, told of a batch's newest event) is served from
 * memory, and only while the window reaches that position; the head and every other read go to the
 * database. Not used where v4 spokes may write (their events get positions outside any batch).
 *
 * This store's own changes of stored events (a deletion, which also clears the `rid` of referrers;
 * a scheduled event firing) empty the window.
 */
import type { Position, StoredEvent } from '@eventflow/core';
import type { EventFilter } from './store.js';

/** Events kept at most: a few group commits' worth, which the dispatcher reads right after each commit. */
export const RECENT_EVENTS = 4096;

export class RecentPublished {
  readonly #capacity: number;
  /** Every published event at a position in (#from, #to] is in #events, in position order. */
  #from = 0;
  #to = -1;
  /** SQLite's data_version when the window was last extended. */
  #version = -1;
  #events: StoredEvent[] = [];

  constructor(capacity = RECENT_EVENTS) {
    this.#capacity = capacity;
  }

  /**
   * A batch committed: the head was `before` when it started and `after` at its commit, `version`
   * the data_version read in its transaction (MySQL: 0); `published` are its new published, fired events.
   */
  committed(before: Position, after: Position, version: number, published: readonly StoredEvent[]): void {
    if (before !== this.#to || version !== this.#version) {
      this.#from = before;
      this.#events = [];
    }
    this.#to = after;
    this.#version = version;
    for (const event of published) this.#events.push(event);
    const excess = this.#events.length - this.#capacity;
    if (excess > 0) {
      // Everything up to the last one dropped is no longer known.
      this.#from = (this.#events[excess - 1] as StoredEvent).position;
      this.#events = this.#events.slice(excess);
    }
  }

  /** This connection changed stored events (a deletion, a scheduled event fired): nothing is known any more. */
  forget(): void {
    this.#from = 0;
    this.#to = -1;
    this.#version = -1;
    this.#events = [];
  }

  /**
   * The head, from memory: the window's end while `version` (the store's data_version, read just
   * now) is the one of its last batch, since every change of the head by this connection goes
   * through `committed` or `forget`; undefined otherwise.
   */
  headAt(version: number): Position | undefined {
    return this.#to >= 0 && version === this.#version ? this.#to : undefined;
  }

  /**
   * readPublishedAfter / readPublishedSince (filter undefined: every domain) from memory, or
   * undefined when the window does not cover it: `head` and `version` are the store's, read just now.
   */
  read(filter: EventFilter | undefined, after: Position, limit: number, head: Position, version: number): StoredEvent[] | undefined {
    if (head !== this.#to || version !== this.#version || after < this.#from) return undefined;
    return this.#find(filter, after, limit);
  }

  /**
   * readPublishedAfter from memory for a reader that needs every event through `upTo` (and takes
   * any later one the window has), or undefined when the window does not cover (after, upTo].
   */
  readThrough(filter: EventFilter, after: Position, limit: number, upTo: Position): StoredEvent[] | undefined {
    if (this.#to < 0 || after < this.#from || upTo > this.#to) return undefined;
    return this.#find(filter, after, limit);
  }

  #find(filter: EventFilter | undefined, after: Position, limit: number): StoredEvent[] {
    const events = this.#events;
    const found: StoredEvent[] = [];
    for (let i = firstAfter(events, after); i < events.length && found.length < limit; i++) {
      const event = events[i] as StoredEvent;
      if (filter === undefined || (event.domain === filter.domain && (filter.name === '*' || event.name === filter.name))) found.push(event);
    }
    return found;
  }
}

/** The index of the first event whose position is above `after`. */
function firstAfter(events: readonly StoredEvent[], after: Position): number {
  let low = 0;
  let high = events.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((events[middle] as StoredEvent).position <= after) low = middle + 1;
    else high = middle;
  }
  return low;
}
