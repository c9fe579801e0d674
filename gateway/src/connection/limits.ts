/**
 * What one connection may use of the gateway, and which browser pages may reach it at all: the
 * per-connection limits (registrations, requests in flight, publish rate), the `Origin` check of
 * WebSocket upgrades and the `Host` check of HTTP requests. A breached limit is answered with a coded error frame for
 * that request; the connection stays open and nothing is done or stored.
 */
import { EventflowError } from '@eventflow/core';

/** Per-connection limits, from EVENTFLOW_MAX_SUBSCRIPTIONS, EVENTFLOW_MAX_IN_FLIGHT and EVENTFLOW_MAX_PUBLISH_RATE. */
export interface ConnectionLimits {
  /** Subscriptions + consumers + waits registered on one connection. */
  readonly maxSubscriptions: number;
  /** Requests received and not answered yet. */
  readonly maxInFlight: number;
  /** publish/persist/schedule requests per second (token bucket, burst = the rate); 0 = unlimited. */
  readonly maxPublishRate: number;
  /** Values in one event's data (EVENTFLOW_MAX_DATA_KEYS, data-shape.ts). */
  readonly maxDataKeys: number;
  /** Nesting depth of one event's data (EVENTFLOW_MAX_DATA_DEPTH, data-shape.ts). */
  readonly maxDataDepth: number;
  /** Consumer groups one connection may register consumers in over its life (EVENTFLOW_MAX_GROUPS_PER_CONNECTION). */
  readonly maxGroups: number;
}

/** `E_EVENTFLOW_LIMIT_EXCEEDED`, naming the variable that sets the limit and its value. */
export function limitExceeded(variable: string, value: number, message: string): EventflowError {
  return new EventflowError('E_EVENTFLOW_LIMIT_EXCEEDED', `${message} (${variable}=${value})`, { details: { limit: variable, value } });
}

/** `E_EVENTFLOW_RATE_LIMITED`: retrying after `retryAfterMs` succeeds unless others spend the tokens first. */
export function rateLimited(op: string, rate: number, retryAfterMs: number): EventflowError {
  return new EventflowError(
    'E_EVENTFLOW_RATE_LIMITED',
    `${op}: this connection writes more than ${rate} events per second (EVENTFLOW_MAX_PUBLISH_RATE=${rate}); retry in ${retryAfterMs} ms`,
    { details: { limit: 'EVENTFLOW_MAX_PUBLISH_RATE', value: rate, retryAfterMs } },
  );
}

/**
 * A token bucket holding at most `rate` tokens (the burst) and refilled continuously at `rate`
 * tokens per second. `take` refuses when no whole token is left (the publish rate); `spend` may go
 * into debt, for what has already happened and must be paid back (the receive budget's bytes).
 */
/** One clock for every bucket: a default of `() => performance.now()` would be a function per connection. */
const monotonicNow = (): number => performance.now();

export class TokenBucket {
  readonly rate: number;
  readonly #now: () => number;
  #tokens: number;
  #last: number;

  constructor(rate: number, now: () => number = monotonicNow) {
    if (!(rate > 0)) throw new RangeError('a token bucket needs a positive rate');
    this.rate = rate;
    this.#now = now;
    this.#tokens = rate;
    this.#last = now();
  }

  /** Takes one token: 0 when taken, otherwise the milliseconds (≥ 1) until one is available. */
  take(): number {
    this.#refill();
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return 0;
    }
    return this.#until(1);
  }

  /** Spends `amount` even beyond what is left: 0 while the bucket is not in debt, else the milliseconds until the debt is paid. */
  spend(amount: number): number {
    this.#refill();
    this.#tokens -= amount;
    return this.#tokens >= 0 ? 0 : this.#until(0);
  }

  #refill(): void {
    const now = this.#now();
    this.#tokens = Math.min(this.rate, this.#tokens + ((now - this.#last) / 1000) * this.rate);
    this.#last = now;
  }

  /** Milliseconds (≥ 1) until the bucket holds `level` tokens. */
  #until(level: number): number {
    return Math.max(1, Math.ceil(((level - this.#tokens) / this.rate) * 1000));
  }
}

// ── Origin ──

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** An EVENTFLOW_HOST only this machine can reach (127.0.0.0/8, ::1, localhost). */
export const isLoopbackHost = (host: string): boolean => /^(127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost)$/i.test(host);

/** `http(s)://localhost`, `127.0.0.1` or `[::1]`, any port, exactly as a browser sends it. */
export function isLoopbackOrigin(origin: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && LOOPBACK_HOSTS.has(url.hostname) && url.origin === origin;
}

/**
 * Whether a WebSocket upgrade with this `Origin` header may proceed. Without the header (not a
 * browser) always; with `allowed` unset only loopback pages; otherwise an exact match or `*`.
 */
export function originAllowed(origin: string | undefined, allowed: readonly string[] | undefined): boolean {
  if (origin === undefined) return true;
  if (allowed === undefined) return isLoopbackOrigin(origin);
  return allowed.includes('*') || allowed.includes(origin);
}

/**
 * A page the gateway served itself (the console, the demo dashboard) opening its WebSocket: its Origin is the upgrade's
 * own Host. With EVENTFLOW_HOST=0.0.0.0 such a page is at the machine's address, not a loopback one, and was refused.
 * Only as safe as the Host: the caller checks it as for HTTP routes (hostAllowed), so that a page of another site whose
 * name is rebound to the gateway's address is not taken for one.
 */
export function servedHere(origin: string | undefined, host: string | undefined): boolean {
  if (origin === undefined || host === undefined || !/^https?:\/\//.test(origin)) return false;
  try {
    return new URL(origin).host === host.trim().toLowerCase();
  } catch {
    return false;
  }
}

/**
 * EVENTFLOW_ALLOWED_ORIGINS: comma-separated `*` or origins written exactly as browsers send them
 * (`scheme://host[:port]`, lowercase, no default port, no path or trailing slash).
 */
export function parseAllowedOrigins(value: string): { origins: string[] } | { problem: string } {
  const origins = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  if (origins.length === 0) return { problem: 'lists no origin; leave it unset for the default, or use * to allow any' };
  for (const origin of origins) {
    if (origin === '*') continue;
    if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]+$/.test(origin) || !sameAsBrowsersSend(origin)) {
      return {
        problem: `"${origin}" is not an origin as browsers send it: scheme://host[:port] in lowercase, without default port, path or trailing slash (e.g. https://app.example.com), or *`,
      };
    }
  }
  return { origins };
}

function sameAsBrowsersSend(origin: string): boolean {
  if (!origin.startsWith('http://') && !origin.startsWith('https://')) return true;
  try {
    return new URL(origin).origin === origin;
  } catch {
    return false;
  }
}

// ── Host ──

/**
 * A `Host` header's name without its port, lowercase: `[::1]` stays bracketed. Undefined when the
 * header is not a host[:port] at all.
 */
export function hostName(header: string): string | undefined {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/@]+)(?::\d*)?$/.exec(header.trim());
  return match?.[1]?.toLowerCase().replace(/\.$/, '');
}

/** An IPv4 or a bracketed IPv6 literal: a name no DNS answer can stand behind. */
function isAddress(name: string): boolean {
  if (name.startsWith('[')) return true;
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(name);
}

/**
 * Whether an HTTP request with this `Host` header may be answered. DNS rebinding makes a page of
 * another site reach the gateway under that site's name, so the name is what is checked: by default
 * loopback names, IP addresses (a page at an address cannot be rebound) and the configured
 * EVENTFLOW_HOST; with `allowed`, those names only (`*`: any). No header (HTTP/1.0, not a browser): allowed.
 */
export function hostAllowed(header: string | undefined, allowed: readonly string[] | undefined, listenHost: string): boolean {
  if (header === undefined) return true;
  const name = hostName(header);
  if (name === undefined) return false;
  if (allowed !== undefined) return allowed.includes('*') || allowed.includes(name);
  return LOOPBACK_HOSTS.has(name) || name.endsWith('.localhost') || isAddress(name) || name === listenHost.toLowerCase();
}

/** EVENTFLOW_ALLOWED_HOSTS: comma-separated host names (no scheme, port or path), or `*`. */
export function parseAllowedHosts(value: string): { hosts: string[] } | { problem: string } {
  const hosts = value
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== '');
  if (hosts.length === 0) return { problem: 'lists no host; leave it unset for the default, or use * to allow any' };
  for (const host of hosts) {
    if (host !== '*' && hostName(host) !== host) {
      return { problem: `"${host}" is not a host name: write it without scheme, port or path (e.g. gateway.example.com, [::1]), or *` };
    }
  }
  return { hosts };
}
