/**
 * What the dashboard reads from its address: the gateway (same host and port as the page, unless
 * `?gateway=ws://…` says otherwise), the domain and the selected process. Selection is written
 * back to the query, so a reload (also offline) shows the same process.
 */
export interface Settings {
  gatewayUrl: string;
  domain: string;
  pid: string | undefined;
}

export const defaultDomain = 'orders';

/** `ws://host:port/` of the page (`wss://` behind https), or the `gateway` query parameter. */
export function gatewayUrlFor(location: Pick<Location, 'protocol' | 'host' | 'search'>): string {
  const override = new URLSearchParams(location.search).get('gateway');
  if (override) return override;
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/`;
}

/**
 * The operator console of the dashboard's gateway: a gateway that serves the dashboard at `/`
 * serves the console at `/console/` (gateway/src/server/sites.ts).
 */
export function consoleUrlFor(gatewayUrl: string): string {
  const url = new URL('/console/', gatewayUrl);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  return url.href;
}

export function readSettings(location: Pick<Location, 'protocol' | 'host' | 'search'>): Settings {
  const params = new URLSearchParams(location.search);
  return {
    gatewayUrl: gatewayUrlFor(location),
    domain: params.get('domain') || defaultDomain,
    pid: params.get('pid') || undefined,
  };
}

/** Replaces `domain` and `pid` in the address bar without a navigation; other parameters stay. */
export function writeSelection(domain: string, pid: string | undefined): void {
  const url = new URL(window.location.href);
  if (domain === defaultDomain) url.searchParams.delete('domain');
  else url.searchParams.set('domain', domain);
  if (pid === undefined) url.searchParams.delete('pid');
  else url.searchParams.set('pid', pid);
  window.history.replaceState(null, '', url);
}
