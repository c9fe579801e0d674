/**
 * The browser client: the core client plus a cache in IndexedDB. Reads answer from the cache and
 * fetch only what came after it; watched eventlogs stay live through one `*` subscription per
 * domain and are updated with `applyEvent`; tabs share what they cache over a BroadcastChannel.
 */
import {
  EventflowClient,
  EventflowError,
  applyEvent,
  assertFunction,
  assertIdentifier,
  assertOptionalFunction,
  assertSignal,
  composeEventlogState,
  createAsyncQueue,
  emptyState,
  isEventflowError,
  streamKey,
  webSocketConnector,
  type ClientOptions,
  type Connector,
  type EventMap,
  type EventOf,
  type Params,
  type Position,
  type PublishInput,
  type Result,
  type State,
  type StoredEvent,
} from '@eventflow/core';
import { createCache, type Cache, type Stored, type StreamRecord } from './cache.js';
import { openChannel, type CacheChannel, type CacheMessage } from './broadcast.js';
import type { Outbox, OutboxEngine, OutboxEntry, OutboxPlugin, OutboxPublishOptions } from './outbox-types.js';

export interface BrowserClientOptions extends ClientOptions {
  /** `false`: no IndexedDB cache (reads always fetch; watches still work, in memory). */
  cache?: false | { /** IndexedDB database name (default 'eventflow'). */ name?: string; /** Size budget in bytes (default 50 MB). */ maxBytes?: number };
  /** `createOutbox()` from '@eventflow/browser/outbox': publish and schedule are queued in IndexedDB first, states show them pending. */
  outbox?: OutboxPlugin;
}

/** One eventlog as this client knows it. */
export interface EventlogSnapshot {
  readonly domain: string;
  readonly pid: string;
  /** The composed state (frozen). */
  readonly state: State;
  /** Position of the newest event (0: none). */
  readonly position: number;
  readonly events: readonly StoredEvent[];
  /** True while it may be behind the gateway (offline, or not caught up yet). */
  readonly stale: boolean;
  /** Outbox entries applied on top of the confirmed state, oldest first (none without an outbox). */
  readonly pending: readonly OutboxEntry[];
}

type DomainOf<M extends EventMap> = Extract<keyof M, string>;
type NameOf<M extends EventMap, D extends DomainOf<M>> = Extract<keyof M[D], string>;
const none: readonly OutboxEntry[] = Object.freeze([]);

interface Fetched {
  state: State;
  position: number;
  count: number;
  /** What came after the base (everything when there was no base or it was reset). */
  events: StoredEvent[];
  /** The cached copy disagreed with the gateway (events were deleted) and was dropped. */
  reset: boolean;
}

/** A watcher: its listener and its error callback. */
type Watcher = [(snapshot: EventlogSnapshot) => void, ((error: unknown) => void) | undefined];

/** A watched eventlog, shared by all its watchers. */
interface Watch {
  readonly domain: string;
  readonly pid: string;
  /** Its watchers. */
  readonly listeners: Set<Watcher>;
  /** The latest confirmed snapshot; it always shows all of `log`. */
  snapshot?: EventlogSnapshot;
  /** What its watchers were shown: `snapshot` with the pending outbox entries applied. */
  shown?: EventlogSnapshot;
  log: Log;
  /** The cached copy was read (or found missing). */
  loaded?: boolean;
  /** Caught up on the current connection: live events apply directly. */
  fresh?: boolean;
  /** The next catch-up fetches everything (the eventlog had deletions). */
  reset?: boolean;
  /** Live events received while not fresh, applied after the catch-up. */
  held: StoredEvent[];
  /** Bumped by invalidations: a catch-up that overlapped one is discarded. */
  epoch: number;
  /** Position of the copy this client last stored or loaded. */
  saved: number;
  /** Its listener on the domain's `*` subscription (which the core client shares among listeners). */
  live(event: StoredEvent): void;
  /** Settles once that subscription is registered. */
  ready?: Promise<unknown>;
  refresh(): Promise<void>;
  persist(): Promise<void>;
}

const keyOf = streamKey;

function checkEventlog(domain: unknown, pid: unknown): void {
  assertIdentifier(domain, 'domain');
  assertIdentifier(pid, 'pid');
}

/**
 * The events of a watched eventlog, shared by its snapshots: appended to, never changed, so a
 * snapshot is a prefix of it. The cached part stays unparsed JSON until some snapshot's events
 * are read: a view of the state (what UIs render) never pays for parsing the eventlog.
 */
interface Log {
  /** The cached part, still unread (in IndexedDB's result) until called. */
  cached: (() => StoredEvent[]) | undefined;
  /** The events read (after the cached part until that is read). */
  events: StoredEvent[];
  size: number;
}

const logOf = (cached?: () => StoredEvent[], size = 0): Log => ({ cached, events: [], size });

function eventsOf(log: Log): StoredEvent[] {
  if (log.cached) log.events = log.cached().concat(log.events);
  log.cached = undefined;
  return log.events;
}

/** A snapshot of the first `size` events of `log`, materialised when first read. */
function snapshotOf(domain: string, pid: string, state: State, position: number, stale: boolean, log: Log, pending = none): EventlogSnapshot {
  const { size } = log;
  let events: readonly StoredEvent[] | undefined;
  return {
    domain,
    pid,
    state,
    position,
    stale,
    pending,
    get events() {
      return (events ??= eventsOf(log).slice(0, size));
    },
  };
}

/** Runs `task`; a call during a run makes it run once more afterwards (calls coalesce). */
function serial(task: () => Promise<void>): () => Promise<void> {
  let running = false;
  let again = false;
  return async () => {
    again = true;
    if (running) return;
    running = true;
    try {
      while (again) {
        again = false;
        await task();
      }
    } finally {
      running = false;
    }
  };
}

export class BrowserClient<M extends EventMap = EventMap> extends EventflowClient<M> {
  readonly #cache: Cache | undefined;
  readonly #channel: CacheChannel | undefined;
  readonly #report: (error: unknown) => void;
  readonly #outbox: OutboxEngine | undefined;
  readonly #watches = new Map<string, Watch>();
  /** Bumped by every invalidation: a read that overlapped one does not store its result. */
  #generation = 0;
  /**
   * Settles on the first connection, the first failed attempt, or after 3 s: from then on, reads
   * that find the client offline serve the cache at once.
   */
  readonly #contact: Promise<void>;
  /** Aborted (and replaced) at every change of the connection state. */
  #stateChange = new AbortController();

  constructor(connect: Connector, options: BrowserClientOptions = {}) {
    const report = options.onError ?? ((error) => isEventflowError(error, 'E_EVENTFLOW_CONNECTION_FAILED') || console.error('[eventflow]', error));
    let onError = report;
    super(connect, { ...options, onError: (error) => onError(error) });
    this.#report = report;
    let contact!: () => void;
    this.#contact = new Promise((resolve) => setTimeout((contact = resolve), 3000));
    onError = (error) => {
      if (isEventflowError(error, 'E_EVENTFLOW_CONNECTION_FAILED')) contact();
      // Registrations cut short by close() are no news.
      if (!isEventflowError(error, 'E_EVENTFLOW_CLIENT_CLOSED')) report(error);
    };
    const { cache, outbox } = options;
    const { name = 'eventflow', maxBytes = 50_000_000 } = cache || {};
    if (cache !== false && typeof indexedDB !== 'undefined') {
      this.#cache = createCache(name, maxBytes, report);
      this.#channel = openChannel(name, (message) => this.#receive(message));
    }
    this.#outbox = outbox?.attach({ client: this, name, report, changed: (domain, pid) => this.#show(this.#watches.get(keyOf(domain, pid))) });
    this.onDeleted(({ domain, pid }) => this.#invalidate(keyOf(domain, pid)));
    this.onStateChange((state) => {
      this.#stateChange.abort();
      this.#stateChange = new AbortController();
      contact();
      for (const watch of this.#watches.values()) {
        if (state === 'open') void watch.refresh();
        else {
          watch.held = []; // the catch-up after reconnecting covers them
          this.#markStale(watch);
        }
      }
    });
  }

  // ── the outbox ──────────────────────────────────────────────────────────────────────────

  /** The outbox (`options.outbox`): queued entries, rejections, drop. */
  get outbox(): Outbox | undefined {
    return this.#outbox;
  }

  /** With an outbox: queued in IndexedDB, resolving with the id once queued (once stored with `ack`). */
  override publish<D extends DomainOf<M>, N extends NameOf<M, D>>(event: PublishInput<M, D, N>, options?: OutboxPublishOptions): Promise<string> {
    return this.#outbox ? this.#outbox.enqueue('publish', event, options) : super.publish(event, options);
  }

  /** With an outbox: queued in IndexedDB, as `publish`. */
  override schedule<D extends DomainOf<M>, N extends NameOf<M, D>>(date: Date | number | string, event: PublishInput<M, D, N>, options?: OutboxPublishOptions): Promise<string> {
    return this.#outbox ? this.#outbox.enqueue('schedule', event, options, date) : super.schedule(date, event, options);
  }

  // ── reads ───────────────────────────────────────────────────────────────────────────────

  /** The events of a process: the cached ones plus those stored after them; offline, the cached ones. */
  override async readEventlog<D extends DomainOf<M>>(domain: D, pid: string, { after = -1 }: { after?: Position } = {}): Promise<Array<EventOf<M, D>>> {
    const { events = [] } = await this.#read(domain, pid, true);
    return events.filter((event) => event.position > after) as unknown as Array<EventOf<M, D>>;
  }

  /** The composed state: the cached one brought up to date with `applyEvent`; offline, the cached one. */
  override async readEventlogState(domain: string, pid: string): Promise<State> {
    const { state, position } = await this.#read(domain, pid, false);
    return this.#outbox?.overlay(domain, pid, state, position)[0] ?? state;
  }

  /** What the cache holds, without the network (`stale` unless a live watch keeps it current). */
  async readCached(domain: string, pid: string): Promise<EventlogSnapshot | undefined> {
    checkEventlog(domain, pid);
    const watched = this.#watches.get(keyOf(domain, pid))?.shown;
    if (watched) return watched;
    const cached = await this.#cached(domain, pid);
    return cached && this.#overlay(snapshotOf(domain, pid, cached.state, cached.position, true, cached.log));
  }

  /** The cached copy of an eventlog: its record and its log. */
  async #cached(domain: string, pid: string): Promise<(StreamRecord & { log: Log }) | undefined> {
    const loaded = await this.#cache?.load(keyOf(domain, pid), true);
    return loaded && { ...loaded[0], log: logOf(loaded[1], loaded[0].count) };
  }

  async #read(domain: string, pid: string, withEvents: boolean): Promise<{ state: State; position: number; events?: readonly StoredEvent[] | undefined }> {
    checkEventlog(domain, pid);
    const key = keyOf(domain, pid);
    const live = this.#watches.get(key)?.snapshot;
    if (live && !live.stale) return live;
    const generation = this.#generation;
    const loaded = await this.#cache?.load(key, withEvents);
    const record = loaded?.[0];
    // The delta request goes out first; the cached events are parsed while it is in flight.
    const fetching = this.#fetch(domain, pid, record, record?.count, !!record).catch((error: unknown) => {
      if (!record) throw error;
    });
    const cached = loaded?.[1]?.();
    const fetched = await fetching;
    if (!fetched) return { state: record?.state ?? emptyState, position: record?.position ?? 0, events: cached }; // offline or failing: the cache
    const { state, position, count, events, reset } = fetched;
    const kept = record && !reset;
    const all = kept ? cached && [...cached, ...events] : events;
    void this.#store({ key, domain, pid, state, position, count }, kept ? record.position : 0, events, all && (() => all), reset ? this.#generation : generation);
    return { state, position, events: all };
  }

  /**
   * Brings `base` (of `size` events) up to date: only the events after its position, or all of
   * them without a base or when the counts disagree (events were deleted meanwhile, so the cached
   * copy is dropped, and the result says `reset`). `bounded`: fail at once when offline or when
   * the connection is lost, as there is a cache.
   */
  async #fetch(domain: string, pid: string, base: { state: State; position: number } | undefined, size = 0, bounded: boolean, reset = false): Promise<Fetched> {
    const { events, count } = await this.#request({ domain, pid, after: base?.position }, bounded);
    for (const event of events) this.#outbox?.seen(event);
    if (base && size + events.length !== count) {
      this.#drop(keyOf(domain, pid));
      return this.#fetch(domain, pid, undefined, 0, bounded, true);
    }
    const state = base ? events.reduce((folded, event) => applyEvent(folded, event), base.state) : composeEventlogState(events);
    return { state, position: events.at(-1)?.position ?? base?.position ?? 0, count, events, reset };
  }

  async #request(params: Params<'readEventlog'>, bounded: boolean): Promise<Result<'readEventlog'>> {
    if (!bounded) return this.call('readEventlog', params);
    if (this.state !== 'open') await this.#contact; // maybe still connecting for the first time
    if (this.state !== 'open') throw new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', 'offline'); // never escapes: the cache is served
    // A lost connection fails it at once, instead of resending it on the next one.
    return this.call('readEventlog', params, { signal: this.#stateChange.signal });
  }

  /** Stores an eventlog (unless an invalidation overlapped the read) and tells the other tabs. */
  async #store(next: Stored, from: number, tail: readonly StoredEvent[], all: (() => readonly StoredEvent[]) | undefined, generation = this.#generation): Promise<boolean> {
    const saved = generation === this.#generation && (await this.#cache?.save(next, from, tail, all));
    if (!saved) return false;
    const { key } = next;
    const [at, added] = saved;
    if (added?.length === 0) return true;
    this.#channel?.post(added ? { type: 'append', key, from: at, events: added } : { type: 'rewrite', key });
    void this.#cache?.evict(new Set([key, ...this.#watches.keys()]));
    return true;
  }

  // ── watching ────────────────────────────────────────────────────────────────────────────

  /**
   * Calls `listener` with the cached snapshot as soon as it is read, then with a new snapshot per
   * event (state from `applyEvent`, frozen). Returns the function that stops it. All watchers of
   * an eventlog share one watch, all watches of a domain one `*` subscription; eventlogs catch up
   * by themselves after a reconnect.
   */
  watchEventlogState(domain: string, pid: string, listener: (snapshot: EventlogSnapshot) => void, onError?: (error: unknown) => void): () => void {
    checkEventlog(domain, pid);
    assertFunction(listener, 'listener');
    assertOptionalFunction(onError, 'onError');
    const key = keyOf(domain, pid);
    let watch = this.#watches.get(key);
    if (!watch) {
      const created: Watch = {
        domain,
        pid,
        listeners: new Set(),
        log: logOf(),
        held: [],
        epoch: 0,
        saved: 0,
        live: (event) => {
          if (event.pid !== pid) return;
          this.#outbox?.seen(event);
          if (created.fresh) this.#apply(created, [event], true);
          else created.held.push(event);
        },
        refresh: serial(() => this.#catchUp(created)),
        persist: serial(() => this.#persist(created)),
      };
      this.#watches.set(key, (watch = created));
      // One gateway subscription per domain, whatever the number of watches: the core client shares it.
      (created.ready = (this as EventflowClient).subscribe(domain, '*', created.live)).catch(() => undefined); // awaited (and reported) by the catch-up
      void created.refresh();
    }
    const entry = watch;
    const watcher: Watcher = [listener, onError];
    entry.listeners.add(watcher);
    if (entry.shown) listener(entry.shown);
    return () => {
      entry.listeners.delete(watcher);
      // A microtask later, so that an unmount followed by a mount (React StrictMode) keeps the watch.
      queueMicrotask(() => {
        if (entry.listeners.size || this.#watches.get(key) !== entry) return;
        this.#watches.delete(key);
        (this as EventflowClient).unsubscribe(domain, '*', entry.live).catch(() => undefined); // failures reach onError
      });
    };
  }

  /** The async-iterator form of `watchEventlogState`; ends on `return()` or when `signal` aborts. */
  eventlogStates(domain: string, pid: string, { signal }: { signal?: AbortSignal } = {}): AsyncIterableIterator<EventlogSnapshot> {
    assertSignal(signal, 'options.signal');
    const queue = createAsyncQueue<EventlogSnapshot>(() => stop(), undefined, signal);
    const stop = this.watchEventlogState(domain, pid, (snapshot) => queue.push(snapshot), (error) => queue.fail(error));
    if (signal?.aborted) void queue.return();
    return queue;
  }

  /** Reads the cached copy (the first time), then catches up with the gateway when connected. */
  async #catchUp(watch: Watch): Promise<void> {
    const { domain, pid, epoch } = watch;
    const current = (): boolean => this.state === 'open' && this.#watches.get(keyOf(domain, pid)) === watch;
    if (!watch.loaded) {
      const cached = await this.#cached(domain, pid);
      if (cached) {
        watch.log = cached.log;
        this.#emit(watch, cached.state, cached.position, true);
      }
      watch.saved = cached?.position ?? 0;
      watch.loaded = true;
    }
    if (!current()) return; // runs again on open
    try {
      // Once the `*` subscription is registered, no event can fall between it and the fetch.
      await watch.ready;
      const base = watch.reset ? undefined : watch.snapshot;
      const fetched = await this.#fetch(domain, pid, base, watch.log.size, true);
      if (epoch !== watch.epoch) return; // invalidated meanwhile: runs again
      if (!base || fetched.reset) {
        watch.saved = 0;
        watch.log = logOf();
      }
      const { log } = watch;
      log.events = log.events.concat(fetched.events);
      log.size += fetched.events.length;
      watch.reset = false;
      watch.fresh = true;
      this.#emit(watch, fetched.state, fetched.position, false);
      this.#apply(watch, watch.held.splice(0), true);
    } catch (error) {
      if (current()) {
        this.#report(error);
        for (const [, onError] of watch.listeners) onError?.(error);
      }
    }
  }

  /** Applies events after the snapshot's position, emitting one snapshot per event. */
  #apply(watch: Watch, events: readonly StoredEvent[], persist: boolean): void {
    const { log } = watch;
    let { snapshot } = watch;
    if (!snapshot) return;
    for (const event of events) {
      if (event.position <= snapshot.position) continue;
      log.events.push(event);
      log.size++;
      snapshot = this.#emit(watch, applyEvent(snapshot.state, event), event.position, snapshot.stale);
    }
    if (persist) void watch.persist();
  }

  /** Makes the watch's new snapshot (of all its log) and hands it to its watchers. */
  #emit(watch: Watch, state: State, position: number, stale: boolean): EventlogSnapshot {
    const snapshot = (watch.snapshot = snapshotOf(watch.domain, watch.pid, state, position, stale, watch.log));
    this.#show(watch);
    return snapshot;
  }

  /** Hands the watch's snapshot, with the pending outbox entries applied, to its watchers. */
  #show(watch: Watch | undefined): void {
    const shown = watch?.snapshot && (watch.shown = this.#overlay(watch.snapshot));
    for (const [listener] of shown ? [...watch.listeners] : []) {
      try {
        listener(shown!);
      } catch (error) {
        this.#report(error);
      }
    }
  }

  /** `snapshot` with the pending entries of its eventlog applied (itself when there are none). */
  #overlay(snapshot: EventlogSnapshot): EventlogSnapshot {
    const { domain, pid, state, position, stale } = snapshot;
    const [shown, pending] = this.#outbox?.overlay(domain, pid, state, position) ?? [state, none];
    return pending.length
      ? {
          domain,
          pid,
          state: shown,
          position,
          stale,
          pending,
          get events() {
            return snapshot.events;
          },
        }
      : snapshot;
  }

  /** The watch is no longer caught up: live events wait for the next catch-up. */
  #markStale(watch: Watch): void {
    const { snapshot } = watch;
    watch.fresh = false;
    if (snapshot?.stale === false) this.#emit(watch, snapshot.state, snapshot.position, true);
  }

  /** Stores what a watch holds beyond its last stored position (one write at a time, see serial). */
  async #persist(watch: Watch): Promise<void> {
    const { domain, pid, snapshot, saved, log } = watch;
    if (!snapshot || !watch.fresh) return;
    const { state, position } = snapshot;
    // The unparsed cached part is at or below `saved`: the tail is found in what was appended.
    const tail = log.events.slice(log.events.findLastIndex((event) => event.position <= saved) + 1);
    if (await this.#store({ key: keyOf(domain, pid), domain, pid, state, position, count: log.size }, saved, tail, () => eventsOf(log))) watch.saved = position;
  }

  // ── invalidation and other tabs ─────────────────────────────────────────────────────────

  /** Drops an eventlog from the cache and tells the other tabs to refetch it. */
  #drop(key: string): void {
    this.#generation++;
    void this.#cache?.drop(key);
    this.#channel?.post({ type: 'invalidate', key });
  }

  /** Events of the eventlog were deleted: drop it (unless told by another tab); a watch of it refetches everything. */
  #invalidate(key: string, drop = true): void {
    if (drop) this.#drop(key);
    else this.#generation++;
    const watch = this.#watches.get(key);
    if (!watch) return;
    watch.reset = true;
    watch.saved = 0;
    watch.epoch++;
    this.#markStale(watch);
    void watch.refresh();
  }

  #receive(message: CacheMessage): void {
    if (message.type === 'clear') return this.#cleared();
    if (message.type === 'invalidate') return this.#invalidate(message.key, false);
    const watch = this.#watches.get(message.key);
    if (!watch?.snapshot) return;
    // Contiguous with what this tab holds: apply from the message; otherwise reload from IndexedDB.
    if (message.type === 'append' && watch.snapshot.position >= message.from) this.#apply(watch, message.events, false);
    else void this.#reload(watch);
  }

  async #reload(watch: Watch): Promise<void> {
    const { domain, pid } = watch;
    const cached = await this.#cached(domain, pid);
    const current = watch.snapshot;
    // A live watch only takes a newer copy; one that cannot catch up by itself takes what the cache has.
    if (!cached || !current || (watch.fresh && cached.position <= current.position)) return;
    watch.log = cached.log;
    this.#emit(watch, cached.state, cached.position, current.stale);
  }

  /** The IndexedDB copy is gone; what watches hold stays valid and is stored again in full. */
  #cleared(): void {
    this.#generation++;
    for (const watch of this.#watches.values()) watch.saved = 0;
  }

  // ── deletes and lifecycle ───────────────────────────────────────────────────────────────

  /**
   * Deletes an eventlog and drops it from the cache. (A single `delete(id)` needs nothing here: a
   * watch of its eventlog gets the gateway's `deleted` push, and a cached copy fails the count
   * check on its next read.)
   */
  override async deleteEventlog(domain: string, pid: string): Promise<boolean> {
    const deleted = await super.deleteEventlog(domain, pid);
    this.#invalidate(keyOf(domain, pid));
    return deleted;
  }

  /** Empties the IndexedDB cache (shared by every tab of this origin); live watches keep their state. */
  async clearCache(): Promise<void> {
    this.#cleared();
    await this.#cache?.drop();
    this.#channel?.post({ type: 'clear' });
  }

  override async close(options?: { drainTimeout?: number }): Promise<void> {
    this.#channel?.close();
    this.#outbox?.close();
    await super.close(options);
    this.#cache?.close();
  }
}

/** A browser client over WebSocket with an IndexedDB cache (see BrowserClientOptions). */
export const createBrowserClient = <M extends EventMap = EventMap>(url: string | URL, options?: BrowserClientOptions): BrowserClient<M> =>
  new BrowserClient<M>(webSocketConnector(url), options);
