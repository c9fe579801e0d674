/**
 * A connection's subscription replays: the published events after a position, read in pages and
 * sent at the client's pace, while live events of the replaying subscriptions are parked (within
 * EVENTFLOW_MAX_PARKED_BYTES) and sent after the replay without duplicates.
 *
 * What a replay may cost: each page waits for a turn of the event loop (read-turns.ts), so other
 * connections are answered between pages; and the rows a replay reads without sending them (a
 * pattern subscription's pages of other domains) are charged to the connection's scan budget
 * (EVENTFLOW_MAX_SCAN_RATE): past it, the connection's replays pause until it is back. Rows that
 * are sent need no budget: the client's pace holds them back (#drained).
 */
import { failSpan, replaySpan } from '../tracing.js';
import type { StoredEvent } from '@eventflow/core';
import type { ConditionLevel } from '../condition-log.js';
import { REPLAY_DRAIN_POLL_MS, REPLAY_PAGE, REPLAY_STALL_MS } from '../defaults.js';
import type { LogFields } from '../log.js';
import type { EventStore } from '../store/store.js';
import { encodeEvent } from './encode.js';
import { TokenBucket } from './limits.js';
import type { ReadTurns } from './read-turns.js';

/** One subscription of a connection, as its Session keeps it. */
export interface SubscriptionState {
  /** While replaying, live events are parked here and sent after the replay, without duplicates. */
  parked: StoredEvent[] | undefined;
  /** What the parked events weigh (their frames' length), also counted in Replays.parkedBytes. */
  parkedBytes: number;
  /**
   * Parking went over EVENTFLOW_MAX_PARKED_BYTES: the parked events were dropped, and so is every
   * live one until the replay has read them from the store (they are stored: nothing is lost).
   */
  overflowed: boolean;
}

/** What a replay needs from its connection (the Session). */
export interface ReplayConnection {
  readonly store: Pick<EventStore, 'readPublishedAfter' | 'readPublishedSince'>;
  readonly maxBufferedBytes: number;
  readonly maxParkedBytes: number;
  /** Rows per second the connection's replays may read without sending them (EVENTFLOW_MAX_SCAN_RATE); 0: no bound. */
  readonly maxScanRate: number;
  /** The gateway's turns for replay reads (read-turns.ts). */
  readonly turns: ReadTurns;
  /** Whose turns they are: the connection, whose read requests take turns too (session.ts), so that it gets one share. */
  readonly owner: object;
  /** Bytes sent and not yet taken by the client. */
  bufferedAmount(): number;
  /** The connection is being closed: nothing more is sent. */
  closing(): boolean;
  sendFrame(frame: string): void;
  close(code: number, reason: string): void;
  note(condition: string, level: ConditionLevel, message: string, fields?: LogFields): void;
}

/** What a replay reads and sends (Replays.runFrom). */
export interface ReplaySource {
  /** A page of events after `after` (REPLAY_PAGE of them unless it is the last). */
  read(after: number): Promise<StoredEvent[]>;
  /** The frame to send for `event`, or undefined when it is not for this subscription. */
  frame(event: StoredEvent): string | undefined;
  /** Named in the log line of a failed replay. */
  context: Record<string, unknown>;
}

export class Replays {
  readonly #connection: ReplayConnection;
  /**
   * Subscriptions whose replay is running (their live events are parked meanwhile). A field, not a
   * getter: the fan-out reads it once per event and connection.
   */
  running = 0;
  #parkedBytes = 0;
  /** Rows read and not sent (EVENTFLOW_MAX_SCAN_RATE); made by the first replay that skips a row. */
  #scanBudget: TokenBucket | undefined;

  constructor(connection: ReplayConnection) {
    this.#connection = connection;
  }

  /** Live events parked by running replays, in bytes (bounded by EVENTFLOW_MAX_PARKED_BYTES). */
  get parkedBytes(): number {
    return this.#parkedBytes;
  }

  /** A subscription about to replay: counted as running from now on, parking its live events. */
  /** Counts a replay as running; returns the subscription's (empty) parking. */
  begin(): StoredEvent[] {
    this.running++;
    return [];
  }

  /** Parks a live event of a replaying subscription, or drops it when parking is over budget (see SubscriptionState.overflowed). */
  park(state: SubscriptionState, event: StoredEvent, names: string[]): void {
    if (state.overflowed || !state.parked) return;
    // The frame fan-out encodes for the other connections anyway (cached): its length is the weight.
    const bytes = encodeEvent(event, names).length;
    if (this.#parkedBytes + bytes <= this.#connection.maxParkedBytes) {
      state.parked.push(event);
      state.parkedBytes += bytes;
      this.#parkedBytes += bytes;
      return;
    }
    this.#unpark(state);
    state.parked = [];
    state.overflowed = true;
    this.#connection.note('parked-overflow', 'info', 'live events parked during a replay exceed EVENTFLOW_MAX_PARKED_BYTES; the replay reads them from the store instead', {
      limit: this.#connection.maxParkedBytes,
    });
  }

  /**
   * Replays (domain, name) after `after` for a subscription made by `begin`, then sends its parked
   * events above the replay's end. `gone`: the subscription was removed or replaced, or may no
   * longer receive: the replay stops.
   */
  run(domain: string, name: string, after: number, state: SubscriptionState, gone: () => boolean): Promise<void> {
    const names = [name];
    const read = (from: number) => this.#connection.store.readPublishedAfter({ domain, name }, from, REPLAY_PAGE);
    return this.runFrom({ read, frame: (event) => encodeEvent(event, names), context: { domain, name } }, after, state, gone);
  }

  /**
   * The replay of any subscription made by `begin`: `read` pages of events after a position,
   * `frame` the frame of one (undefined: not for this subscription, skipped), then the parked
   * events above the replay's end (pattern subscriptions read every domain, delivery/patterns.ts).
   */
  async runFrom(source: ReplaySource, after: number, state: SubscriptionState, gone: () => boolean): Promise<void> {
    const connection = this.#connection;
    let last = after;
    let caughtUp = false;
    // Its span (tracing.ts), when the gateway traces: pages read, events sent, how it ended.
    const span = replaySpan(source.context, after);
    let pages = 0;
    let sent = 0;
    try {
      for (;;) {
        const done = await connection.turns.take(connection.owner);
        let page: StoredEvent[];
        try {
          if (gone()) return;
          page = await source.read(last);
        } finally {
          done();
        }
        let skipped = 0;
        pages++;
        for (const event of page) {
          if (connection.bufferedAmount() > connection.maxBufferedBytes / 4) await this.#drained();
          if (gone()) return;
          const frame = source.frame(event);
          if (frame !== undefined) {
            connection.sendFrame(frame);
            sent++;
          } else skipped++;
          last = event.position;
        }
        if (skipped > 0) await this.#spendScan(skipped);
        if (gone()) return;
        if (page.length === REPLAY_PAGE) continue;
        if (!state.overflowed) {
          caughtUp = true;
          break;
        }
        // Live events were dropped meanwhile: they are stored after `last`, and live events from now on are parked
        // again. Both are read by the next pass (a dropped event was stored before it was handed out).
        state.overflowed = false;
      }
    } catch (error) {
      if (span) failSpan(span, error);
      // Sending live events now would leave a gap; the client resumes from its position instead.
      connection.note('replay failed', 'error', 'subscription replay failed; closing so that the client resumes', { ...source.context, error });
      connection.close(1011, 'replay failed');
      return;
    } finally {
      this.running--;
      if (!caughtUp) this.#unpark(state);
      span?.setAttributes({ 'eventflow.replay.pages': pages, 'eventflow.replay.events': sent, 'eventflow.replay.caught_up': caughtUp, 'eventflow.replay.to': last });
      span?.end();
    }
    const parked = state.parked ?? [];
    this.#unpark(state);
    if (gone()) return;
    for (const event of parked) {
      const frame = event.position > last ? source.frame(event) : undefined;
      if (frame !== undefined) connection.sendFrame(frame);
    }
  }

  /**
   * Charges `rows` read and not sent to the connection's scan budget, and waits while it is in debt:
   * the replay goes on at the budget's rate and still completes.
   */
  async #spendScan(rows: number): Promise<void> {
    const rate = this.#connection.maxScanRate;
    if (rate <= 0) return;
    const wait = (this.#scanBudget ??= new TokenBucket(rate)).spend(rows);
    if (wait <= 0) return;
    this.#connection.note('scan budget', 'info', 'replays read more rows without sending them than EVENTFLOW_MAX_SCAN_RATE allows; they go on at that rate', { limit: rate, waitMs: wait });
    await new Promise((resolve) => setTimeout(resolve, wait));
  }

  /** Forgets a subscription's parked events and gives their bytes back to the connection's budget. */
  #unpark(state: SubscriptionState): void {
    this.#parkedBytes -= state.parkedBytes;
    state.parkedBytes = 0;
    state.parked = undefined;
  }

  /**
   * Waits until the client has taken most of what was sent. A replay is written without waiting
   * for the network, so a long one (tens of thousands of events) would otherwise exceed
   * EVENTFLOW_MAX_BUFFERED_BYTES by itself and cut the client off with 4008 mid-resume, over and
   * over; this way it goes at the client's pace. A client that has not taken its backlog within
   * REPLAY_STALL_MS is cut off as too slow (its parked live events would grow meanwhile).
   */
  async #drained(): Promise<void> {
    const connection = this.#connection;
    const started = Date.now();
    while (!connection.closing() && connection.bufferedAmount() > connection.maxBufferedBytes / 4) {
      if (Date.now() - started > REPLAY_STALL_MS) {
        connection.note('slow client', 'warn', 'client too slow during replay; disconnecting', { buffered: connection.bufferedAmount() });
        connection.close(4008, 'client too slow');
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, REPLAY_DRAIN_POLL_MS));
    }
  }
}
