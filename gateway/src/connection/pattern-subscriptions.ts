/**
 * A connection's pattern subscriptions (subscribePattern): their filters and replay states, owned by
 * the Session, which asks this module to add, remove, replay and send. Every pattern subscription
 * starts with a replay from its `after` (or from the head when it has none), so that whatever the
 * shared pattern pump (delivery/patterns.ts) handed out before it joined is read from the store;
 * its live events are parked meanwhile and sent after the replay, without duplicates.
 */
import type { ServerFrame, StoredEvent } from '@eventflow/core';
import { REPLAY_PAGE } from '../defaults.js';
import { patternPredicate, type PatternFilter } from '../delivery/patterns.js';
import type { Replays, SubscriptionState } from './replay.js';

interface PatternSubscription extends SubscriptionState {
  readonly filter: PatternFilter;
  /**
   * The highest position this subscription has read (its replay) or sent: the shared pump may be
   * behind a replay that just caught up, and what it hands out at or below this is not sent again.
   */
  covered: number;
}

export function encodeMatched(event: StoredEvent, handles: string[]): string {
  return JSON.stringify({ type: 'matched', subscriptions: handles, event } satisfies ServerFrame);
}

export interface PatternConnection {
  readonly replays: Replays;
  readonly readPublishedSince: (after: number, limit: number) => Promise<StoredEvent[]>;
  /** Whether an event of `domain` may leave for this connection now (its `subscribe` right, checked per event). */
  mayReceive(domain: string): boolean;
  /** The connection is closing. */
  closing(): boolean;
  sendFrame(frame: string): void;
}

export class PatternSubscriptions {
  readonly #connection: PatternConnection;
  readonly #subscriptions = new Map<string, PatternSubscription>();

  constructor(connection: PatternConnection) {
    this.#connection = connection;
  }

  get size(): number {
    return this.#subscriptions.size;
  }

  has(handle: string): boolean {
    return this.#subscriptions.has(handle);
  }

  handles(): Array<[string, PatternFilter]> {
    return [...this.#subscriptions].map(([handle, { filter }]) => [handle, filter]);
  }

  /** Registers (or replaces) `handle`; returns the replay to start once the result is sent. */
  add(handle: string, filter: PatternFilter, after: number): () => void {
    const { replays } = this.#connection;
    const subscription: PatternSubscription = { parked: replays.begin(), parkedBytes: 0, overflowed: false, filter, covered: after };
    this.#subscriptions.set(handle, subscription);
    const takes = patternPredicate(filter);
    const handles = [handle];
    const gone = (): boolean => this.#connection.closing() || this.#subscriptions.get(handle) !== subscription;
    const source = {
      read: (from: number) => this.#connection.readPublishedSince(from, REPLAY_PAGE),
      // Checked per event: a pattern crosses domains, and the token may subscribe to only some of them.
      frame: (event: StoredEvent) => {
        subscription.covered = Math.max(subscription.covered, event.position);
        return takes(event) && this.#connection.mayReceive(event.domain) ? encodeMatched(event, handles) : undefined;
      },
      context: { subscription: handle, pattern: filter.pattern },
    };
    return () => void replays.runFrom(source, after, subscription, gone);
  }

  remove(handle: string): boolean {
    return this.#subscriptions.delete(handle);
  }

  /**
   * A live event from the pattern pump for `handles`: parked for those replaying, sent for the
   * others, skipped for those that already read past it (in position order, without duplicates).
   */
  send(event: StoredEvent, handles: string[]): void {
    const { replays } = this.#connection;
    const now: string[] = [];
    for (const handle of handles) {
      const subscription = this.#subscriptions.get(handle);
      if (!subscription || event.position <= subscription.covered) continue;
      if (subscription.parked) replays.park(subscription, event, [handle]);
      else {
        subscription.covered = event.position;
        now.push(handle);
      }
    }
    if (now.length > 0) this.#connection.sendFrame(encodeMatched(event, now));
  }
}
