/**
 * The IndexedDB cache: per eventlog (domain, pid) its composed state, position and count, and its
 * events as JSON chunks of `CHUNK` packed events (a warm open parses a few strings instead of
 * cloning thousands of records, see `Packed`; a page of events reads only the chunks it needs),
 * plus LRU bookkeeping within a size budget (IndexedDB through idb.ts: requests and transactions
 * as promises). Every operation degrades to "nothing cached" when IndexedDB is unavailable, newer
 * than this code, blocked by an older connection, or failing.
 */
import { freezeState, type JsonValue, type State, type StoredEvent } from '@eventflow/core';
import { committed, openDatabase, settled } from './idb.js';
import { lazyList } from './lazy-list.js';

/** The schema version (see `upgrade` in `createCache` for what each step did). */
export const VERSION = 4;

/**
 * An event as stored since version 3: its fields in this order, without their names and without
 * domain and pid (those of its eventlog). A warm open reads and parses a third less JSON than with
 * whole events (245 → 160 bytes per event in bench/browser-open.mjs). A new field of StoredEvent
 * needs a schema step.
 */
export type Packed = [id: string, name: string, data: JsonValue, timestamp: string, rid: string | null, position: number];

export interface StreamRecord {
  /** `domain \u001f pid` */
  key: string;
  domain: string;
  pid: string;
  /** Position of the newest cached event (0: none). */
  position: number;
  /** Number of cached events; equals the gateway's count when nothing was deleted meanwhile. */
  count: number;
  state: State;
  /** Key of the newest chunk (the position of its first event; 0: none) and its number of events. */
  last: number;
  lastSize: number;
  /** Total JSON length of the chunks. */
  eventBytes: number;
}

/** What is stored of an eventlog besides its events. */
export type Stored = Pick<StreamRecord, 'key' | 'domain' | 'pid' | 'state' | 'position' | 'count'>;

export interface UsageRecord {
  key: string;
  /** Approximate size: JSON length of the events and of the state. */
  bytes: number;
  /** Last read or write (ms since the epoch): the LRU order (uses within one ms tie, and either may go first). */
  used: number;
}

/**
 * The stores: `streams` (StreamRecord by key), `events` (key [stream key, position of the
 * chunk's first event] → a JSON array of `CHUNK` Packed events, fewer in the newest) and `usage`
 * (UsageRecord by key, index `used`).
 */
const stores = 'streams events usage'.split(' ');

/**
 * Events per chunk: a page of events parses the chunks that hold it, so a few hundred events more
 * than it shows; reading them all costs about the same as one string (500 packed events are
 * ~80 kB of JSON in bench/browser-open.mjs).
 */
export const CHUNK = 500;

/** Which events `load` reads: all, or the chunks holding the first `limit` after position `after`. */
export type Page = { after: number; limit: number };

/** An eventlog's chunks, from `first` on. */
const range = (key: string, first: IDBValidKey = [key, 0]): IDBKeyRange => IDBKeyRange.bound(first, [key, Infinity]);
/** JSON array `a` (if any) with the items of JSON array `b` appended. */
const join = (a: string | undefined, b: string): string => (a ? `${a.slice(0, -1)},${b.slice(1)}` : b);

const pack = (events: readonly StoredEvent[]): string => JSON.stringify(events.map((e): Packed => [e.id, e.name, e.data, e.timestamp, e.rid, e.position]));

/** The events of a chunk. (Indexing, not destructuring: faster before the JIT warms up.) */
const unpack = (chunk: string, domain: string, pid: string): StoredEvent[] =>
  (JSON.parse(chunk) as Packed[]).map((e) => ({ id: e[0], domain, name: e[1], pid, data: e[2], timestamp: e[3], rid: e[4], position: e[5] }));

/**
 * The events of a read's chunks, oldest first: a page's parsed at once, a whole eventlog's as a
 * lazy list of `count` events that parses a chunk when one of its events is first used (only
 * then is IndexedDB's result read, which deserialises it). Chunks before the newest hold `CHUNK`
 * events each (see `save`), so event `i` is in chunk `i / CHUNK`.
 */
function eventsIn(chunks: IDBRequest<string[]>, { domain, pid, count }: StreamRecord, page: boolean): StoredEvent[] {
  const parsed: StoredEvent[][] = [];
  const chunk = (c: number): StoredEvent[] => (parsed[c] ??= unpack(chunks.result[c]!, domain, pid));
  return page ? chunks.result.flatMap((_, c) => chunk(c)) : lazyList(count, (i) => chunk((i / CHUNK) | 0)[i % CHUNK]!);
}


export interface Cache {
  /**
   * The record of an eventlog, as soon as it is read, and, when `withEvents`, its events (or
   * those of the chunks of a page of them, oldest first, from the one holding `after`) from the
   * same transaction, once that is complete (undefined when it failed). All events come as a lazy
   * list (see `eventsIn`): a caller that only needs the state, or some events, pays neither for
   * copying the whole eventlog nor for parsing it.
   */
  load(key: string, withEvents: boolean | Page): Promise<[StreamRecord, Promise<StoredEvent[] | undefined> | undefined] | undefined>;
  /**
   * Stores `next` as the eventlog's record (the state at `next.position`, `next.count` events;
   * nothing else may be in it), which is the stored copy at position `from` plus `tail`. When
   * nothing is stored, or the stored copy is behind `from`, all events are written from `all()`,
   * or nothing without it. Resolves with the stored position before the write and the events
   * appended after it (undefined: written in full).
   */
  save(next: Stored, from: number, tail: readonly StoredEvent[], all?: () => readonly StoredEvent[]): Promise<[at: number, added: StoredEvent[] | undefined] | undefined>;
  /** Drops one eventlog, or all of them. */
  drop(key?: string): Promise<void>;
  /** Drops least recently used eventlogs, except `keep`, until the total fits the budget. */
  evict(keep: ReadonlySet<string>): Promise<void>;
  /** Closes the database for good. */
  close(): void;
}

export const createCache = (name: string, maxBytes: number, onError: (error: unknown) => void): Cache => {
  let db: Promise<IDBDatabase | undefined> | undefined;
  /** Settles (with no database) when the open waits for a connection elsewhere to let go. */
  let blocked: Promise<undefined> | undefined;

  /** Closes the database; unless `final`, the next operation opens it again. */
  const close = (final?: boolean): void => {
    void db?.then((open) => open?.close());
    db = final ? Promise.resolve(undefined) : undefined;
    blocked = undefined;
  };

  /** The open database, or none (unavailable, newer than this code, failing, or blocked for now). */
  const open = (): Promise<IDBDatabase | undefined> => {
    if (!db) {
      let unblock!: () => void;
      blocked = new Promise((resolve) => (unblock = () => resolve(undefined)));
      // A step that throws aborts the upgrade: the open fails, no half-migrated schema.
      db = openDatabase(name, VERSION, {
        upgrade(opened, oldVersion, tx) {
          // 0 → 1: one record per eventlog, its events in segments.
          if (oldVersion < 1) {
            opened.createObjectStore('streams', { keyPath: 'key' });
            opened.createObjectStore('events');
          }
          // 1 → 2: LRU bookkeeping in a small store of its own, indexed by last use, so touching
          // an eventlog does not rewrite its state.
          if (oldVersion < 2) opened.createObjectStore('usage', { keyPath: 'key' }).createIndex('used', 'used');
          // 2 → 3: events are packed; 3 → 4: in chunks of CHUNK events instead of one segment
          // per write. Cached eventlogs are dropped (they are fetched again when read):
          // converting them would cost more code than refetching costs once.
          for (const store of stores) tx.objectStore(store).clear();
        },
        // A connection elsewhere (a tab of an older release) keeps the old schema open: work
        // without the cache until it lets go, instead of leaving every read waiting for it.
        blocked: unblock,
        // Another tab wants a newer schema: let it upgrade; the next operation reopens (and finds
        // no usable cache if the schema became newer than this code).
        blocking: () => close(),
        // Closed by the browser (storage cleared, say): the next operation reopens.
        terminated: () => close(),
      }).catch((error: unknown) => {
        onError(error);
        return undefined;
      });
    }
    // Once the open settles, it comes first: `blocked` only matters while the open is pending.
    return blocked ? Promise.race([db, blocked]) : db;
  };

  /** Runs `work` in one transaction over all stores; failures are reported and read as "nothing cached". */
  const run = async <T>(mode: IDBTransactionMode, work: (tx: IDBTransaction) => Promise<T>): Promise<T | undefined> => {
    try {
      const tx = (await open())?.transaction(stores, mode);
      return tx && (await Promise.all([work(tx), committed(tx)]))[0];
    } catch (error) {
      onError(error);
      return undefined;
    }
  };

  // Opened at once, so that opening overlaps the client's connection instead of the first read.
  void open();

  const drop = (key?: string): Promise<void> =>
    run('readwrite', async (tx) => {
      // Failed writes fail the transaction: run awaits its commit.
      for (const name of stores) key === undefined ? tx.objectStore(name).clear() : tx.objectStore(name).delete(name === 'events' ? range(key) : key);
    });

  return {
    async load(key, withEvents) {
      let tx: IDBTransaction | undefined;
      try {
        tx = (await open())?.transaction(stores, 'readonly');
        if (!tx) return undefined;
        const done = committed(tx).then(
          () => true,
          (error: unknown) => (onError(error), false),
        );
        const get = settled<StreamRecord | undefined>(tx.objectStore('streams').get(key));
        const events = tx.objectStore('events');
        const page = withEvents !== true && withEvents;
        // A page: from the newest chunk starting at or before `after`, as many as `limit` events can span.
        const first = page ? (await settled(events.openKeyCursor(IDBKeyRange.bound([key, -Infinity], [key, page.after]), 'prev')))?.key : undefined;
        // The request itself: reading its result (which deserialises the whole eventlog) waits
        // until the transaction is complete, and until an event is used (eventsIn).
        const chunks = withEvents ? (events.getAll(range(key, first), page ? Math.ceil(page.limit / CHUNK) + 1 : undefined) as IDBRequest<string[]>) : undefined;
        // The record succeeds before the events are read (requests run in order): a caller can
        // ask the gateway for what came after it while IndexedDB still reads the eventlog.
        const record = await get;
        if (!record) return undefined;
        void run('readwrite', async (tx) => {
          const usage = tx.objectStore('usage');
          const found = await settled<UsageRecord | undefined>(usage.get(key));
          if (found) usage.put({ ...found, used: Date.now() });
        });
        // States read back from IndexedDB are plain objects: frozen like the ones core builds.
        freezeState(record.state);
        return [record, chunks && done.then((ok) => (ok ? eventsIn(chunks, record, !!page) : undefined))];
      } catch (error) {
        if (!tx) onError(error); // else reported by `done`
        return undefined;
      }
    },

    save: (next, from, tail, all) =>
      run('readwrite', async (tx) => {
        const { key, state, position } = next;
        const events = tx.objectStore('events');
        // Writes are not awaited one by one: a failed one fails the transaction, whose commit run awaits.
        const old = await settled<StreamRecord | undefined>(tx.objectStore('streams').get(key));
        const at = old?.position ?? 0;
        let { last = 0, lastSize = 0, eventBytes = 0 } = old ?? {};
        let added: StoredEvent[] | undefined = [];
        let append: readonly StoredEvent[];
        if (old && at >= position) return [at, added]; // nothing newer
        if (old && at >= from) append = added = tail.filter((event) => event.position > at);
        else if (all) {
          added = undefined;
          append = all();
          eventBytes = lastSize = 0;
          events.delete(range(key));
        } else return undefined;
        // The newest chunk is filled up first (by string concatenation, without parsing it), then new ones.
        let size = lastSize % CHUNK;
        const newest = size ? await settled<string | undefined>(events.get([key, last])) : undefined;
        for (let i = 0; i < append.length; size = 0) {
          const chunk = append.slice(i, (i += CHUNK - size));
          const json = pack(chunk);
          eventBytes += json.length;
          if (!size) last = chunk[0]!.position;
          lastSize = size + chunk.length;
          events.put(size ? join(newest, json) : json, [key, last]);
        }
        tx.objectStore('streams').put({ ...next, last, lastSize, eventBytes });
        tx.objectStore('usage').put({ key, bytes: eventBytes + JSON.stringify(state).length, used: Date.now() });
        return [at, added];
      }),

    drop,

    async evict(keep) {
      const usage = (await run('readonly', (tx) => settled<UsageRecord[]>(tx.objectStore('usage').index('used').getAll()))) ?? [];
      let total = usage.reduce((sum, entry) => sum + entry.bytes, 0);
      for (const { key, bytes } of usage) {
        if (total <= maxBytes) return;
        if (keep.has(key)) continue;
        await drop(key);
        total -= bytes;
      }
    },

    close: () => close(true),
  };
};
