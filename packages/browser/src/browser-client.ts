/**
 * The browser client: the core client plus a cache in IndexedDB. Reads answer from the cache and
 * fetch only what came after it (cached-reads.ts); watched eventlogs stay live through one `*`
 * subscription per domain and are updated with `applyEvent` (watches.ts); tabs share what they
 * cache over a BroadcastChannel (broadcast.ts); an optional outbox queues writes (outbox.ts).
 */
import {
  EventflowClient,
  assertFunction,
  assertNumber,
  assertOptionalFunction,
  EventflowError,
  featureNotEnabled,
  isEventflowError,
  logError,
  webSocketConnector,
  type ClientOptions,
  type Connector,
  type EventMap,
  type EventOf,
  type OperationName,
  type Params,
  type Position,
  type PublishInput,
  type RequestOptions,
  type Result,
  type State,
} from '@eventflow/core';
import { openChannel, type CacheChannel, type CacheMessage } from './broadcast.js';
import { createReads, type CachedReads } from './cached-reads.js';
import { createCache, type Cache } from './cache.js';
import { checkEventlog, keyOf, overlaid, snapshotOf, type EventlogSnapshot } from './eventlog-view.js';
import type { Outbox, OutboxEngine, OutboxPlugin, OutboxPublishOptions } from './outbox-types.js';
import type { EventlogStates } from './iterating.js';
import { concat } from './lazy-list.js';
import { createWatches, type Watch, type Watches } from './watches.js';

export type { EventlogSnapshot } from './eventlog-view.js';

export interface BrowserClientOptions extends ClientOptions {
  /** `false`: no IndexedDB cache (reads always fetch; watches still work, in memory). */
  cache?: false | { /** IndexedDB database name (default 'eventflow'). */ name?: string; /** Size budget in bytes (default 50 MB). */ maxBytes?: number };
  /** `createOutbox()` from '@eventflow/browser/outbox': publish and schedule are queued in IndexedDB first, states show them pending. */
  outbox?: OutboxPlugin;
}

type DomainOf<M extends EventMap> = Extract<keyof M, string>;
type NameOf<M extends EventMap, D extends DomainOf<M>> = Extract<keyof M[D], string>;

export class BrowserClient<M extends EventMap = EventMap> extends EventflowClient<M> {
  readonly #cache: Cache | undefined;
  readonly #channel: CacheChannel | undefined;
  readonly #outbox: OutboxEngine | undefined;
  readonly #reads: CachedReads;
  readonly #watches: Watches;
  /** `eventlogStates()`, brought by `iterating` from '@eventflow/browser/work' in `features`. */
  readonly #states: EventlogStates | undefined;
  /** The token of the connection (a callback's latest answer, or what `authenticate` sent): the outbox's identity. */
  #token: Promise<string | undefined>;

  constructor(connect: Connector, options: BrowserClientOptions = {}) {
    const report = options.onError ?? logError;
    let onError = report;
    const { token } = options;
    let answered!: (token: string) => void;
    const ask = async (): Promise<string> => {
      const value = await (token as () => string | Promise<string>)();
      answered(value);
      this.#token = Promise.resolve(value);
      return value;
    };
    super(connect, { ...options, onError: (error) => onError(error), token: typeof token === 'function' ? ask : token });
    // A callback's first answer, then its latest (ask).
    this.#token = typeof token === 'function' ? new Promise((resolve) => (answered = resolve)) : Promise.resolve(token);
    const { cache, outbox } = options;
    this.#states = (options.features?.find((feature) => feature.name === 'iterating') as { states?: EventlogStates } | undefined)?.states;
    const { name = 'eventflow', maxBytes = 50_000_000 } = cache || {};
    if (cache !== false && typeof indexedDB !== 'undefined') {
      this.#cache = createCache(name, maxBytes, report);
      this.#channel = openChannel(`eventflow-cache:${name}`, (message: CacheMessage) => this.#watches.receive(message));
    }
    this.#outbox = outbox?.attach({ client: this, name, report, token: () => this.#token, changed: (domain, pid) => this.#watches.show(domain, pid) });
    const watched = new Map<string, Watch>();
    const reads = (this.#reads = createReads(this as EventflowClient, this.#cache, this.#channel, this.#outbox, watched));
    this.#watches = createWatches(this as EventflowClient, reads, this.#outbox, report, watched);
    onError = (error) => {
      if (isEventflowError(error, 'E_EVENTFLOW_CONNECTION_FAILED')) reads.contacted();
      // Registrations cut short by close() are no news.
      if (!isEventflowError(error, 'E_EVENTFLOW_CLIENT_CLOSED')) report(error);
    };
    this.onDeleted(({ domain, pid }) => this.#watches.invalidate(keyOf(domain, pid)));
    this.onStateChange((state) => {
      reads.stateChanged();
      this.#watches.stateChanged(state);
    });
  }

  /** `call`; a successful `authenticate` changes the token (see #token). */
  override async call<O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions): Promise<Result<O>> {
    const result = await super.call(op, params, options);
    if (op === 'authenticate') this.#token = Promise.resolve((params as Params<'authenticate'>).token);
    return result;
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

  /**
   * The events of a process after position `after`: the cached ones plus those stored after them;
   * offline, the cached ones. With `limit`, at most that many (a page: `after` = the last one's
   * position for the next), of which only the cached chunks that hold them are read and parsed.
   */
  override async readEventlog<D extends DomainOf<M>>(domain: D, pid: string, { after = -1, limit }: { after?: Position; limit?: number } = {}): Promise<Array<EventOf<M, D>>> {
    checkEventlog(domain, pid);
    assertNumber(after, 'options.after', true, -1);
    assertNumber(limit, 'options.limit', true, 1);
    const { events = [] } = await this.#reads.read(domain, pid, limit === undefined || { after, limit });
    // All of them: a lazy list of its own (the cached ones are parsed a chunk at a time, when first used).
    const all = after <= 0 && limit === undefined;
    return (all ? concat(events, []) : events.filter((event) => event.position > after).slice(0, limit)) as unknown as Array<EventOf<M, D>>;
  }

  /** The composed state: the cached one brought up to date with `applyEvent`; offline, the cached one. */
  override async readEventlogState(domain: string, pid: string): Promise<State> {
    checkEventlog(domain, pid);
    const { state, position } = await this.#reads.read(domain, pid, false);
    return this.#outbox?.overlay(domain, pid, state, position)[0] ?? state;
  }

  /** What the cache holds, without the network (`stale` unless a live watch keeps it current). */
  async readCached(domain: string, pid: string): Promise<EventlogSnapshot | undefined> {
    checkEventlog(domain, pid);
    const watched = this.#watches.shown(domain, pid);
    if (watched) return watched;
    const cached = await this.#reads.cached(domain, pid);
    return cached && overlaid(snapshotOf(domain, pid, cached.state, cached.position, true, cached.log), this.#outbox);
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
    return this.#watches.watch(domain, pid, listener, onError);
  }

  /**
   * The async-iterator form of `watchEventlogState`; ends on `return()` or when `signal` aborts.
   * Needs `iterating` from '@eventflow/browser/work' in `features`; without it, throws
   * E_EVENTFLOW_FEATURE_NOT_ENABLED (as `events()` does), so that bundles without it leave the queue out.
   */
  eventlogStates(domain: string, pid: string, options?: { signal?: AbortSignal }): AsyncIterableIterator<EventlogSnapshot> {
    if (!this.#states) throw featureNotEnabled('iterating', 'eventlogStates');
    return this.#states(this, domain, pid, options);
  }

  // ── deletes and lifecycle ───────────────────────────────────────────────────────────────

  /**
   * Deletes an eventlog and drops it from the cache. (A single `delete(id)` needs nothing here: a
   * watch of its eventlog gets the gateway's `deleted` push, and a cached copy fails the count
   * check on its next read.)
   */
  override async deleteEventlog(domain: string, pid: string): Promise<boolean> {
    const deleted = await super.deleteEventlog(domain, pid);
    this.#watches.invalidate(keyOf(domain, pid));
    return deleted;
  }

  /** Empties the IndexedDB cache (shared by every tab of this origin); live watches keep their state. */
  async clearCache(): Promise<void> {
    this.#watches.cleared();
    await this.#reads.clear();
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
