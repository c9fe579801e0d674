/**
 * Where the outbox keeps its entries: a database of its own (`eventflow-outbox:<cache name>`, so
 * the cache's schema and its "drop and refetch" migrations never touch writes that exist nowhere
 * else), one store keyed by an auto-incremented `seq`, which orders entries across tabs. Without
 * IndexedDB there is no store: the outbox keeps its entries in memory (not durable) for the page's life.
 */
import { committed, openDatabase, settled } from './idb.js';
import type { OutboxEntry } from './outbox-types.js';

/** The schema version; a change adds a step to `upgrade` (entries must be converted, never dropped). */
export const OUTBOX_VERSION = 1;

export interface OutboxStore {
  all(): Promise<OutboxEntry[]>;
  /** Adds an entry and resolves with its `seq`. */
  add(entry: Omit<OutboxEntry, 'seq'>): Promise<number>;
  /** Deletes an entry (nothing when another tab settled or dropped it first). */
  delete(seq: number): Promise<void>;
  close(): void;
}

/** The store of database `name` (`eventflow-outbox:<cache name>`). */
export function openOutboxStore(name: string): OutboxStore | undefined {
  if (typeof indexedDB === 'undefined') return undefined;
  let db: Promise<IDBDatabase> | undefined;
  const close = (): void => {
    void db?.then((open) => open.close(), () => undefined);
    db = undefined;
  };
  const open = (): Promise<IDBDatabase> =>
    (db ??= openDatabase(name, OUTBOX_VERSION, {
      upgrade: (opened) => void opened.createObjectStore('entries', { keyPath: 'seq', autoIncrement: true }),
      // Let a newer release upgrade, and reopen after the browser closed it; unlike the cache,
      // failures are not swallowed: a write that cannot be queued must fail its publish.
      blocking: close,
      terminated: close,
    })).catch((error: unknown) => {
      db = undefined;
      throw error;
    });
  /** One request in a transaction of its own; a write resolves once it is committed. */
  const run = async <T>(write: boolean, request: (store: IDBObjectStore) => IDBRequest): Promise<T> => {
    const tx = (await open()).transaction('entries', write ? 'readwrite' : 'readonly');
    return (await Promise.all([settled(request(tx.objectStore('entries'))), write && committed(tx)]))[0] as T;
  };
  return {
    all: () => run(false, (store) => store.getAll()),
    add: (entry) => run(true, (store) => store.add(entry)),
    delete: (seq) => run(true, (store) => store.delete(seq)),
    close,
  };
}
