/**
 * The gateway: one HTTP + WebSocket port. `/healthz`, the demo dashboard at `/` when built, and
 * WebSocket upgrades on any path (from an allowed `Origin`, see EVENTFLOW_ALLOWED_ORIGINS).
 * Transports are accepted through `accept()`, so tests can also attach in-memory transports.
 */
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { existsSync } from 'node:fs';
import { generatePid, ListenerSlot, type Transport, type TransportListener } from '@eventflow/core';
import { WebSocketServer, type WebSocket } from 'ws';
import { mysqlOptions, parseConfig, type GatewayConfig, type GatewayConfigInput } from './config.js';
import { createAuthenticator } from './auth.js';
import { Dispatcher } from './dispatcher.js';
import { handlers } from './handlers.js';
import { originAllowed } from './limits.js';
import { createLogger, type Logger } from './log.js';
import { LocalRouter } from './router/local.js';
import { HubRouter } from './router/hubs.js';
import { CertificateManager } from './hub/certificates.js';
import { certificateConfigFromEnv } from './hub/certificate-config.js';
import { createPool, type Pool } from 'mysql2/promise';
import type { Router } from './router/router.js';
import { Scheduler } from './scheduler.js';
import { BINARY_FRAME, Session } from './session.js';
import { serveStatic } from './static.js';
import { MysqlStore } from './store/mysql.js';
import { SqliteStore } from './store/sqlite.js';
import type { EventStore } from './store/store.js';

export interface Gateway {
  readonly id: string;
  readonly config: GatewayConfig;
  readonly port: number;
  /** `ws://host:port/` for clients. */
  readonly url: string;
  readonly httpUrl: string;
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
}

class WsTransport implements Transport {
  readonly #socket: WebSocket;
  /** The TCP socket under the WebSocket, corked while frames are sent in one turn of the event loop. */
  readonly #stream: Duplex;
  #corked = false;
  readonly #slot = new ListenerSlot();

  constructor(socket: WebSocket, stream: Duplex) {
    this.#socket = socket;
    this.#stream = stream;
    socket.on('message', (data, isBinary) => {
      // Binary frames are not part of the protocol; hand them on as a marker so they get a coded error.
      this.#slot.message(isBinary ? BINARY_FRAME : data.toString());
    });
    socket.on('close', (code, reason) => this.#slot.close(code, reason.toString()));
    socket.on('error', () => undefined); // always followed by 'close'
  }

  send(frame: string): void {
    if (this.#socket.readyState !== this.#socket.OPEN) return;
    if (!this.#corked) {
      // The answers to a group-committed batch go out together: one write, not one system call per frame.
      this.#corked = true;
      this.#stream.cork();
      process.nextTick(() => {
        this.#corked = false;
        this.#stream.uncork();
      });
    }
    this.#socket.send(frame);
  }

  close(code = 1000, reason = ''): void {
    if (this.#socket.readyState === this.#socket.OPEN || this.#socket.readyState === this.#socket.CONNECTING) this.#socket.close(code, reason);
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
  const settings = parseConfig(config as Record<string, string | number | undefined>);
  const auth = createAuthenticator({
    mode: settings.EVENTFLOW_AUTH,
    secret: settings.EVENTFLOW_JWT_SECRET,
    publicKey: settings.EVENTFLOW_JWT_PUBLIC_KEY,
    issuer: settings.EVENTFLOW_JWT_ISSUER,
    audience: settings.EVENTFLOW_JWT_AUDIENCE,
    anonymous: settings.EVENTFLOW_AUTH_ANONYMOUS,
  });
  const id = settings.EVENTFLOW_GATEWAY_ID ?? `${generatePid().toUpperCase()}.${settings.EVENTFLOW_SPOKE_NAME.toUpperCase()}`;
  const log = (dependencies.logger ?? createLogger(settings.EVENTFLOW_LOG_LEVEL)).child({ gateway: id });
  const store =
    dependencies.store ??
    (settings.EVENTFLOW_STORE === 'mysql' ? new MysqlStore(mysqlOptions(settings)) : new SqliteStore({ path: settings.EVENTFLOW_SQLITE_PATH }));
  await store.init();
  const mesh = dependencies.router || settings.EVENTFLOW_ROUTER === 'local' ? undefined : await joinMesh(settings, config, store, id, log);
  const router = dependencies.router ?? mesh?.router ?? new LocalRouter(store, id);
  const dispatcher = new Dispatcher(store, router, id, log, {
    leaseMs: settings.EVENTFLOW_CONSUME_LEASE_MS,
    maxAttempts: settings.EVENTFLOW_CONSUME_MAX_ATTEMPTS,
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

  const sessions = new Set<Session>();
  let nextSession = 1;
  const context = {
    gatewayId: id,
    store,
    router,
    dispatcher,
    log,
    maxFrameBytes: settings.EVENTFLOW_MAX_FRAME_BYTES,
    maxBufferedBytes: settings.EVENTFLOW_MAX_BUFFERED_BYTES,
    handshakeTimeout: settings.EVENTFLOW_HANDSHAKE_TIMEOUT_MS,
    limits: {
      maxSubscriptions: settings.EVENTFLOW_MAX_SUBSCRIPTIONS,
      maxInFlight: settings.EVENTFLOW_MAX_IN_FLIGHT,
      maxPublishRate: settings.EVENTFLOW_MAX_PUBLISH_RATE,
    },
    auth,
    scheduled: (at: Date) => scheduler.scheduled(at),
  };
  const accept = (transport: Transport): Session => {
    const session = new Session(`${nextSession++}`, transport, context, handlers);
    sessions.add(session);
    void session.closed.then(() => sessions.delete(session));
    return session;
  };

  const demoDir = settings.EVENTFLOW_DEMO_DIR;
  const http: Server = createServer((request, response) => handleHttp(request, response, demoDir && existsSync(demoDir) ? demoDir : undefined));
  const wss = new WebSocketServer({ noServer: true, maxPayload: settings.EVENTFLOW_MAX_FRAME_BYTES });
  wss.on('connection', (socket, request: IncomingMessage) => accept(new WsTransport(socket, request.socket)));
  wss.on('error', (error) => log.error('websocket server error', { error }));
  http.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const origin = request.headers.origin;
    if (!originAllowed(origin, settings.EVENTFLOW_ALLOWED_ORIGINS)) {
      // A browser page from elsewhere must not use the gateway with its visitor's network access.
      log.warn('websocket upgrade refused: origin not allowed (see EVENTFLOW_ALLOWED_ORIGINS)', { origin, remote: request.socket.remoteAddress });
      refuseUpgrade(socket, 403, 'origin not allowed\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  });

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(settings.EVENTFLOW_PORT, settings.EVENTFLOW_HOST, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const address = http.address();
  const port = typeof address === 'object' && address ? address.port : settings.EVENTFLOW_PORT;
  const host = settings.EVENTFLOW_HOST.includes(':') ? `[${settings.EVENTFLOW_HOST}]` : settings.EVENTFLOW_HOST;
  log.info('gateway listening', { url: `http://${host}:${port}/`, store: store.kind });

  let closing: Promise<void> | undefined;
  return {
    id,
    config: settings,
    port,
    url: `ws://${host}:${port}/`,
    httpUrl: `http://${host}:${port}/`,
    store,
    router,
    dispatcher,
    accept,
    close: () =>
      (closing ??= (async () => {
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
        log.info('gateway stopped');
      })()),
  };

  function handleHttp(request: IncomingMessage, response: ServerResponse, demo: string | undefined): void {
    const url = new URL(request.url ?? '/', 'http://gateway');
    if (url.pathname === '/healthz') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', gateway: id }));
      return;
    }
    if (demo && (request.method === 'GET' || request.method === 'HEAD')) {
      serveStatic(demo, url.pathname, request, response);
      return;
    }
    if (url.pathname === '/') {
      response
        .writeHead(200, { 'content-type': 'text/plain; charset=utf-8' })
        .end(`eventflow gateway ${id}\nConnect a client to ws://${request.headers.host ?? 'this host'}/\n`);
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  }
}

/** Answers an upgrade request with a plain HTTP error and closes the socket: no WebSocket is opened. */
function refuseUpgrade(socket: Duplex, status: number, body: string): void {
  socket.on('error', () => undefined);
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** The hub router with what it needs: a pool on the shared database and the v4 certificates. */
async function joinMesh(settings: GatewayConfig, env: GatewaySettings, store: EventStore, id: string, log: Logger): Promise<{ router: HubRouter; pool: Pool }> {
  const pool = createPool({ ...mysqlOptions(settings), connectionLimit: 4, charset: 'utf8mb4', timezone: 'Z' });
  const strings = Object.fromEntries(Object.entries(env).map(([key, value]) => [key, value === undefined ? undefined : String(value)]));
  const certificates = new CertificateManager({
    pool,
    id,
    name: settings.EVENTFLOW_SPOKE_NAME,
    config: certificateConfigFromEnv(strings),
    onError: (error) => log.warn('certificate refresh failed; the cached chain stays in use', { error }),
  });
  return { router: new HubRouter({ store, pool, certificates, log, pollInterval: settings.EVENTFLOW_MESH_POLL_MS }), pool };
}
