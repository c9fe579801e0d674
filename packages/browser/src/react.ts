/**
 * React bindings (`@eventflow/browser/react`), built on `useSyncExternalStore`. StrictMode-safe by
 * construction: a hook's subscription is its external store's subscribe/unsubscribe pair, which
 * React runs symmetrically, and what it registers lives in the client, which shares it (one watch
 * per eventlog, one gateway subscription per domain and name) and keeps it across an unmount
 * that is followed by a mount.
 */
import { createContext, createElement, useContext, useMemo, useSyncExternalStore, type ReactNode } from 'react';
import { emptyState, invalid, type ConnectionState, type EventMap, type NamespacePattern, type State, type StoredEvent, type Subscription } from '@eventflow/core';
import type { BrowserClient } from './browser-client.js';
import type { OutboxEntry, OutboxRejection } from './outbox-types.js';

const ClientContext = createContext<BrowserClient | undefined>(undefined);

export function EventflowProvider<M extends EventMap>({ client, children }: { client: BrowserClient<M>; children?: ReactNode }): ReactNode {
  return createElement(ClientContext.Provider, { value: client as unknown as BrowserClient }, children);
}

export function useEventflowClient<M extends EventMap = EventMap>(): BrowserClient<M> {
  const client = useContext(ClientContext);
  if (!client) throw invalid('no eventflow client: render inside <EventflowProvider client={…}>');
  return client as unknown as BrowserClient<M>;
}

/**
 * An external store holding `initial` until `start` (run with the context's client while
 * subscribed) sets new values; made anew when the client or `deps` change.
 */
function useStore<T>(initial: T, start: (set: (update: (value: T) => T) => void, client: BrowserClient) => () => void, ...deps: unknown[]): T {
  const client = useEventflowClient();
  const [subscribe, get] = useMemo(() => {
    let value = initial;
    const subscribe = (notify: () => void): (() => void) =>
      start((update) => {
        value = update(value);
        notify();
      }, client);
    return [subscribe, () => value] as const;
  }, [client, ...deps]);
  return useSyncExternalStore(subscribe, get, get);
}

/** `client.subscribe` with either kind of target (its overloads take one kind each). */
interface Subscriber {
  subscribe(domain: string | NamespacePattern, name: string | readonly string[], listener: (event: StoredEvent) => void, options?: { pid?: string; last?: number; after?: number }): Promise<Subscription>;
}

export interface EventlogStateView {
  state: State;
  position: number;
  /** True while it may be behind the gateway (offline or catching up). */
  stale: boolean;
  /** True until the first snapshot (cached or fetched) is known. */
  loading: boolean;
  error: unknown;
  /** Outbox entries applied on top of the confirmed state (queued, or stored but not yet seen). */
  pending: readonly OutboxEntry[];
}

/** The composed state of (domain, pid): the cached one at once, then live. */
export function useEventlogState(domain: string, pid: string): EventlogStateView {
  return useStore<EventlogStateView>(
    { state: emptyState, position: 0, stale: true, loading: true, error: undefined, pending: [] },
    (set, client) =>
      client.watchEventlogState(
        domain,
        pid,
        ({ state, position, stale, pending }) => set(() => ({ state, position, stale, pending, loading: false, error: undefined })),
        (error) => set((view) => ({ ...view, loading: false, error })),
      ),
    domain,
    pid,
  );
}

/**
 * The latest `limit` events of (domain, name), or of every domain a namespace pattern matches
 * (`useSubscription(namespacePattern('prod.>'), ['placed', 'shipped'], { pid: 'order-*' })`):
 * names a name, a list or `*`, `pid` a pid pattern. Safe under StrictMode (one gateway subscription).
 * For a domain, `last` (a count) or `after` (a position) starts with published history
 * (SubscribeOptions of @eventflow/core), also next to other hooks of the same domain (watches share
 * its `*` subscription; each listener still gets the history it asked for).
 */
export function useSubscription(
  domain: string | NamespacePattern,
  name: string | readonly string[],
  { limit = 50, pid, last, after }: { limit?: number; pid?: string; last?: number; after?: number } = {},
): StoredEvent[] {
  // A pattern value may be made anew on every render: its text is the dependency.
  const pattern = typeof domain === 'object' ? domain.pattern : undefined;
  return useStore<StoredEvent[]>(
    [],
    (set, client) => {
      const listener = (event: StoredEvent): void => set((events) => [...events, event].slice(-limit));
      // Refused registrations are reported through the client's onError.
      const options = pattern === undefined ? { last, after } : { pid };
      const subscribed = (client as unknown as Subscriber).subscribe(domain, name, listener, options).catch(() => undefined);
      return () => void subscribed.then((subscription) => subscription?.unsubscribe()).catch(() => undefined);
    },
    pattern ?? domain,
    pattern === undefined, // a domain and a pattern of the same text differ
    typeof name === 'string' ? name : name.join('\u001f'),
    pid,
    limit,
    last,
    after,
  );
}

export function useConnectionState(): ConnectionState {
  const client = useEventflowClient();
  const subscribe = useMemo(() => (notify: () => void) => client.onStateChange(notify), [client]);
  return useSyncExternalStore(subscribe, () => client.state, () => client.state);
}

export interface OutboxView {
  /** Entries not yet acknowledged, oldest first (empty without an outbox). */
  entries: readonly OutboxEntry[];
  /** The latest rejections, oldest first. */
  rejections: readonly OutboxRejection[];
}

const noOutbox: OutboxView = { entries: [], rejections: [] };

/** The client's outbox (`createBrowserClient(url, { outbox: createOutbox() })`), re-rendering on changes. Drop and dismiss through `client.outbox`. */
export function useOutbox(): OutboxView {
  return useStore<OutboxView>(
    noOutbox,
    (set, client) => {
      const { outbox } = client;
      if (!outbox) return () => undefined;
      const read = (): void => set(() => ({ entries: outbox.entries, rejections: outbox.rejections }));
      read();
      return outbox.subscribe(read);
    },
  );
}
