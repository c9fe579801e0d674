/**
 * The gateway: wires the store, router, dispatcher, scheduler and connections together on one
 * HTTP + WebSocket port (routes in http.ts, the socket transport in ws-transport.ts), WebSocket
 * upgrades on any path (from an allowed `Origin`, see EVENTFLOW_ALLOWED_ORIGINS), and closes them
 * in order. Transports are accepted through `accept()`, so tests can also attach in-memory transports.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { generatePid, MAX_SETTLE_BATCH, type ServerTransport } from '@eventflow/core';
import { WebSocketServer, type WebSocket } from 'ws';
import { configSchema, mysqlOptions, parseConfig, storeTarget, unknownConfigVariables, unusedAuthVariables, type GatewayConfig, type GatewayConfigInput } from '../config.js';
import { Admission, refusalBody } from './admission.js';
import { createAuthenticator } from '../connection/auth.js';
import { Dispatcher, type DispatcherStats } from '../delivery/dispatcher.js';
import { watchGroups } from '../group-metrics.js';
import { LeaseClock } from '../store/lease-clock.js';
import { operations } from '../connection/operations.js';
import { guardClientErrors, guardRequest, guardUpgrade, refuseUpgrade } from './http-guard.js';
import { httpHandler } from './http.js';
import { createStats } from './stats.js';
import { currentSites } from './sites.js';
import { WsTransport } from './ws-transport.js';
import { hostAllowed, isLoopbackHost, originAllowed, servedHere } from '../connection/limits.js';
import { ConditionLog } from '../condition-log.js';
import { createLogger, type LogDestination, type Logger } from '../log.js';
import { noMetrics, PrometheusMetrics } from '../metrics.js';
import { enableTracing } from '../tracing.js';
import { hubConnections } from '../readiness.js';
import { LocalRouter } from '../router/local.js';
import type { Router } from '../router/router.js';
import { Scheduler } from '../delivery/scheduler.js';
import { REPLAY_READS_AT_ONCE, SCHEDULER_POLL_MS } from '../defaults.js';
import { ReadTurns } from '../connection/read-turns.js';
import { Session } from '../connection/session.js';
import { listenFailed, storeUnavailable } from '../startup-failure.js';
import { lockSqliteFile, type SqliteFileLock } from '../store/sqlite/file-lock.js';
import { SqliteStore } from '../store/sqlite/sqlite.js';
import { ensureDirectory } from '../store/ensure-dir.js';
import { dirname } from 'node:path';
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
  accept(transport: ServerTransport): Session;
  /** Stops accepting, closes every connection with 1001, and closes the store. */
  close(): Promise<void>;
  /**
   * After close(): the store did not take back this gateway's leases (down, or its file write-locked by another
   * process), so their events wait for their lease to run out; the bin then exits 1. Undefined otherwise.
   */
  readonly leasesHeldAtStop: Error | undefined;
}

export interface GatewayDependencies {
  store?: EventStore;
  router?: Router;
  logger?: Logger;
  /** Where the gateway's log lines go (default stderr), at EVENTFLOW_LOG_LEVEL; ignored with `logger`. */
  logDestination?: LogDestination;
  /** Called with a start-up failure before it is logged: the bin prints its line for a person first. */
  onStartFailure?: (error: unknown) => void;
  /** Called with each line about the configuration that does not stop the start (an unknown EVENTFLOW_* variable), before it is logged. */
  onConfigWarning?: (line: string) => void;
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
  for (const line of [...unknownConfigVariables(config), ...unusedAuthVariables(config, settings)]) {
    dependencies.onConfigWarning?.(line);
    log.warn(`configuration: ${line}`);
  }
  const undo: Array<() => void> = [];
  try {
    return await start(id, settings, config, dependencies, log, undo);
  } catch (error) {
    for (const step of undo) step();
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

/** `undo` collects what a failure after a step must take back. */
async function start(id: string, settings: GatewayConfig, config: GatewaySettings, dependencies: GatewayDependencies, log: Logger, undo: Array<() => void>): Promise<Gateway> {
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
  // Spans only once an SDK is registered (the bin's when OTEL_* ask for one, or the embedder's): tracing.ts.
  await enableTracing();
  const prometheus =
    settings.EVENTFLOW_METRICS === 'on'
      ? new PrometheusMetrics(
          {
            connections: () => sessions.size,
            // The dispatcher's index is the one count of registrations (each Session registers there).
            registrations: (): DispatcherStats => dispatcher.stats,
          },
          { groupLabels: settings.EVENTFLOW_METRICS_GROUP_LABELS === 'on' },
        )
      : undefined;
  const metrics = prometheus ?? noMetrics;
  const givenStore =
    dependencies.store ??
    // mysql2 is loaded only for a MySQL store: the embedded default starts without it.
    (settings.EVENTFLOW_STORE === 'mysql'
      ? new (await import('../store/mysql/mysql.js')).MysqlStore(mysqlOptions(settings))
      : new SqliteStore({ path: settings.EVENTFLOW_SQLITE_PATH, cacheMb: settings.EVENTFLOW_SQLITE_CACHE_MB }));
  const store = prometheus ? prometheus.measureStore(givenStore) : givenStore;
  // One gateway per SQLite file made from the settings (an embedder's own store is its business).
  const sqlitePath = !dependencies.store && settings.EVENTFLOW_STORE === 'sqlite' && settings.EVENTFLOW_SQLITE_PATH !== ':memory:' ? settings.EVENTFLOW_SQLITE_PATH : undefined;
  let lock: SqliteFileLock | undefined;
  try {
    if (sqlitePath !== undefined) {
      ensureDirectory(dirname(sqlitePath));
      lock = await lockSqliteFile(sqlitePath, id);
    }
    await store.init();
  } catch (error) {
    lock?.release();
    // A store made from the settings: say which of them to change.
    throw dependencies.store ? error : storeUnavailable(error, storeTarget(settings));
  }
  // A later start-up failure (the port in use) leaves the file to the next gateway.
  if (lock) undo.push(() => lock.release());
  // The v4 wing (hub router, certificates, @peculiar/x509) is loaded only when configured: the common path starts without it.
  const mesh = dependencies.router || settings.EVENTFLOW_ROUTER !== 'hubs' ? undefined : await (await import('../v4/mesh.js')).joinMesh(settings, config, store, id, log);
  // nats.js likewise loads only with EVENTFLOW_ROUTER=nats.
  const nats = dependencies.router || settings.EVENTFLOW_ROUTER !== 'nats' ? undefined : (await import('../router/nats/join.js')).joinNats(settings, store, id, log);
  const givenRouter: Router =
    dependencies.router ??
    mesh?.router ??
    nats ??
    new LocalRouter(store, id, undefined, (error, events) => log.warn('could not write the routing claim of events (routed all the same)', { error, events: events.map((event) => event.id) }), { log });
  const router = prometheus ? prometheus.measureRouter(givenRouter) : givenRouter;
  // Several gateways on one database take over each other's leases: on the database's clock.
  const leaseClock = new LeaseClock();
  const stopClockCheck = !dependencies.store && settings.EVENTFLOW_STORE === 'mysql' && settings.EVENTFLOW_ROUTER !== 'local' ? await (await import('../store/mysql/clock-check.js')).watchDatabaseClock(mysqlOptions(settings), leaseClock, log) : undefined;
  if (stopClockCheck) undo.push(stopClockCheck);
  if (prometheus) watchGroups(prometheus.registry, () => givenStore.ledger().groups(leaseClock.now()), { labelled: settings.EVENTFLOW_METRICS_GROUP_LABELS === 'on', timeoutMs: settings.EVENTFLOW_READY_TIMEOUT_MS });
  if (prometheus && hubConnections(givenRouter) !== undefined) prometheus.watchHubs(() => hubConnections(givenRouter) ?? 0);
  if (prometheus && givenRouter.status) prometheus.watchRouterDegraded(() => givenRouter.status?.().degraded === true);
  const dispatcher = new Dispatcher(store, router, id, log, {
    leaseMs: settings.EVENTFLOW_CONSUME_LEASE_MS,
    maxAttempts: settings.EVENTFLOW_CONSUME_MAX_ATTEMPTS,
    clock: leaseClock,
    maxGroupsPerDomain: settings.EVENTFLOW_MAX_GROUPS_PER_DOMAIN,
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
    pollMs: SCHEDULER_POLL_MS,
    // Due by the database's clock, as leases: a gateway whose clock is ahead does not fire them early.
    now: () => leaseClock.now(),
  });
  scheduler.start();
  // Events scheduled through other gateways, as soon as they say so (else at the scheduler's poll).
  givenRouter.onScheduledElsewhere?.(() => scheduler.rescan());

  const admission = new Admission({
    maxConnections: settings.EVENTFLOW_MAX_CONNECTIONS,
    maxUnauthenticated: settings.EVENTFLOW_AUTH === 'jwt' ? settings.EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS : undefined,
  });
  let nextSession = 1;
  let closing: Promise<void> | undefined;
  /** Set by close(): the store did not take back the leases (Gateway.leasesHeldAtStop). */
  let leasesHeld: Error | undefined;
  const context = {
    gatewayId: id,
    store,
    router,
    dispatcher,
    log,
    metrics,
    maxFrameBytes: settings.EVENTFLOW_MAX_FRAME_BYTES,
    announced: {
      maxInFlight: settings.EVENTFLOW_MAX_IN_FLIGHT,
      maxSubscriptions: settings.EVENTFLOW_MAX_SUBSCRIPTIONS,
      maxPublishRate: settings.EVENTFLOW_MAX_PUBLISH_RATE,
      maxReceiveRate: settings.EVENTFLOW_MAX_RECEIVE_RATE,
      leaseMs: settings.EVENTFLOW_CONSUME_LEASE_MS,
      maxAttempts: settings.EVENTFLOW_CONSUME_MAX_ATTEMPTS,
      maxSettleBatch: MAX_SETTLE_BATCH,
    },
    maxBufferedBytes: settings.EVENTFLOW_MAX_BUFFERED_BYTES,
    maxParkedBytes: settings.EVENTFLOW_MAX_PARKED_BYTES,
    maxScanRate: settings.EVENTFLOW_MAX_SCAN_RATE,
    readTurns: new ReadTurns(REPLAY_READS_AT_ONCE),
    handshakeTimeout: settings.EVENTFLOW_HANDSHAKE_TIMEOUT_MS,
    limits: {
      maxSubscriptions: settings.EVENTFLOW_MAX_SUBSCRIPTIONS,
      maxInFlight: settings.EVENTFLOW_MAX_IN_FLIGHT,
      maxPublishRate: settings.EVENTFLOW_MAX_PUBLISH_RATE,
      maxDataKeys: settings.EVENTFLOW_MAX_DATA_KEYS,
      maxDataDepth: settings.EVENTFLOW_MAX_DATA_DEPTH,
      maxGroups: settings.EVENTFLOW_MAX_GROUPS_PER_CONNECTION,
    },
    // Anonymous rights make anonymous connections intended: then only their number is bounded.
    authTimeout: settings.EVENTFLOW_AUTH === 'jwt' && settings.EVENTFLOW_AUTH_ANONYMOUS.length === 0 ? settings.EVENTFLOW_AUTH_TIMEOUT_MS : 0,
    admission,
    auth,
    snapshotEvery: settings.EVENTFLOW_SNAPSHOT_EVERY,
    scheduled: (at: Date) => {
      scheduler.scheduled(at);
      givenRouter.scheduled?.();
    },
    stats: createStats({
      id,
      store: givenStore,
      router: givenRouter,
      prometheus,
      readyTimeoutMs: settings.EVENTFLOW_READY_TIMEOUT_MS,
      traceLink: settings.EVENTFLOW_TRACE_LINK,
      connections: () => sessions.size,
      inFlight: () => dispatcher.stats.deliveries,
      closing: () => closing !== undefined,
    }),
  };
  const accept = (transport: ServerTransport): Session => {
    const session = new Session(`${nextSession++}`, transport, context, operations);
    sessions.add(session);
    admission.opened(session);
    void session.closed.then(() => {
      sessions.delete(session);
      admission.closed(session);
    });
    return session;
  };

  const demoDir = settings.EVENTFLOW_DEMO_DIR;
  const handleHttp = httpHandler({
    id,
    log,
    store,
    router: givenRouter,
    prometheus,
    readyTimeoutMs: settings.EVENTFLOW_READY_TIMEOUT_MS,
    allowedHosts: settings.EVENTFLOW_ALLOWED_HOSTS,
    listenHost: settings.EVENTFLOW_HOST,
    closing: () => closing !== undefined,
  });
  // Every handler runs behind a guard (http-guard.ts): nothing a request carries can end the process.
  const http: Server = createServer(guardRequest(log, (request, response) => handleHttp(request, response, currentSites(demoDir, settings.EVENTFLOW_CONSOLE_DIR))));
  guardClientErrors(http, log);
  // No permessage-deflate (also ws's default): zlib per connection costs ~hundreds of kB and CPU per frame.
  const wss = new WebSocketServer({ noServer: true, maxPayload: settings.EVENTFLOW_MAX_FRAME_BYTES, perMessageDeflate: false });
  wss.on('connection', (socket: WebSocket, _request: IncomingMessage, raw?: Duplex) => {
    try {
      accept(new WsTransport(socket, raw, settings.EVENTFLOW_MAX_RECEIVE_RATE, settings.EVENTFLOW_PING_INTERVAL_MS));
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
      const { origin, host } = request.headers;
      const ownPage = servedHere(origin, host) && hostAllowed(host, settings.EVENTFLOW_ALLOWED_HOSTS, settings.EVENTFLOW_HOST);
      if (!ownPage && !originAllowed(origin, settings.EVENTFLOW_ALLOWED_ORIGINS)) {
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
  // The banner says it too, but a container's operator reads the log: every connection may read, publish and delete.
  if (settings.EVENTFLOW_AUTH === 'none' && !isLoopbackHost(settings.EVENTFLOW_HOST)) {
    log.warn('listening beyond this machine without authentication: set EVENTFLOW_AUTH=jwt, or keep the port behind a proxy that authenticates', { host: settings.EVENTFLOW_HOST });
  }

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
    get leasesHeldAtStop() {
      return leasesHeld;
    },
    close: () =>
      (closing ??= (async () => {
        log.info('gateway stopping', { connections: sessions.size });
        await scheduler.stop();
        // Connections stay open while running handlers settle (SIGTERM: work is handed on, never stranded). Leases the store
        // did not take back are said after the rest of the stop (leasesHeldAtStop; the bin exits 1).
        leasesHeld = await dispatcher.drain(settings.EVENTFLOW_DRAIN_TIMEOUT_MS).then(
          () => undefined,
          (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
        );
        dispatcher.stop();
        for (const client of wss.clients) client.close(1001, 'gateway shutting down');
        for (const session of sessions) session.close(1001, 'gateway shutting down');
        await new Promise<void>((resolve) => wss.close(() => resolve()));
        await new Promise<void>((resolve) => {
          http.close(() => resolve());
          http.closeAllConnections();
        });
        stopClockCheck?.();
        await router.close();
        await mesh?.pool.end();
        await store.close();
        lock?.release();
        upgradeLog.flush();
        if (leasesHeld !== undefined) log.error('gateway stopped with leases still held in the store', { error: leasesHeld });
        else log.info('gateway stopped');
      })()),
  };
}
