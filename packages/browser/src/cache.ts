/**
 * The IndexedDB cache: per eventlog (domain, pid) its composed state, position and count, and its
 * events as JSON segments of packed events (a warm open parses a few strings instead of cloning
 * thousands of records; see `Packed`), plus LRU bookkeeping within a size budget. Plain IndexedDB
 * behind two small promise helpers (a wrapper library would cost more than this whole module).
 * Every operation degrades to "nothing cached" when IndexedDB is unavailable, blocked by a newer
 * schema, or failing.
 */
import { freezeState, type JsonValue, type State, type StoredEvent } from '@eventflow/core';

/** The schema version; `migrations[v]` upgrades a database from version v to v + 1. */
export const VERSION = 3;

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
  /** Number of event segments and their total JSON length. */
  segments: number;
  eventBytes: number;
}

/** What is stored of an eventlog besides its events. */
export type Stored = Pick<StreamRecord, 'key' | 'domain' | 'pid' | 'state' | 'position' | 'count'>;

export interface UsageRecord {
  key: string;
  /** Approximate size: JSON length of the events and of the state. */
  bytes: number;
  /** Last read or write (ms since the epoch, fractional): the LRU order. */
  used: number;
}

/**
 * The stores: `streams` (StreamRecord by key), `events` (key [stream key, position of the
 * segment's first event, 0 for a merged base segment] → a JSON array of Packed events) and `usage`
 * (UsageRecord by key, index `used`).
 */
type StoreName = 'streams' | 'events' | 'usage';
const stores = 'streams events usage'.split(' ') as StoreName[];

export const migrations: Array<(db: IDBDatabase, tx: IDBTransaction) => Promise<void> | void> = [
  // 0 → 1: one record per eventlog, its events in segments.
  (db) => {
    db.createObjectStore('streams', { keyPath: 'key' });
    db.createObjectStore('events');
  },
  // 1 → 2: LRU bookkeeping moves to a small store of its own, indexed by last use, so touching
  // an eventlog no longer rewrites its state. (This step used to copy version 1's LRU fields into
  // it; step 3 drops every cached eventlog, so there is nothing left to copy.)
  (db) => {
    db.createObjectStore('usage', { keyPath: 'key' }).createIndex('used', 'used');
  },
  // 2 → 3: events are packed. Cached eventlogs are dropped (they are fetched again when read):
  // converting them would cost more code than refetching costs once.
  (_db, tx) => {
    for (const name of stores) tx.objectStore(name).clear();
  },
];

/** Segments beyond this many are merged into one (by string concatenation, without parsing). */
const MAX_SEGMENTS = 32;

export function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

const range = (key: string): IDBKeyRange => IDBKeyRange.bound([key, 0], [key, Infinity]);
const now = (): number => performance.timeOrigin + performance.now();
const join = (segments: string[]): string => `[${segments.map((s) => s.slice(1, -1)).filter(Boolean).join(',')}]`;

const pack = (events: readonly StoredEvent[]): string => JSON.stringify(events.map((e): Packed => [e.id, e.name, e.data, e.timestamp, e.rid, e.position]));

/** The events of an eventlog's segments, oldest first. (Indexing, not destructuring: faster before the JIT warms up.) */
const unpack = (segments: string[], domain: string, pid: string): StoredEvent[] =>
  (JSON.parse(join(segments)) as Packed[]).map((e) => ({ id: e[0], domain, name: e[1], pid, data: e[2], timestamp: e[3], rid: e[4], position: e[5] }));


export interface Cache {
  /**
   * The record of an eventlog and, when `withEvents`, its events, from one transaction. The events
   * come as a function: IndexedDB deserialises a value when its result is first read, so a caller
   * that only needs the state pays neither for copying the eventlog nor for parsing it.
   */
  load(key: string, withEvents: boolean): Promise<[StreamRecord, (() => StoredEvent[]) | undefined] | undefined>;
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

  /** Closes the database; unless `final`, the next operation opens it again. */
  const close = (final?: boolean): void => {
    void db?.then((open) => open?.close());
    db = final ? Promise.resolve(undefined) : undefined;
  };

  const open = (): Promise<IDBDatabase | undefined> =>
    (db ??= new Promise<IDBDatabase>((resolve, reject) => {
      const opening = indexedDB.open(name, VERSION);
      opening.onupgradeneeded = async ({ oldVersion }) => {
        const tx = opening.transaction as IDBTransaction;
        try {
          for (const migrate of migrations.slice(oldVersion, VERSION)) await migrate(opening.result, tx);
        } catch {
          tx.abort(); // the open fails: no half-migrated schema
        }
      };
      opening.onsuccess = () => {
        const opened = opening.result;
        // Another tab wants a newer schema: let it upgrade; the next operation reopens (and finds
        // no usable cache if the schema became newer than this code).
        opened.onversionchange = () => close();
        opened.onclose = () => (db = undefined);
        resolve(opened);
      };
      opening.onerror = () => reject(opening.error);
    }).catch((error: unknown) => {
      onError(error);
      return undefined;
    }));

  /** Runs `work` in one transaction over all stores; failures are reported and read as "nothing cached". */
  const run = async <T>(mode: IDBTransactionMode, work: (store: (name: StoreName) => IDBObjectStore) => Promise<T>): Promise<T | undefined> => {
    try {
      const tx = (await open())?.transaction(stores, mode);
      if (!tx) return undefined;
      const done = new Promise((resolve, reject) => {
        tx.oncomplete = resolve;
        tx.onerror = tx.onabort = () => reject(tx.error);
      });
      const result = await work((store) => tx.objectStore(store));
      await done;
      return result;
    } catch (error) {
      onError(error);
      return undefined;
    }
  };

  // Opened at once, so that opening overlaps the client's connection instead of the first read.
  void open();

  const drop = (key?: string): Promise<void> =>
    run('readwrite', async (store) => {
      for (const name of stores) {
        if (key === undefined) store(name).clear();
        else store(name).delete(name === 'events' ? range(key) : key);
      }
    });

  return {
    async load(key, withEvents) {
      let segments: IDBRequest<string[]> | undefined;
      // run() resolves once the transaction is complete, so `segments` has its result by then.
      const record = await run('readonly', (store) => ((segments = withEvents ? store('events').getAll(range(key)) : undefined), request<StreamRecord | undefined>(store('streams').get(key))));
      if (!record) return undefined;
      void run('readwrite', async (store) => {
        const usage = await request<UsageRecord | undefined>(store('usage').get(key));
        if (usage) store('usage').put({ ...usage, used: now() });
      });
      // States read back from IndexedDB are plain objects: frozen like the ones core builds.
      freezeState(record.state);
      const read = segments;
      return [record, read && (() => unpack(read.result, record.domain, record.pid))];
    },

    save: (next, from, tail, all) =>
      run('readwrite', async (store) => {
        const { key, state, position } = next;
        const events = store('events');
        const old = await request<StreamRecord | undefined>(store('streams').get(key));
        const at = old?.position ?? 0;
        let { segments = 0, eventBytes = 0 } = old ?? {};
        let added: StoredEvent[] | undefined = [];
        /** A segment that replaces all the stored ones. */
        let whole: string | undefined;
        if (old && at >= position) return [at, added]; // nothing newer
        if (old && at >= from) {
          added = tail.filter((event) => event.position > at);
          const json = pack(added);
          eventBytes += json.length;
          if (++segments > MAX_SEGMENTS) whole = join([...(await request<string[]>(events.getAll(range(key)))), json]);
          else if (added[0]) events.put(json, [key, added[0].position]);
        } else if (all) {
          added = undefined;
          whole = pack(all());
          eventBytes = whole.length;
        } else return undefined;
        if (whole) {
          events.delete(range(key));
          events.put(whole, [key, 0]);
          segments = 1;
        }
        store('streams').put({ ...next, segments, eventBytes });
        store('usage').put({ key, bytes: eventBytes + JSON.stringify(state).length, used: now() });
        return [at, added];
      }),

    drop,

    async evict(keep) {
      const usage = (await run('readonly', (store) => request<UsageRecord[]>(store('usage').index('used').getAll()))) ?? [];
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
