/**
 * Keeps the tabs of one origin (and several clients of one page) coherent over the cache: a
 * BroadcastChannel named after the IndexedDB database carries appended events and invalidations,
 * so receivers update their live views from the message, without refetching.
 */
import type { StoredEvent } from '@eventflow/core';

export type CacheMessage =
  /** Events stored for eventlog `key`: the stored copy went from position `from` to the last of `events`. */
  | { type: 'append'; key: string; from: number; events: StoredEvent[] }
  /** Eventlog `key` was rewritten in full (reload it from IndexedDB). */
  | { type: 'rewrite'; key: string }
  /** Events of eventlog `key` were deleted: refetch it. */
  | { type: 'invalidate'; key: string }
  /** The whole cache was cleared (what is held in memory stays valid). */
  | { type: 'clear' };

export interface Channel<T> {
  /** Posts to the other tabs (nothing once closed). */
  post(message: T): void;
  close(): void;
}

export type CacheChannel = Channel<CacheMessage>;

/** The BroadcastChannel `name` (`eventflow-cache:<cache name>`, `eventflow-outbox:…`); undefined where there is none. */
export const openChannel = <T>(name: string, receive: (message: T) => void): Channel<T> | undefined => {
  if (typeof BroadcastChannel === 'undefined') return undefined;
  const channel = new BroadcastChannel(name);
  let open = true;
  channel.onmessage = (message: MessageEvent<T>) => receive(message.data);
  return {
    post: (message) => open && channel.postMessage(message),
    close: () => {
      open = false;
      channel.close();
    },
  };
};
