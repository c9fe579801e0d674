/**
 * The console's one browser client: the gateway it was served from (or `?gateway=ws://…`), the
 * token kept in sessionStorage (EVENTFLOW_AUTH=jwt), an IndexedDB cache of its own and the outbox
 * for its actions (publish, schedule), which queues them while the gateway is unreachable.
 */
import { createBrowserClient, type BrowserClient } from '@eventflow/browser';
import { createOutbox } from '@eventflow/browser/outbox';

const TOKEN_KEY = 'eventflow-console:token';

export function storedToken(): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

export function saveToken(token: string | undefined): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** The WebSocket URL of the gateway that served the page: the gateway accepts upgrades on any path. */
export function gatewayUrl(location: Location = window.location): string {
  const given = new URLSearchParams(location.search).get('gateway');
  if (given) return given;
  const url = new URL('/', location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.href;
}

export function connect(url: string, token: string | undefined): BrowserClient {
  return createBrowserClient(url, {
    clientName: 'eventflow-console',
    ...(token ? { token } : {}),
    cache: { name: `eventflow-console ${url}` },
    reconnect: { maxDelay: 3_000 },
    outbox: createOutbox(),
    onError: (error) => console.warn('[console]', error),
  });
}
