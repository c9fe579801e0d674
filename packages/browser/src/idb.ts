/**
 * IndexedDB with promises: the three pieces the cache and the outbox use (a request's result, a
 * transaction's completion, opening a database with its upgrade and lifecycle callbacks). The
 * `idb` library did this with typed stores; its proxies and the helpers it installs at import
 * weighed ~1.1 kB of the bundle's gzip, more than the budget could spare. A continuation after
 * `await settled(request)` runs while the transaction is still active (a microtask of the success
 * event), as with `idb`, so a transaction may chain requests across awaits.
 */

/** Resolves with a request's result, rejects with its error. */
export const settled = <T>(request: IDBRequest<T>): Promise<T> =>
  new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });

/** Resolves once a transaction has committed; rejects when it failed or was aborted. */
export const committed = (tx: IDBTransaction): Promise<void> =>
  new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = tx.onabort = () => reject(tx.error ?? new DOMException('AbortError', 'AbortError'));
  });

export interface OpenCallbacks {
  /** In the versionchange transaction, from `oldVersion` (0: a new database). A throw aborts it, and the open fails. */
  upgrade(db: IDBDatabase, oldVersion: number, tx: IDBTransaction): void;
  /** The upgrade waits for connections elsewhere (another tab's) to close. */
  blocked?: () => void;
  /** A connection elsewhere wants to upgrade: this one should close. */
  blocking(): void;
  /** The browser closed the database (storage cleared, say). */
  terminated(): void;
}

/** Opens database `name` at `version`. */
export function openDatabase(name: string, version: number, { upgrade, blocked, blocking, terminated }: OpenCallbacks): Promise<IDBDatabase> {
  const request = indexedDB.open(name, version);
  request.onupgradeneeded = (event) => upgrade(request.result, event.oldVersion, request.transaction!);
  if (blocked) request.onblocked = blocked;
  return settled(request).then((db) => {
    db.onclose = terminated;
    db.onversionchange = blocking;
    return db;
  });
}
