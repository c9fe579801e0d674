/**
 * Reads through the IndexedDB cache: answer from the cached copy and fetch only the events stored
 * after it (all of them when the counts show deletions), store the result, and tell the other
 * tabs what was stored or dropped. Offline, or while the first connection is still being made,
 * reads serve the cached copy rather than wait.
 */
import { EventflowError, applyEvent, composeEventlogState, emptyState, type EventflowClient, type Params, type Result, type State, type StoredEvent } from '@eventflow/core';
import type { CacheChannel } from './broadcast.js';
import type { Cache, Page, Stored, StreamRecord } from './cache.js';
import { keyOf, logOf, type EventlogSnapshot, type Log } from './eventlog-view.js';
import { concat } from './lazy-list.js';
import type { OutboxEngine } from './outbox-types.js';

export interface Fetched {
  state: State;
  position: number;
  count: number;
  /** What came after the base (everything when there was no base or it was reset). */
  events: StoredEvent[];
  /** The cached copy disagreed with the gateway (events were deleted) and was dropped. */
  reset: boolean;
}

/** The watches by eventlog key (owned by watches.ts): a live one answers reads, and is never evicted. */
type Watched = ReadonlyMap<string, { readonly snapshot?: EventlogSnapshot | undefined }>;

export interface CachedReads {
  /** Settles the wait for the first contact (a connection or a failed attempt). */
  contacted(): void;
  /** The connection state changed: bounded requests in flight fail (the cache answers them). */
  stateChanged(): void;
  /** The cached copy of an eventlog: its record and its log. */
  cached(domain: string, pid: string): Promise<(StreamRecord & { log: Log }) | undefined>;
  /**
   * A live watch's snapshot, else the cached copy brought up to date (offline: the cached copy).
   * With a `Page`, `events` holds at least its events (from the cached chunks that hold them).
   */
  read(domain: string, pid: string, withEvents: boolean | Page): Promise<{ state: State; position: number; events?: readonly StoredEvent[] | undefined }>;
  /**
   * Brings `base` (of `size` events) up to date: only the events after its position, or all of
   * them without a base or when the counts disagree (events were deleted meanwhile, so the cached
   * copy is dropped, and the result says `reset`). `bounded`: fail at once when offline or when
   * the connection is lost, as there is a cache.
   */
  fetch(domain: string, pid: string, base: { state: State; position: number } | undefined, size: number, bounded: boolean): Promise<Fetched>;
  /** Stores an eventlog (unless an invalidation overlapped the read) and tells the other tabs. */
  store(next: Stored, from: number, tail: readonly StoredEvent[], all: (() => readonly StoredEvent[]) | undefined): Promise<boolean>;
  /** Drops an eventlog from the cache and tells the other tabs to refetch it. */
  drop(key: string): void;
  /** Something cached was invalidated (here or in another tab): reads in flight do not store what they got. */
  forget(): void;
  /** Empties the cache for every tab. */
  clear(): Promise<void>;
}

export function createReads(client: EventflowClient, cache: Cache | undefined, channel: CacheChannel | undefined, outbox: OutboxEngine | undefined, watched: Watched): CachedReads {
  /** Bumped by every invalidation: a read that overlapped one does not store its result. */
  let generation = 0;
  let contacted!: () => void;
  /**
   * Settles on the first connection, the first failed attempt, or after 3 s: from then on, reads
   * that find the client offline serve the cache at once.
   */
  const contact = new Promise<void>((resolve) => setTimeout((contacted = resolve), 3000));
  /** Aborted (and replaced) at every change of the connection state. */
  let stateChange = new AbortController();

  const cached: CachedReads['cached'] = async (domain, pid) => {
    const loaded = await cache?.load(keyOf(domain, pid), true);
    const events = await loaded?.[1];
    return loaded && events && { ...loaded[0], log: logOf(events, loaded[0].count) };
  };

  const request = async (params: Params<'readEventlog'>, bounded: boolean): Promise<Result<'readEventlog'>> => {
    if (!bounded) return client.call('readEventlog', params);
    if (client.state !== 'open') await contact; // maybe still connecting for the first time
    if (client.state !== 'open') throw new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', 'offline'); // never escapes: the cache is served
    // A lost connection fails it at once, instead of resending it on the next one.
    return client.call('readEventlog', params, { signal: stateChange.signal });
  };

  const fetch = async (domain: string, pid: string, base: { state: State; position: number } | undefined, size: number, bounded: boolean, reset = false): Promise<Fetched> => {
    const { events, count } = await request({ domain, pid, after: base?.position }, bounded);
    for (const event of events) outbox?.seen(event);
    if (base && size + events.length !== count) {
      drop(keyOf(domain, pid));
      return fetch(domain, pid, undefined, 0, bounded, true);
    }
    const state = base ? events.reduce((folded, event) => applyEvent(folded, event), base.state) : composeEventlogState(events);
    return { state, position: events.at(-1)?.position ?? base?.position ?? 0, count, events, reset };
  };

  const store = async (next: Stored, from: number, tail: readonly StoredEvent[], all: (() => readonly StoredEvent[]) | undefined, at = generation): Promise<boolean> => {
    const saved = at === generation && (await cache?.save(next, from, tail, all));
    if (!saved) return false;
    const { key } = next;
    const [stored, added] = saved;
    if (added?.length === 0) return true;
    channel?.post(added ? { type: 'append', key, from: stored, events: added } : { type: 'rewrite', key });
    void cache?.evict(new Set([key, ...watched.keys()]));
    return true;
  };

  const drop = (key: string): void => {
    generation++;
    void cache?.drop(key);
    channel?.post({ type: 'invalidate', key });
  };

  return {
    contacted,
    stateChanged() {
      stateChange.abort();
      stateChange = new AbortController();
      contacted();
    },
    cached,
    async read(domain, pid, withEvents) {
      const key = keyOf(domain, pid);
      const live = watched.get(key)?.snapshot;
      if (live && !live.stale) return live;
      const started = generation;
      const loaded = await cache?.load(key, withEvents);
      const record = loaded?.[0];
      // The delta request goes out first; the cached events are read while it is in flight.
      const fetching = fetch(domain, pid, record, record?.count ?? 0, !!record).catch((error: unknown) => {
        if (!record) throw error;
      });
      const read = await loaded?.[1];
      if (withEvents && record && !read) {
        // The record was read but not its events (IndexedDB failed meanwhile): fetch them all.
        await fetching;
        return fetch(domain, pid, undefined, 0, false);
      }
      const fetched = await fetching;
      if (!fetched) return { state: record?.state ?? emptyState, position: record?.position ?? 0, events: read }; // offline or failing: the cache
      const { state, position, count, events, reset } = fetched;
      const kept = record && !reset;
      // All events, to store them in full if need be (a page has only some: it stores the delta).
      const all = !kept ? events : withEvents === true ? read && concat(read, events) : undefined;
      void store({ key, domain, pid, state, position, count }, kept ? record.position : 0, events, all && (() => all), reset ? generation : started);
      return { state, position, events: all ?? read?.concat(events) };
    },
    fetch,
    store,
    drop,
    forget: () => void generation++,
    async clear() {
      await cache?.drop();
      channel?.post({ type: 'clear' });
    },
  };
}
