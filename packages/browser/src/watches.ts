/**
 * Live views of eventlogs: one watch per eventlog, shared by all its watchers, fed by one `*`
 * subscription per domain (which the core client shares among listeners) and updated with
 * `applyEvent`; it shows the outbox's pending entries on top, catches up after every reconnect,
 * stores what it holds, and follows what other tabs store or invalidate.
 */
import { applyEvent, notify, type ConnectionState, type EventflowClient, type State, type StoredEvent } from '@eventflow/core';
import type { CacheMessage } from './broadcast.js';
import type { CachedReads } from './cached-reads.js';
import { eventsOf, keyOf, logOf, overlaid, serial, snapshotOf, type EventlogSnapshot, type Log } from './eventlog-view.js';
import type { OutboxEngine } from './outbox-types.js';

/** A watcher: its listener and its error callback. */
type Watcher = [(snapshot: EventlogSnapshot) => void, ((error: unknown) => void) | undefined];

/** A watched eventlog, shared by all its watchers. */
export interface Watch {
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

/** The watches of a client (one per watched eventlog). */
export interface Watches {
  /** What the watchers of (domain, pid) were last shown, if it is watched. */
  shown(domain: string, pid: string): EventlogSnapshot | undefined;
  /** See `BrowserClient.watchEventlogState` (arguments checked there). */
  watch(domain: string, pid: string, listener: (snapshot: EventlogSnapshot) => void, onError?: (error: unknown) => void): () => void;
  /** Open: every watch catches up; otherwise they are stale until it opens again. */
  stateChanged(state: ConnectionState): void;
  /** The pending outbox entries of (domain, pid) changed: its watchers are shown them. */
  show(domain: string, pid: string): void;
  /** Events of the eventlog were deleted: drop it (unless told by another tab); a watch of it refetches everything. */
  invalidate(key: string, drop?: boolean): void;
  /** What another tab stored, dropped or cleared. */
  receive(message: CacheMessage): void;
  /** The IndexedDB copy is gone; what watches hold stays valid and is stored again in full. */
  cleared(): void;
}

/** `watches`: the map of watches by eventlog key, owned here (CachedReads reads it). */
export function createWatches(client: EventflowClient, reads: CachedReads, outbox: OutboxEngine | undefined, report: (error: unknown) => void, watches: Map<string, Watch>): Watches {
  /** Reads the cached copy (the first time), then catches up with the gateway when connected. */
  const catchUp = async (watch: Watch): Promise<void> => {
    const { domain, pid, epoch } = watch;
    const current = (): boolean => client.state === 'open' && watches.get(keyOf(domain, pid)) === watch;
    if (!watch.loaded) {
      const cached = await reads.cached(domain, pid);
      if (cached) {
        watch.log = cached.log;
        emit(watch, cached.state, cached.position, true);
      }
      watch.saved = cached?.position ?? 0;
      watch.loaded = true;
    }
    if (!current()) return; // runs again on open
    try {
      // Once the `*` subscription is registered, no event can fall between it and the fetch.
      await watch.ready;
      const base = watch.reset ? undefined : watch.snapshot;
      const fetched = await reads.fetch(domain, pid, base, watch.log.size, true);
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
      emit(watch, fetched.state, fetched.position, false);
      apply(watch, watch.held.splice(0), true);
    } catch (error) {
      if (current()) {
        report(error);
        for (const [, onError] of watch.listeners) onError?.(error);
      }
    }
  };

  /** Applies events after the snapshot's position, emitting one snapshot per event. */
  const apply = (watch: Watch, events: readonly StoredEvent[], persist: boolean): void => {
    const { log } = watch;
    let { snapshot } = watch;
    if (!snapshot) return;
    for (const event of events) {
      if (event.position <= snapshot.position) continue;
      log.events.push(event);
      log.size++;
      snapshot = emit(watch, applyEvent(snapshot.state, event), event.position, snapshot.stale);
    }
    if (persist) void watch.persist();
  };

  /** Makes the watch's new snapshot (of all its log) and hands it to its watchers. */
  const emit = (watch: Watch, state: State, position: number, stale: boolean): EventlogSnapshot => {
    const snapshot = (watch.snapshot = snapshotOf(watch.domain, watch.pid, state, position, stale, watch.log));
    show(watch);
    return snapshot;
  };

  /** Hands the watch's snapshot, with the pending outbox entries applied, to its watchers. */
  const show = (watch: Watch | undefined): void => {
    const shown = watch?.snapshot && (watch.shown = overlaid(watch.snapshot, outbox));
    if (shown) notify([...watch.listeners].map(([listener]) => listener), shown, report);
  };

  /** The watch is no longer caught up: live events wait for the next catch-up. */
  const markStale = (watch: Watch): void => {
    const { snapshot } = watch;
    watch.fresh = false;
    if (snapshot?.stale === false) emit(watch, snapshot.state, snapshot.position, true);
  };

  /** Stores what a watch holds beyond its last stored position (one write at a time, see serial). */
  const persist = async (watch: Watch): Promise<void> => {
    const { domain, pid, snapshot, saved, log } = watch;
    if (!snapshot || !watch.fresh) return;
    const { state, position } = snapshot;
    // The unparsed cached part is at or below `saved`: the tail is found in what was appended.
    const tail = log.events.slice(log.events.findLastIndex((event) => event.position <= saved) + 1);
    if (await reads.store({ key: keyOf(domain, pid), domain, pid, state, position, count: log.size }, saved, tail, () => eventsOf(log))) watch.saved = position;
  };

  // ── invalidation and other tabs ─────────────────────────────────────────────────────────

  const invalidate = (key: string, drop = true): void => {
    if (drop) reads.drop(key);
    else reads.forget();
    const watch = watches.get(key);
    if (!watch) return;
    watch.reset = true;
    watch.saved = 0;
    watch.epoch++;
    markStale(watch);
    void watch.refresh();
  };

  const reload = async (watch: Watch): Promise<void> => {
    const { domain, pid } = watch;
    const cached = await reads.cached(domain, pid);
    const current = watch.snapshot;
    // A live watch only takes a newer copy; one that cannot catch up by itself takes what the cache has.
    if (!cached || !current || (watch.fresh && cached.position <= current.position)) return;
    watch.log = cached.log;
    emit(watch, cached.state, cached.position, current.stale);
  };

  const cleared = (): void => {
    reads.forget();
    for (const watch of watches.values()) watch.saved = 0;
  };

  return {
    shown: (domain, pid) => watches.get(keyOf(domain, pid))?.shown,

    watch(domain, pid, listener, onError) {
      const key = keyOf(domain, pid);
      let watch = watches.get(key);
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
            outbox?.seen(event);
            if (created.fresh) apply(created, [event], true);
            else created.held.push(event);
          },
          refresh: serial(() => catchUp(created)),
          persist: serial(() => persist(created)),
        };
        watches.set(key, (watch = created));
        // One gateway subscription per domain, whatever the number of watches: the core client shares it.
        (created.ready = client.subscribe(domain, '*', created.live)).catch(() => undefined); // awaited (and reported) by the catch-up
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
          if (entry.listeners.size || watches.get(key) !== entry) return;
          watches.delete(key);
          client.unsubscribe(domain, '*', entry.live).catch(() => undefined); // failures reach onError
        });
      };
    },

    stateChanged(state) {
      for (const watch of watches.values()) {
        if (state === 'open') void watch.refresh();
        else {
          watch.held = []; // the catch-up after reconnecting covers them
          markStale(watch);
        }
      }
    },

    show: (domain, pid) => show(watches.get(keyOf(domain, pid))),
    invalidate,

    receive(message) {
      if (message.type === 'clear') return cleared();
      if (message.type === 'invalidate') return invalidate(message.key, false);
      const watch = watches.get(message.key);
      if (!watch?.snapshot) return;
      // Contiguous with what this tab holds: apply from the message; otherwise reload from IndexedDB.
      if (message.type === 'append' && watch.snapshot.position >= message.from) apply(watch, message.events, false);
      else void reload(watch);
    },

    cleared,
  };
}
