/**
 * The console's one browser client and where it may connect: the gateway it was served from, or
 * one named by `?gateway=ws://…` only after the operator confirmed that target (a link must not
 * send the operator's token to a server of its choosing); the token kept in sessionStorage per
 * gateway (EVENTFLOW_AUTH=jwt); an IndexedDB cache and view answers (query.ts) of their own per
 * gateway and identity, which signing out or switching identity deletes; and the outbox for its
 * actions (publish, schedule), which queues them while the gateway is unreachable.
 */
import { createBrowserClient, type BrowserClient } from '@eventflow/browser';
import { createOutbox, identityOf } from '@eventflow/browser/outbox';

const TOKEN_KEY = 'eventflow-console:token:';
const TRUSTED_KEY = 'eventflow-console:trusted-gateways';

export function storedToken(gateway: string): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY + gateway) ?? undefined;
}

export function saveToken(gateway: string, token: string | undefined): void {
  if (token) sessionStorage.setItem(TOKEN_KEY + gateway, token);
  else sessionStorage.removeItem(TOKEN_KEY + gateway);
}

/** The WebSocket URL of the gateway that served the page: the gateway accepts upgrades on any path. */
export function ownGateway(location: Location = window.location): string {
  const url = new URL('/', location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.href;
}

/** Where the page asks to connect: its own gateway, or `?gateway=` (`problem` when that is not a ws:// or wss:// URL). */
export function requestedGateway(location: Location = window.location): { url: string; own: boolean; problem?: string } {
  const own = ownGateway(location);
  const given = new URLSearchParams(location.search).get('gateway');
  if (!given) return { url: own, own: true };
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return { url: given, own: false, problem: 'not a URL' };
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') return { url: given, own: false, problem: 'not a ws:// or wss:// URL' };
  // The same host, port and security as the page: the page's own gateway, on whatever path.
  return { url: url.href, own: url.host === new URL(own).host && url.protocol === new URL(own).protocol };
}

function trustedGateways(): string[] {
  try {
    const list: unknown = JSON.parse(localStorage.getItem(TRUSTED_KEY) ?? '[]');
    return Array.isArray(list) ? list.filter((item): item is string => typeof item === 'string') : [];
  } catch {
    return [];
  }
}

/** Whether the operator confirmed connecting to `gateway` from this console before. */
export const isTrusted = (gateway: string): boolean => trustedGateways().includes(gateway);

/** Remembers the operator's confirmation of `gateway` (only ever called after it). */
export function trust(gateway: string): void {
  try {
    localStorage.setItem(TRUSTED_KEY, JSON.stringify([...new Set([...trustedGateways(), gateway])]));
  } catch {
    // Storage disabled: the operator is asked again next time.
  }
}

/**
 * What the console's caches of this gateway and identity are named by: view answers in
 * localStorage (query.ts) and the browser client's IndexedDB cache and outbox. Another gateway or
 * another identity (`identityOf` the token: its issuer and subject) never reads them.
 */
export const cacheScope = (gateway: string, token: string | undefined): string => `${gateway} ${identityOf(token)}`;

/** The prefix of the view answers cached in localStorage for a scope. */
export const answersPrefix = (scope: string): string => `eventflow-console:q:${scope}:`;

/** The IndexedDB cache of a scope (its outbox is `eventflow-outbox:` + this). */
const cacheName = (scope: string): string => `eventflow-console ${scope}`;

export function connect(gateway: string, token: string | undefined): BrowserClient {
  return createBrowserClient(gateway, {
    clientName: 'eventflow-console',
    ...(token ? { token } : {}),
    cache: { name: cacheName(cacheScope(gateway, token)) },
    reconnect: { maxDelay: 3_000 },
    outbox: createOutbox(),
    onError: (error) => console.warn('[console]', error),
  });
}

/**
 * Deletes what the console cached for a scope: the view answers and the IndexedDB cache (after
 * `client`, which uses it, is closed). The outbox's queued writes stay: they are sent when the same
 * identity signs in again, and no other identity sees them (packages/browser › The outbox).
 */
export async function forget(scope: string, client: BrowserClient): Promise<void> {
  const prefix = answersPrefix(scope);
  try {
    for (const key of Object.keys(localStorage)) if (key.startsWith(prefix)) localStorage.removeItem(key);
  } catch {
    // Storage disabled: nothing was cached there.
  }
  await client.close().catch(() => undefined);
  await new Promise((resolve) => {
    const request = indexedDB.deleteDatabase(cacheName(scope));
    request.onsuccess = request.onerror = request.onblocked = resolve;
  });
}
