/**
 * The gateway's HTTP routes: `/healthz`, `/readyz`, `/metrics` (EVENTFLOW_METRICS), the console
 * and the demo dashboard when built (sites.ts), a plain answer at `/` otherwise, 404 for the rest. WebSocket
 * upgrades are not requests: gateway.ts takes them. Every route answers only a `Host` the gateway
 * is known by (EVENTFLOW_ALLOWED_HOSTS, connection/limits.ts): 421 for others.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../log.js';
import type { PrometheusMetrics } from '../metrics.js';
import { checkReadiness } from '../readiness.js';
import type { Router } from '../router/router.js';
import type { EventStore } from '../store/store.js';
import { hostAllowed } from '../connection/limits.js';
import { ConditionLog } from '../condition-log.js';
import { answerPlain, requestPath } from './http-guard.js';
import { serveSite, type Sites } from './sites.js';

export interface HttpRoutes {
  readonly id: string;
  readonly log: Logger;
  readonly store: EventStore;
  /** The router as given or made (readiness asks it, not its metrics decorator). */
  readonly router: Router;
  readonly prometheus: PrometheusMetrics | undefined;
  readonly readyTimeoutMs: number;
  /** EVENTFLOW_ALLOWED_HOSTS (undefined: the default) and EVENTFLOW_HOST. */
  readonly allowedHosts: readonly string[] | undefined;
  readonly listenHost: string;
  /** Whether the gateway is shutting down (then /readyz answers 503). */
  closing(): boolean;
}

export type HttpHandler = (request: IncomingMessage, response: ServerResponse, sites: Sites) => Promise<void> | undefined;

export function httpHandler(routes: HttpRoutes): HttpHandler {
  const { id, log, store, router, prometheus } = routes;
  let nextHttpRequest = 1;
  /** The last /readyz status (a gateway starts ready: a first 503 or degraded is logged, a first ready is not). */
  let was = 'ready';
  // A page retrying in a loop: one line, then counts.
  const refusals = new ConditionLog(log);

  return function handleHttp(request, response, sites) {
    // The path only: a query string may carry a token.
    const pathname = requestPath(request.url);
    const requestLog = log.child({ request: `http-${nextHttpRequest++}` });
    if (pathname === undefined) {
      requestLog.debug('http request refused: the target is not a URL', { method: request.method });
      answerPlain(response, 400, 'bad request: the request-target is not a valid URL\n');
      return;
    }
    if (!hostAllowed(request.headers.host, routes.allowedHosts, routes.listenHost)) {
      refusals.note('host refused', 'warn', 'http request refused: Host not allowed (see EVENTFLOW_ALLOWED_HOSTS)', { host: request.headers.host, remote: request.socket.remoteAddress });
      answerPlain(response, 421, 'misdirected request: this gateway does not answer to this Host name; add it to EVENTFLOW_ALLOWED_HOSTS if it is the gateway\'s\n');
      return;
    }
    requestLog.debug('http request', { method: request.method, path: pathname });
    if (pathname === '/healthz') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', gateway: id }));
      return;
    }
    if (pathname === '/readyz') return readiness(response, requestLog);
    if (pathname === '/metrics' && prometheus) return scrape(prometheus, response, requestLog);
    if (serveSite(sites, pathname, request, response)) return;
    if (pathname === '/') {
      response
        .writeHead(200, { 'content-type': 'text/plain; charset=utf-8' })
        .end(`eventflow gateway ${id}\nConnect a client to ws://${request.headers.host ?? 'this host'}/\n`);
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  };

  /** `/readyz`: 200 when the store answers and the router is ready (status `degraded` when it serves only its own clients), else 503 saying what is not. */
  async function readiness(response: ServerResponse, requestLog: Logger): Promise<void> {
    const result = routes.closing()
      ? { ready: false, checks: { gateway: { ready: false, reason: 'shutting down' } } }
      : await checkReadiness(store, router, routes.readyTimeoutMs);
    const status = !result.ready ? 'not ready' : 'degraded' in result && result.degraded ? 'degraded' : 'ready';
    if (status !== was) {
      // Probes come every few seconds: log the changes, not every answer.
      if (status === 'ready') requestLog.info('gateway ready', { checks: result.checks });
      else requestLog.warn(`gateway ${status}`, { checks: result.checks });
      was = status;
    }
    response
      .writeHead(result.ready ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' })
      .end(JSON.stringify({ status, gateway: id, ...result }));
  }
}

/** `/metrics`: the Prometheus text format. */
async function scrape(prometheus: PrometheusMetrics, response: ServerResponse, log: Logger): Promise<void> {
  try {
    const body = await prometheus.text();
    response.writeHead(200, { 'content-type': prometheus.contentType }).end(body);
  } catch (error) {
    log.error('could not collect metrics', { error });
    response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n');
  }
}
