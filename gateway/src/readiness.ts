/**
 * `/readyz`: whether this gateway can do its work now, as opposed to `/healthz` (the process is up).
 * Ready when the store answers a cheap query (its head position) within a deadline, can write
 * (after an append, or a write of the delivery ledger, failed because of the store, a write that stores nothing must succeed first:
 * a full disk is not ready while reads still work; SQLite also takes its write lock at each check, store/sqlite/write-check.ts), and the router is ready: the local router always is; the hub router needs at least one hub connection, since
 * without one no published event reaches the mesh. The NATS router without NATS is ready but
 * degraded: its gateway still does everything for its own clients, and a 503 from every gateway
 * while NATS is down would take them all out of a load balancer.
 */
import type { Router } from './router/router.js';
import type { EventStore } from './store/store.js';

export interface Check {
  ready: boolean;
  /** Ready with less than full service (the NATS router without NATS: this gateway's own clients only). */
  degraded?: boolean;
  /** Why not: an error code or a short reason; never an error message that could carry a value. */
  reason?: string;
  [detail: string]: unknown;
}

export interface Readiness {
  ready: boolean;
  /** Present (true) when ready but a check is degraded: `/readyz` still answers 200, with status `degraded`. */
  degraded?: true;
  checks: { store: Check; router: Check };
}

/** A router that reports hub connections (HubRouter). */
interface HubConnections {
  readonly connected: readonly string[];
}

function hasHubConnections(router: Router): router is Router & HubConnections {
  return Array.isArray((router as Partial<HubConnections>).connected);
}

/** Ready hub connections, or undefined for a router without hubs. */
export function hubConnections(router: Router): number | undefined {
  return hasHubConnections(router) ? router.connected.length : undefined;
}

export async function checkReadiness(store: EventStore, router: Router, timeoutMs: number): Promise<Readiness> {
  const [storeCheck, routerCheck] = await Promise.all([checkStore(store, timeoutMs), checkRouter(router)]);
  const ready = storeCheck.ready && routerCheck.ready;
  return { ready, ...(ready && routerCheck.degraded === true && { degraded: true as const }), checks: { store: storeCheck, router: routerCheck } };
}

async function checkStore(store: EventStore, timeoutMs: number): Promise<Check> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<Check>((resolve) => {
    timer = setTimeout(() => resolve({ ready: false, kind: store.kind, reason: `no answer within ${timeoutMs} ms` }), timeoutMs);
  });
  const query = store.head().then(
    () =>
      (store.checkWrites?.() ?? Promise.resolve()).then(
        (): Check => ({ ready: true, kind: store.kind }),
        (error: unknown): Check => ({ ready: false, kind: store.kind, reason: `writes fail: ${errorCode(error)}` }),
      ),
    (error: unknown): Check => ({ ready: false, kind: store.kind, reason: errorCode(error) }),
  );
  try {
    return await Promise.race([query, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function checkRouter(router: Router): Promise<Check> {
  if (router.status) return { kind: router.kind, ...router.status() };
  const hubs = hubConnections(router);
  if (hubs === undefined) return { ready: true, kind: router.kind };
  return hubs > 0 ? { ready: true, kind: router.kind, hubs } : { ready: false, kind: router.kind, hubs, reason: 'no hub connection' };
}

/** The error's code (E_EVENTFLOW_…, ER_…, ECONNREFUSED) and, for a wrapped driver error, its cause's. */
function errorCode(error: unknown): string {
  const code = (value: unknown): string | undefined => {
    const candidate = value !== null && typeof value === 'object' ? (value as { code?: unknown }).code : undefined;
    return typeof candidate === 'string' ? candidate : undefined;
  };
  const own = code(error);
  const cause = error instanceof Error ? code(error.cause) : undefined;
  if (own && cause && cause !== own) return `${own} (${cause})`;
  return own ?? cause ?? (error instanceof Error ? error.name : 'unknown error');
}
