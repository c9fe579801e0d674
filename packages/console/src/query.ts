/**
 * Reads from the gateway with a cache for offline: a view shows what it last saw (localStorage)
 * at once, marked stale, then the answer; when the gateway cannot answer it keeps the cached one
 * and says so. Reads run again when the connection opens and, optionally, on an interval. The
 * cache is per gateway and identity (CacheScope, connection.ts): nobody else's answers are shown.
 */
import { createContext, useCallback, useContext, useEffect, useRef, useState } from 'react';
import type { BrowserClient } from '@eventflow/browser';
import { useConnectionState, useEventflowClient } from '@eventflow/browser/react';
import { answersPrefix } from './connection.js';

/** The gateway and identity whose answers are cached (connection.ts `cacheScope`). */
export const CacheScope = createContext('');

export interface QueryView<T> {
  data: T | undefined;
  error: unknown;
  /** Not confirmed by the gateway yet: cached, or the last read failed. */
  stale: boolean;
  /** When `data` was read from the gateway (ms since the epoch). */
  at: number | undefined;
  loading: boolean;
  reload(): void;
}

function cached<T>(key: string): { at: number; data: T } | undefined {
  try {
    const text = localStorage.getItem(key);
    return text ? (JSON.parse(text) as { at: number; data: T }) : undefined;
  } catch {
    return undefined;
  }
}

function remember(key: string, data: unknown): void {
  try {
    localStorage.setItem(key, JSON.stringify({ at: Date.now(), data }));
  } catch {
    // Full or disabled storage: the console works without the offline copy.
  }
}

/**
 * `delayMs`: wait this long after mounting before the first read, so that the reads of the view
 * being opened reach the gateway first (the gateway answers a connection's requests in order).
 */
export function useQuery<T>(name: string, read: (client: BrowserClient) => Promise<T>, { refreshMs, cache = true, delayMs = 0 }: { refreshMs?: number; cache?: boolean; delayMs?: number } = {}): QueryView<T> {
  const key = answersPrefix(useContext(CacheScope)) + name;
  const client = useEventflowClient();
  const connection = useConnectionState();
  const [view, setView] = useState<Omit<QueryView<T>, 'reload'>>(() => {
    const hit = cache ? cached<T>(key) : undefined;
    return { data: hit?.data, at: hit?.at, error: undefined, stale: true, loading: true };
  });
  const latest = useRef(read);
  latest.current = read;
  const generation = useRef(0);

  const run = useCallback(() => {
    const mine = ++generation.current;
    setView((current) => ({ ...current, loading: true }));
    latest
      .current(client)
      .then((data) => {
        if (mine !== generation.current) return;
        if (cache) remember(key, data);
        setView({ data, at: Date.now(), error: undefined, stale: false, loading: false });
      })
      .catch((error: unknown) => {
        if (mine !== generation.current) return;
        setView((current) => ({ ...current, error, stale: true, loading: false }));
      });
  }, [client, key, cache]);

  // A new key shows its own cached copy at once.
  useEffect(() => {
    const hit = cache ? cached<T>(key) : undefined;
    setView({ data: hit?.data, at: hit?.at, error: undefined, stale: true, loading: true });
  }, [key, cache]);

  // At once (a request made while connecting waits for the connection), and again on every reconnection.
  const started = useRef(false);
  useEffect(() => {
    if (started.current && connection !== 'open') return undefined;
    const first = !started.current;
    started.current = true;
    if (!first || delayMs === 0) {
      if (!first || connection === 'open' || client.state !== 'closed') run();
      return undefined;
    }
    const timer = setTimeout(run, delayMs);
    return () => clearTimeout(timer);
  }, [run, connection, delayMs, client]);

  useEffect(() => {
    if (!refreshMs) return undefined;
    const timer = setInterval(() => client.state === 'open' && run(), refreshMs);
    return () => clearInterval(timer);
  }, [run, refreshMs, client]);

  // Disconnected, nothing shown can be confirmed: stale until the next answer.
  return { ...view, stale: view.stale || connection !== 'open', reload: run };
}
