/**
 * The gateway: one HTTP + WebSocket port. `/healthz`, `/readyz`, `/metrics` (EVENTFLOW_METRICS),
 * the demo dashboard at `/` when built, and WebSocket upgrades on any path (from an allowed
 * `Origin`, see EVENTFLOW_ALLOWED_ORIGINS).
 * Transports are accepted through `accept()`, so tests can also attach in-memory transports.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { existsSync } from 'node:fs';
import { generatePid, ListenerSlot, type Transport, type TransportListener } from '@eventflow/core';
import { WebSocketServer, type WebSocket } from 'ws';
import { configSchema, mysqlOptions, parseConfig, storeTarget, type GatewayConfig, type GatewayConfigInput } from '../config.js';
import { Admission, refusalBody } from './admission.js';
import { createAuthenticator } from '../connection/auth.js';
import { Dispatcher } from '../delivery/dispatcher.js';
import { handlers } from '../connection/handlers.js';
import { answerPlain, guardClientErrors, guardRequest, guardUpgrade, refuseUpgrade, requestPath } from './http-guard.js';
import { originAllowed } from '../connection/limits.js';
import { ConditionLog } from '../condition-log.js';
import { createLogger, type LogDestination, type Logger } from '../log.js';
import { noMetrics, PrometheusMetrics } from '../metrics.js';
import { checkReadiness, hubConnections } from '../readiness.js';
import { LocalRouter } from '../router/local.js';
import type { Router } from '../router/router.js';
import { Scheduler } from '../delivery/scheduler.js';
import { throttleReceiving } from './receive-budget.js';
import { BINARY_FRAME, Session } from '../connection/session.js';
import { serveStatic } from './static.js';
import { listenFailed, storeUnavailable } from '../startup-failure.js';
import { SqliteStore } from '../store/sqlite/sqlite.js';
import type { EventStore } from '../store/store.js';

export interface Gateway {
  readonly id: string;
  readonly config: GatewayConfig;
  readonly port: number;
  /** `ws://host:port/` for clients. */
  readonly url: string;
  readonly httpUrl: string;
  /** The store and router as given or made (not the metrics decorators the gateway calls through). */
  readonly store: EventStore;
  readonly router: Router;
  readonly dispatcher: Dispatcher;
  /** Attaches a transport (e.g. one end of createMemoryPair()) as a client connection. */
  accept(transport: Transport): Session;
  /** Stops accepting, closes every connection with 1001, and closes the store. */
  close(): Promise<void>;
}

export interface GatewayDependencies {
  store?: EventStore;
  router?: Router;
  logger?: Logger;
  /** Where the gateway's log lines go (default stderr), at EVENTFLOW_LOG_LEVEL; ignored with `logger`. */
  logDestination?: LogDestination;
  /** Called with a start-up failure before it is logged: the bin prints its line for a person first. */
  onStartFailure?: (error: unknown) => void;
}

/** After the gateway sends a close frame, how long it waits for the client's before it drops the socket. */
export const CLOSE_GRACE_MS = 1_000;

class WsTransport implements Transport {
  readonly #socket: WebSocket;
  /** The upgraded TCP socket under `#socket`, corked while frames are being sent in one tick. */
  readonly #raw: Duplex | undefined;
  #corked = false;
  readonly #slot = new ListenerSlot();

  /** `receiveRate`: EVENTFLOW_MAX_RECEIVE_RATE (0 = unlimited), see receive-budget.ts. */
  constructor(socket: WebSocket, raw?: Duplex, receiveRate = 0) {
    this.#socket = socket;
    this.#raw = raw;
    const throttle = receiveRate > 0 ? throttleReceiving(socket, receiveRate) : undefined;
    socket.on('message', (data, isBinary) => {
      throttle?.received(Array.isArray(data) ? data.reduce((sum, part) => sum + part.length, 0) : data.byteLength);
      // Binary frames are not part of the protocol; hand them on as a marker so they get a coded error.
      this.#slot.message(isBinary ? BINARY_FRAME : data.toString());
    });
    socket.on('close', (code, reason) => {
      throttle?.stop();
      this.#slot.close(code, reason.toString());
    });
    socket.on('error', () => undefined); // always followed by 'close'
  }

  send(frame: string): void {
    if (this.#socket.readyState !== this.#socket.OPEN) return;
    // Frames sent in the same tick (a fan-out page, a replay page) leave in one write instead of
    // one system call each, which is what a fan-out to many connections spends most time on.
    if (this.#raw && !this.#corked) {
      this.#corked = true;
      this.#raw.cork();
      process.nextTick(() => {
        this.#corked = false;
        this.#raw?.uncork();
      });
    }
    this.#socket.send(frame);
  }

  close(code = 1000, reason = ''): void {
    if (this.#socket.readyState !== this.#socket.OPEN && this.#socket.readyState !== this.#socket.CONNECTING) return;
    this.#socket.close(code, reason);
    // ws waits up to 30 s for the client's close frame; a client that never sends it must not keep
    // the socket (and what it sends meanwhile) for that long.
    const grace = setTimeout(() => this.#socket.terminate(), CLOSE_GRACE_MS);
    grace.unref();
    this.#socket.once('close', () => clearTimeout(grace));
  }

  listen(listener: TransportListener): void {
    this.#slot.attach(listener);
  }

  get bufferedAmount(): number {
    return this.#socket.bufferedAmount;
  }
}

/** Environment-style settings: typed keys, or raw strings as they come from process.env. */
export type GatewaySettings = GatewayConfigInput | Record<string, string | number | undefined>;

/**
 * Starts a gateway. `config` takes the same keys as the environment (EVENTFLOW_PORT, …) and is
 * validated like it: a bad value rejects with E_EVENTFLOW_CONFIG naming the variable.
 */
export async function startGateway(config: GatewaySettings = {}, dependencies: GatewayDependencies = {}): Promise<Gateway> {
  let settings: GatewayConfig;
  try {
    settings = parseConfig(config as Record<string, string | number | undefined>);
  } catch (error) {
    dependencies.onStartFailure?.(error);
    // The message names the variables, and the values of those that are not secrets.
    startupLogger(config, dependencies).error('gateway not started: invalid configuration', { error });
    throw error;
  }
  const id = settings.EVENTFLOW_GATEWAY_ID ?? `${generatePid().toUpperCase()}.${settings.EVENTFLOW_SPOKE_NAME.toUpperCase()}`;
  const log = (dependencies.logger ?? createLogger(settings.EVENTFLOW_LOG_LEVEL, {}, dependencies.logDestination)).child({ gateway: id });
  try {
    return await start(id, settings, config, dependencies, log);
  } catch (error) {
    dependencies.onStartFailure?.(error);
    log.error('gateway not started', { error });
    throw error;
  }
}

/** Logs a configuration that could not be parsed: at its EVENTFLOW_LOG_LEVEL when that one is valid. */
function startupLogger(config: GatewaySettings, dependencies: GatewayDependencies): Logger {
  if (dependencies.logger) return dependencies.logger;
  const level = configSchema.shape.EVENTFLOW_LOG_LEVEL.safeParse((config as Record<string, unknown>).EVENTFLOW_LOG_LEVEL);
  return createLogger(level.success ? level.data : 'info', {}, dependencies.logDestination);
}

async function start(id: string, settings: GatewayConfig, config: GatewaySettings, dependencies: GatewayDependencies, log: Logger): Promise<Gateway> {
  const auth = createAuthenticator({
    mode: settings.EVENTFLOW_AUTH,
    secret: settings.EVENTFLOW_JWT_SECRET,
    publicKey: settings.EVENTFLOW_JWT_PUBLIC_KEY,
    issuer: settings.EVENTFLOW_JWT_ISSUER,
    audience: settings.EVENTFLOW_JWT_AUDIENCE,
    anonymous: settings.EVENTFLOW_AUTH_ANONYMOUS,
    maxLifetimeS: settings.EVENTFLOW_JWT_MAX_LIFETIME_S,
  });
  const sessions = new Set<Session>();
  const prometheus =
    settings.EVENTFLOW_METRICS === 'on'
      ? new PrometheusMetrics({
          connections: () => sessions.size,
          registrations: () => {
            const counts = { subscriptions: 0, consumers: 0, waits: 0 };
            for (const session of sessions) {
              counts.subscriptions += session.subscriptions.size;
              counts.consumers += session.consumers.size;
              counts.waits += session.waits.size;
            }
            return counts;
          },
        })
      : undefined;
  const metrics = prometheus ?? noMetrics;
  const givenStore =
    dependencies.store ??
    // mysql2 is loaded only for a MySQL store: the embedded default starts without it.
    (settings.EVENTFLOW_STORE === 'mysql'
      ? new (await import('../store/mysql/mysql.js')).MysqlStore(mysqlOptions(settings))
      : new SqliteStore({ path: settings.EVENTFLOW_SQLITE_PATH }));
  const store = prometheus ? prometheus.measureStore(givenStore) : givenStore;
  try {
    await store.init();
  } catch (error) {
    // A store made from the settings: say which of them to change.
    throw dependencies.store ? error : storeUnavailable(error, storeTarget(settings));
  }
  // The v4 wing (hub router, certificates, @peculiar/x509) is loaded only when configured: the common path starts without it.
  const mesh = dependencies.router || settings.EVENTFLOW_ROUTER === 'local' ? undefined : await (await import('../v4/mesh.js')).joinMesh(settings, config, store, id, log);
  const givenRouter = dependencies.router ?? mesh?.router ?? new LocalRouter(store, id);
  const router = prometheus ? prometheus.measureRouter(givenRouter) : givenRouter;
  if (prometheus && hubConnections(givenRouter) !== undefined) prometheus.watchHubs(() => hubConnections(givenRouter) ?? 0);
  const dispatcher = new Dispatcher(store, router, id, log, {
    leaseMs: settings.EVENTFLOW_CONSUME_LEASE_MS,
    maxAttempts: settings.EVENTFLOW_CONSUME_MAX_ATTEMPTS,
    metrics,
  });
  await dispatcher.start();
  await router.start(dispatcher);
  const scheduler = new Scheduler({
    store,
    fire: async (event) => {
      await router.publish(event);
      return true;
    },
    log: (message, error) => log.error(message, { error }),
    // Events scheduled through this gateway re-arm the timer at once; the poll finds other processes'.
    pollMs: 30_000,
  });
  scheduler.start();

  const admission = new Admission({
    maxConnections: settings.EVENTFLOW_MAX_CONNECTIONS,
    maxUnauthenticated: settings.EVENTFLOW_AUTH === 'jwt' ? settings.EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS : undefined,
  });
  let nextSession = 1;
  let nextHttpRequest = 1;
  /** The last /readyz answer (a gateway starts ready: a first 503 is logged, a first 200 is not). */
  let wasReady = true;
  let closing: Promise<void> | undefined;
  const context = {
    gatewayId: id,
    store,
    router,
    dispatcher,
    log,
    metrics,
    maxFrameBytes: settings.EVENTFLOW_MAX_FRAME_BYTES,
    maxBufferedBytes: settings.EVENTFLOW_MAX_BUFFERED_BYTES,
    maxParkedBytes: settings.EVENTFLOW_MAX_PARKED_BYTES,
    handshakeTimeout: settings.EVENTFLOW_HANDSHAKE_TIMEOUT_MS,
    limits: {
      maxSubscriptions: settings.EVENTFLOW_MAX_SUBSCRIPTIONS,
      maxInFlight: settings.EVENTFLOW_MAX_IN_FLIGHT,
      maxPublishRate: settings.EVENTFLOW_MAX_PUBLISH_RATE,
      maxDataKeys: settings.EVENTFLOW_MAX_DATA_KEYS,
      maxDataDepth: settings.EVENTFLOW_MAX_DATA_DEPTH,
    },
    // Anonymous rights make anonymous connections intended: then only their number is bounded.
    authTimeout: settings.EVENTFLOW_AUTH === 'jwt' && settings.EVENTFLOW_AUTH_ANONYMOUS.length === 0 ? settings.EVENTFLOW_AUTH_TIMEOUT_MS : 0,
    admission,
    auth,
    scheduled: (at: Date) => scheduler.scheduled(at),
  };
  const accept = (transport: Transport): Session => {
    const session = new Session(`${nextSession++}`, transport, context, handlers);
    sessions.add(session);
    admission.opened(session);
    void session.closed.then(() => {
      sessions.delete(session);
      admission.closed(session);
    });
    return session;
  };

  const demoDir = settings.EVENTFLOW_DEMO_DIR;
  // Every handler runs behind a guard (http-guard.ts): nothing a request carries can end the process.
  const http: Server = createServer(guardRequest(log, (request, response) => handleHttp(request, response, demoDir && existsSync(demoDir) ? demoDir : undefined)));
  guardClientErrors(http, log);
  // No permessage-deflate (also ws's default): zlib per connection costs ~hundreds of kB and CPU per frame.
  const wss = new WebSocketServer({ noServer: true, maxPayload: settings.EVENTFLOW_MAX_FRAME_BYTES, perMessageDeflate: false });
  wss.on('connection', (socket: WebSocket, _request: IncomingMessage, raw?: Duplex) => {
    try {
      accept(new WsTransport(socket, raw, settings.EVENTFLOW_MAX_RECEIVE_RATE));
    } catch (error) {
      log.error('could not set up a connection', { error });
      socket.terminate();
    }
  });
  wss.on('error', (error) => log.error('websocket server error', { error }));
  // Refused upgrades have no connection yet: one line for the first, then counts (a page reloading in a loop, a scanner).
  const upgradeLog = new ConditionLog(log);
  http.on(
    'upgrade',
    guardUpgrade(log, (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      const origin = request.headers.origin;
      if (!originAllowed(origin, settings.EVENTFLOW_ALLOWED_ORIGINS)) {
        // A browser page from elsewhere must not use the gateway with its visitor's network access.
        upgradeLog.note('origin refused', 'warn', 'websocket upgrade refused: origin not allowed (see EVENTFLOW_ALLOWED_ORIGINS)', { origin, remote: request.socket.remoteAddress });
        refuseUpgrade(socket, 403, 'origin not allowed\n');
        return;
      }
      const full = admission.refusal();
      if (full) {
        upgradeLog.note('connection limit', 'warn', 'websocket upgrade refused: connection limit reached', { limit: full.details?.['limit'], open: admission.open, unauthenticated: admission.unauthenticated });
        refuseUpgrade(socket, 503, refusalBody(full), 'application/json', 'Retry-After: 1\r\n');
        return;
      }
      if (admission.makeRoom() > 0) log.debug('oldest unauthenticated connection closed to make room (EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS)');
      // The request-target is not read: upgrades are accepted on any path.
      wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request, socket));
    }),
  );

  await new Promise<void>((resolve, reject) => {
    const failed = (error: Error): void => reject(listenFailed(error, settings.EVENTFLOW_HOST, settings.EVENTFLOW_PORT));
    http.once('error', failed);
    http.listen(settings.EVENTFLOW_PORT, settings.EVENTFLOW_HOST, () => {
      http.off('error', failed);
      resolve();
    });
  });
  const address = http.address();
  const port = typeof address === 'object' && address ? address.port : settings.EVENTFLOW_PORT;
  const host = settings.EVENTFLOW_HOST.includes(':') ? `[${settings.EVENTFLOW_HOST}]` : settings.EVENTFLOW_HOST;
  log.info('gateway listening', { url: `http://${host}:${port}/`, store: store.kind, router: router.kind, metrics: settings.EVENTFLOW_METRICS });

  return {
    id,
    config: settings,
    port,
    url: `ws://${host}:${port}/`,
    httpUrl: `http://${host}:${port}/`,
    store: givenStore,
    router: givenRouter,
    dispatcher,
    accept,
    close: () =>
      (closing ??= (async () => {
        log.info('gateway stopping', { connections: sessions.size });
        await scheduler.stop();
        dispatcher.stop();
        for (const client of wss.clients) client.close(1001, 'gateway shutting down');
        for (const session of sessions) session.close(1001, 'gateway shutting down');
        await new Promise<void>((resolve) => wss.close(() => resolve()));
        await new Promise<void>((resolve) => {
          http.close(() => resolve());
          http.closeAllConnections();
        });
        await router.close();
        await mesh?.pool.end();
        await store.close();
        upgradeLog.flush();
        log.info('gateway stopped');
      })()),
  };

  function handleHttp(request: IncomingMessage, response: ServerResponse, demo: string | undefined): Promise<void> | undefined {
    // The path only: a query string may carry a token.
    const pathname = requestPath(request.url);
    const requestLog = log.child({ request: `http-${nextHttpRequest++}` });
    if (pathname === undefined) {
      requestLog.debug('http request refused: the target is not a URL', { method: request.method });
      answerPlain(response, 400, 'bad request: the request-target is not a valid URL\n');
      return;
    }
    requestLog.debug('http request', { method: request.method, path: pathname });
    if (pathname === '/healthz') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', gateway: id }));
      return;
    }
    if (pathname === '/readyz') return readiness(response, requestLog);
    if (pathname === '/metrics' && prometheus) return scrape(prometheus, response, requestLog);
    if (demo && (request.method === 'GET' || request.method === 'HEAD')) {
      serveStatic(demo, pathname, request, response);
      return;
    }
    if (pathname === '/') {
      response
        .writeHead(200, { 'content-type': 'text/plain; charset=utf-8' })
        .end(`eventflow gateway ${id}\nConnect a client to ws://${request.headers.host ?? 'this host'}/\n`);
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  }

  /** `/readyz`: 200 when the store answers and the router is ready, else 503 saying what is not. */
  async function readiness(response: ServerResponse, requestLog: Logger): Promise<void> {
    const result = closing
      ? { ready: false, checks: { gateway: { ready: false, reason: 'shutting down' } } }
      : await checkReadiness(store, givenRouter, settings.EVENTFLOW_READY_TIMEOUT_MS);
    if (result.ready !== wasReady) {
      // Probes come every few seconds: log the changes, not every answer.
      if (result.ready) requestLog.info('gateway ready', { checks: result.checks });
      else requestLog.warn('gateway not ready', { checks: result.checks });
      wasReady = result.ready;
    }
    response
      .writeHead(result.ready ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' })
      .end(JSON.stringify({ status: result.ready ? 'ready' : 'not ready', gateway: id, ...result }));
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
