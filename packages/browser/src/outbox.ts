/**
 * The durable outbox (`@eventflow/browser/outbox`): `publish` and `schedule` go to IndexedDB first
 * and are sent in order, with their ids, whenever a connection is open, so a write made offline
 * survives reloads and browser restarts and a resend never stores twice. One tab of the origin
 * sends (it holds a Web Lock); all tabs see the entries and their outcomes (BroadcastChannel).
 * Pending publishes are applied on top of confirmed states (`overlay`) until the eventlog shows
 * them, or rolled back when the gateway refuses them.
 */
import { EventflowError, applyEvent, closedError, assertNumber, assertOptionalFunction, isEventflowError, notify, writeParams, type Params, type State, type StoredEvent } from '@eventflow/core';
import { openChannel, type Channel } from './broadcast.js';
import { keyOf, serial } from './eventlog-view.js';
import { openOutboxStore } from './outbox-store.js';
import type { Outbox, OutboxEngine, OutboxEntry, OutboxHost, OutboxPlugin, OutboxPublishOptions, OutboxRejection } from './outbox-types.js';

export type { Outbox, OutboxEntry, OutboxPlugin, OutboxPublishOptions, OutboxRejection } from './outbox-types.js';
export { OUTBOX_VERSION } from './outbox-store.js';

/** 5 MB of queued event JSON: thousands of typical writes, and far below any browser's quota. */
const maxBytes = 5_000_000;
/**
 * 24 hours. Zero rejects offline writes after 5 minutes; a field worker offline for a shift
 * must not lose the shift's records, and `expectedVersion` (checked when the entry is sent)
 * guards writes that depend on what others did meanwhile.
 */
const maxAge = 86_400_000;
/** Delay before sending again after a failure that may pass (timeout, rate limit, store down). */
const retryDelay = 1_000;

/** The defaults of OutboxOptions (the outbox reads the constants: a bundle leaves this object out). */
export const OUTBOX_DEFAULTS = { maxBytes, maxAge, retryDelay } as const;

export interface OutboxOptions {
  /** Budget of queued event JSON in bytes (default 5 MB); beyond it publish fails with E_EVENTFLOW_OUTBOX_FULL. */
  maxBytes?: number;
  /** Entries older than this (ms, default 24 h) are rejected with E_EVENTFLOW_OUTBOX_EXPIRED instead of sent. */
  maxAge?: number;
  /** Called with every rejection (in every tab that shows the entry). */
  onRejected?: (rejection: OutboxRejection) => void;
}

type Message =
  /** Entries were added or dropped: read them again. */
  | { type: 'changed' }
  /** The sender settled `entry`: stored at `position`, or refused with `error`. */
  | { type: 'settled'; entry: OutboxEntry; position?: number; error?: { code: string; message: string; details?: Record<string, unknown> } };

/**
 * Who a token speaks for: its issuer and subject (`["iss","sub"]`, so a refreshed token of the same
 * user is the same identity), the end of its signature when it has no `sub` (that token alone;
 * unlike the whole token, useless to anyone who reads it), '' without a token. Read, not verified:
 * it only keeps one user's queued writes from being sent under another's token.
 */
export function identityOf(token: string | undefined): string {
  try {
    const { iss, sub } = JSON.parse(atob(token!.split('.')[1]!.replace(/-/g, '+').replace(/_/g, '/'))) as { iss?: unknown; sub?: unknown };
    if (typeof sub == 'string') return JSON.stringify([iss, sub]);
  } catch {
    // no token, or not a JWT
  }
  return token ? `#${token.slice(-16)}` : '';
}

/**
 * Failures that say nothing about the entry: it stays queued and is sent again. Any other code is
 * the gateway refusing this write (conflict, rights, validation, duplicate id), for good.
 */
const transient = /_(REQUEST_TIMEOUT|CONNECTION_FAILED|OFFLINE|CLIENT_CLOSED|ABORTED|LIMIT_EXCEEDED|RATE_LIMITED|STORE_FAILED|INTERNAL|UNAUTHORIZED)$/;

/** An outbox for `createBrowserClient(url, { outbox: createOutbox() })`. */
export function createOutbox(options: OutboxOptions = {}): OutboxPlugin {
  assertNumber(options.maxBytes, 'outbox.maxBytes', true, 1);
  assertNumber(options.maxAge, 'outbox.maxAge', true, 1);
  assertOptionalFunction(options.onRejected, 'outbox.onRejected');
  return { attach: (host) => new DurableOutbox(host, options) };
}

const sameEventlog = (entry: OutboxEntry, domain: string, pid: string): boolean => entry.event.domain === domain && entry.event.pid === pid;

class DurableOutbox implements OutboxEngine {
  readonly #host: OutboxHost;
  readonly #maxBytes: number;
  readonly #maxAge: number;
  readonly #onRejected: ((rejection: OutboxRejection) => void) | undefined;
  /** Undefined without IndexedDB: the entries live in `entries` only, for the page's life. */
  readonly #store;
  /** The next `seq` without IndexedDB. */
  #seq = 0;
  readonly #channel: Channel<Message> | undefined;
  readonly #listeners = new Set<() => void>();
  /** Callers of `publish(…, { ack: true })`, by event id. */
  readonly #waiting = new Map<string, [(id: string) => void, (error: unknown) => void]>();
  /** Entries stored by the gateway whose eventlog views may not show them yet. */
  #acked: OutboxEntry[] = [];
  /** Positions of queued or acked entries' events seen stored (acks, live events, fetches). */
  readonly #positions = new Map<string, number>();
  /** `seq`s settled or dropped here: a read of IndexedDB that overlapped their deletion does not bring them back. */
  readonly #gone = new Set<number>();
  readonly #lock = new AbortController();
  #release: (() => void) | undefined;
  #sender = false;
  #closed = false;
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** The identity of the client's token: only its entries are shown, counted and sent. */
  #identity = '';
  /** Aborted when the connection a send runs on goes away, so that no send goes out again on the next one (another token's). */
  #run: AbortController | undefined;
  entries: readonly OutboxEntry[] = [];
  rejections: readonly OutboxRejection[] = [];
  readonly loaded: Promise<void>;

  constructor(host: OutboxHost, options: OutboxOptions) {
    this.#host = host;
    this.#maxBytes = options.maxBytes ?? maxBytes;
    this.#maxAge = options.maxAge ?? maxAge;
    this.#onRejected = options.onRejected;
    // The name of its database, channel and lock.
    const name = `eventflow-outbox:${host.name}`;
    this.#store = openOutboxStore(name);
    this.#channel = openChannel<Message>(name, (data) =>
      data.type === 'changed' ? void this.#load() : this.#mine(data.entry) && this.#settled(data.entry, data.position, data.error && new EventflowError(data.error.code as EventflowError['code'], data.error.message, data.error)),
    );
    this.loaded = this.#load();
    // Each connection may carry another token: the entries are read again for its identity.
    host.client.onStateChange((state) => void (state === 'open' ? this.#load() : this.#run?.abort()));
    // One sender per origin: the tab holding the lock, until it closes. Without Web Locks every
    // tab sends; that stays correct (ids make resends idempotent, each tab sends in order).
    const locks = globalThis.navigator?.locks;
    if (!locks) this.#lead();
    else {
      locks
        .request(name, { signal: this.#lock.signal }, () => {
          if (this.#closed) return undefined;
          this.#lead();
          return new Promise<void>((resolve) => (this.#release = resolve));
        })
        .catch((error: unknown) => this.#closed || host.report(error));
    }
  }

  #lead(): void {
    this.#sender = true;
    void this.#kick();
  }

  // ── queuing ─────────────────────────────────────────────────────────────────────────────

  async enqueue(op: OutboxEntry['op'], input: unknown, options: OutboxPublishOptions = {}, date?: unknown): Promise<string> {
    if (this.#closed) throw closedError();
    const { event, expectedVersion, at } = writeParams(op, input, options, date);
    const bytes = JSON.stringify(event).length;
    await this.loaded; // entries of earlier pages count against the budget
    const used = this.entries.reduce((sum, entry) => sum + entry.bytes, 0);
    if (used + bytes > this.#maxBytes) {
      throw new EventflowError('E_EVENTFLOW_OUTBOX_FULL', `outbox full (${used} of ${this.#maxBytes} B): ${event.id} not queued; let it drain or raise maxBytes`, {
        details: { maxBytes: this.#maxBytes, used, bytes },
      });
    }
    const entry = { id: event.id, op, event, expectedVersion, at, queued: Date.now(), bytes, identity: this.#identity };
    const seq = (await this.#store?.add(entry)) ?? ++this.#seq;
    // Before anything can send it: no tab knows of the entry before `changed` (or a read of the committed store, a task later).
    const acked = options.ack ? new Promise<string>((resolve, reject) => this.#waiting.set(event.id, [resolve, reject])) : undefined;
    this.#update([...this.entries, { ...entry, seq }], [entry]);
    this.#channel?.post({ type: 'changed' });
    void this.#kick();
    // Closed while it was being stored: close() rejected the waiters it had, not this one, which nothing would settle.
    if (this.#closed) this.close();
    return acked ?? event.id;
  }

  async drop(id: string): Promise<boolean> {
    const entry = this.entries.find((queued) => queued.id === id);
    if (!entry) return false;
    this.#gone.add(entry.seq);
    await this.#store?.delete(entry.seq);
    this.#update(this.entries.filter((queued) => queued !== entry), [entry]);
    this.#waiting.get(id)?.[1](new EventflowError('E_EVENTFLOW_ABORTED', `${id} was dropped from the outbox`));
    this.#waiting.delete(id);
    this.#channel?.post({ type: 'changed' });
    return true;
  }

  dismiss(id?: string): void {
    this.rejections = id === undefined ? [] : this.rejections.filter((rejection) => rejection.entry.id !== id);
    this.#notify();
  }

  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  // ── optimistic state ────────────────────────────────────────────────────────────────────

  overlay(domain: string, pid: string, state: State, position: number): [State, readonly OutboxEntry[]] {
    // Its event is seen stored at or below `position` (an unknown position compares false).
    const shown = (entry: OutboxEntry): boolean => (this.#positions.get(entry.id) ?? Infinity) <= position;
    // An acked entry leaves the overlay only once the confirmed state holds it: no frame without it.
    this.#acked = this.#acked.filter((entry) => !(sameEventlog(entry, domain, pid) && shown(entry)));
    const pending = [...this.#acked, ...this.entries].filter((entry) => entry.op === 'publish' && sameEventlog(entry, domain, pid) && !shown(entry));
    return [pending.reduce<State>((folded, entry) => applyEvent(folded, { data: entry.event.data }), state), pending];
  }

  /** An event seen stored (live, fetched): the entry with its id is confirmed at its position. */
  seen(event: StoredEvent): void {
    if ([...this.entries, ...this.#acked].some((entry) => entry.id === event.id)) this.#positions.set(event.id, event.position);
  }

  // ── sending ─────────────────────────────────────────────────────────────────────────────

  /** Sends what is queued, oldest first, while this tab is the sender and connected (one run at a time). */
  readonly #kick = serial(() => this.#sendAll());

  async #sendAll(): Promise<void> {
    const { client, token } = this.#host;
    const { signal } = (this.#run = new AbortController());
    // Sent only on a connection with the token of the identity that queued them (#load follows a change).
    if (identityOf(await token()) !== this.#identity) return void this.#load();
    for (let entry = this.entries[0]; entry && this.#sender && !this.#closed && client.state === 'open' && !signal.aborted; entry = this.entries[0]) {
      // Its outcome: stored at `position`, or refused for good with `failure`.
      let position: number | undefined;
      let failure: EventflowError | undefined;
      if (Date.now() - entry.queued > this.#maxAge) {
        failure = new EventflowError('E_EVENTFLOW_OUTBOX_EXPIRED', `${entry.id} expired in the outbox (maxAge ${this.#maxAge} ms): publish it again if need be`, { details: { maxAge: this.#maxAge, queued: entry.queued } });
      } else {
        try {
          const { op, event, at, expectedVersion } = entry;
          // One frame for both: `at` is undefined for a publish, `expectedVersion` for a schedule, and JSON leaves out undefined.
          position = (await client.call(op, { event, expectedVersion, at } as Params<'schedule'>, { signal })).position;
        } catch (error) {
          if (!isEventflowError(error) || transient.test(error.code)) {
            clearTimeout(this.#retry);
            if (!this.#closed) this.#retry = setTimeout(this.#kick, retryDelay);
            return;
          }
          failure = error;
        }
      }
      await this.#settle(entry, position, failure);
    }
  }

  /** Removes a sent (or expired) entry for every tab and records its outcome. */
  async #settle(entry: OutboxEntry, position?: number, error?: EventflowError): Promise<void> {
    this.#gone.add(entry.seq);
    // Failing, it is sent again by the next sender, which its id makes harmless.
    await this.#store?.delete(entry.seq).catch(this.#host.report);
    // An error's own fields (name, code, details) and its message, which is not one: a
    // BroadcastChannel would clone an EventflowError as a plain Error, without its code.
    this.#channel?.post({ type: 'settled', entry, position, error: error && { ...error, message: error.message } });
    this.#settled(entry, position, error);
  }

  #settled(entry: OutboxEntry, position: number | undefined, error: EventflowError | undefined): void {
    this.#gone.add(entry.seq);
    const waiting = this.#waiting.get(entry.id);
    this.#waiting.delete(entry.id);
    if (error) {
      const rejection = { entry, error };
      this.rejections = [...this.rejections, rejection].slice(-50);
      waiting?.[1](error);
      try {
        this.#onRejected?.(rejection);
      } catch (thrown) {
        this.#host.report(thrown);
      }
    } else {
      waiting?.[0](entry.id);
      if (entry.op === 'publish' && position !== undefined) {
        this.#positions.set(entry.id, Math.min(position, this.#positions.get(entry.id) ?? position));
        this.#acked = [...this.#acked, entry].slice(-200);
      }
    }
    this.#update(this.entries.filter((queued) => queued.seq !== entry.seq), [entry]);
  }

  // ── tabs and listeners ──────────────────────────────────────────────────────────────────

  /** Whether an entry was queued under the identity of the client's token. */
  #mine(entry: OutboxEntry): boolean {
    return (entry.identity ?? '') === this.#identity;
  }

  /** Reads this identity's entries from IndexedDB (at start, on every connection, and when another tab changed them). */
  async #load(): Promise<void> {
    try {
      const identity = identityOf(await this.#host.token());
      // Another identity's rejections are not this one's to see.
      if (identity !== this.#identity) this.rejections = [];
      this.#identity = identity;
      const stored = ((await this.#store?.all()) ?? this.entries).filter((entry) => !this.#gone.has(entry.seq) && this.#mine(entry));
      this.#update(stored, [...this.entries, ...stored]);
      void this.#kick();
    } catch (error) {
      this.#host.report(error);
    }
  }

  /** Replaces the entries; views of the eventlogs of `touched` are shown again. */
  #update(entries: readonly OutboxEntry[], touched: ReadonlyArray<Pick<OutboxEntry, 'event'>>): void {
    this.entries = entries;
    const live = new Set([...this.entries, ...this.#acked].map((entry) => entry.id));
    for (const id of this.#positions.keys()) if (!live.has(id)) this.#positions.delete(id);
    const keys = new Map(touched.map(({ event }) => [keyOf(event.domain, event.pid), event]));
    for (const { domain, pid } of keys.values()) this.#host.changed(domain, pid);
    this.#notify();
  }

  #notify(): void {
    notify(this.#listeners, undefined, this.#host.report);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#lock.abort();
    this.#release?.();
    this.#channel?.close();
    this.#store?.close();
    // Not cleared: a promise settles once, so a later call (enqueue's, after a close that raced it) rejects only the new.
    for (const [, reject] of this.#waiting.values()) reject(new EventflowError('E_EVENTFLOW_CLIENT_CLOSED', 'client closed before the ack; the entry stays queued'));
  }
}

