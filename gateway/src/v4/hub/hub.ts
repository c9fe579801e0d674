/**
 * A hub that v4 spokes, v4 hubs and our gateways cannot tell from a v4.8 hub on the wire or in the
 * database (eventflow-v4.md §6, §9), minus v4's defects (§11 A, C):
 *
 * - STX is written as its own write and only once it is flushed does the socket join the broadcast
 *   set and get read (§11 C17: v4 could send `online` before STX). Nothing is written before STX.
 * - A parser error (a record over 64 KiB without terminator) drops that connection, never the hub;
 *   an unknown record type is logged and ignored, the connection stays up.
 * - Routing: `publish` → the guarded routing claim (exactly one hub wins) → every socket subscribed to
 *   (domain, name) ∪ (domain, `*`), once each; none → `orphan` on the right row (§9.4 passed the domain).
 *   Claims of one connection's publishes run concurrently, but are routed in the order received, and
 *   every record is one synchronous write, so each socket sees each publisher's records in its order.
 * - `online` is forwarded as received to every connected socket, but only when the sender's
 *   certificate is the announced hub's own (§11 C19: v4 let any client redirect every spoke). Hubs,
 *   v4's and ours, always announce themselves with their own leaf.
 * - `ping` (ours, from gateways watching the link: ../hub-pings.ts) is answered `pong` on that connection.
 * - Scheduled events fire (§9.5 never did): ../../delivery/scheduler.ts. Stuck claims are redelivered after a
 *   lease: sweeper.ts. A peer's false "quit" mark on this hub's row is undone (§11 C18).
 *
 * Unchanged on purpose: subscriptions live in memory per socket; the winner of the routing claim
 * reaches only its own sockets, which is why spokes (and gateways) connect to every online hub.
 */
import type { AddressInfo, Socket } from 'node:net';
import tls, { type TLSSocket } from 'node:tls';
import { createPool, type Pool } from 'mysql2/promise';
import { setSessionOnConnect } from '../../store/mysql/statements.js';
import { EventflowError, type StoredEvent } from '@eventflow/core';
import { createLogger, type Logger } from '../../log.js';
import { MysqlStore } from '../../store/mysql/mysql.js';
import { CertificateManager } from '../certificates/manager.js';
import { hubServerTlsOptions, peerCertificateId } from '../certificates/tls.js';
import { STX } from '../codec.js';
import { deferred, HubClient } from './client.js';
import { sayOnline } from './peer-dial.js';
import { HubRouting } from './routing.js';
import { generateHubId, parseHubConfig, type HubConfig, type HubEnv } from './config.js';
import { HubRegistry } from './registry.js';
import { Scheduler } from '../../delivery/scheduler.js';
import { HubSweeper } from './sweeper.js';
import { asciiText, persistHub, persistLog, readOnlineHubs, restoreHubOnline, updateHubToQuit, type HubRow } from './store.js';
import { storeUnavailable } from '../../startup-failure.js';

export interface HubOptions {
  config: HubConfig;
  /** Process log (JSON lines on stderr); by default at config.logLevel. */
  logger?: Logger;
  /** Longest record accepted without a terminator; default 64 KiB. */
  maxRecordBytes?: number;
  /** A client with more unsent bytes than this is dropped (it reconnects and re-subscribes); default 8 MiB. */
  maxBufferedBytes?: number;
  /** Told why start() failed before the log line says it (the bin's one line for a person comes first). */
  onStartFailure?: (error: unknown) => void;
}

/** A subscription as the hub holds it. */
export interface HubSubscription {
  /** The client's certificate UID (spoke or hub ID). */
  client: string;
  domain: string;
  name: string;
}

type State = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

const STX_CHUNK = Buffer.of(STX);
const CLOSE_GRACE_MS = 2000;

export class Hub {
  /** `<CHARACTERISTIC>-<NAME>-<BASE36>.<NAME>` (§1.2): hub row id, SNI name, leaf UID, log agent. */
  readonly id: string;
  readonly config: HubConfig;
  /** This hub's certificates (leaf UID = id); spokes of the same database may use their own managers. */
  readonly certificates: CertificateManager;
  readonly #logger: Logger;
  readonly #pool: Pool;
  readonly #store: MysqlStore;
  readonly #onStartFailure: ((error: unknown) => void) | undefined;
  readonly #maxRecordBytes: number;
  readonly #maxBufferedBytes: number;
  readonly #registry = new HubRegistry<HubClient>();
  readonly #routing: HubRouting;
  /** Every accepted connection. */
  readonly #clients = new Set<HubClient>();
  /** Connections that received STX: the broadcast set. */
  readonly #ready = new Set<HubClient>();
  /** Every TCP connection, handshaken or not, so that destroy() never waits for a stalled handshake. */
  readonly #raw = new Set<Socket>();
  /** Announce connections to peers. */
  readonly #outbound = new Set<TLSSocket>();
  /** Unfinished work (routing, log rows) that destroy() waits for before closing the pools. */
  readonly #pending = new Set<Promise<unknown>>();
  readonly #registered = deferred();
  readonly #scheduler: Scheduler;
  readonly #sweeper: HubSweeper;
  #server: tls.Server | undefined;
  #ownRowTimer: ReturnType<typeof setInterval> | undefined;
  #state: State = 'new';
  /** Whether this hub's row was inserted (destroy marks it quit). */
  #registeredRow = false;
  #destroying: Promise<void> | undefined;
  #starting: Promise<void> | undefined;
  #address: { internalIp: string; internalPort: number; externalIp: string; externalPort: number } | undefined;

  constructor(options: HubOptions) {
    const { config } = options;
    this.config = config;
    this.id = generateHubId(config.name);
    this.#logger = (options.logger ?? createLogger(config.logLevel)).child({ hub: this.id });
    this.#maxRecordBytes = options.maxRecordBytes ?? 64 * 1024;
    this.#maxBufferedBytes = options.maxBufferedBytes ?? 8 * 1024 * 1024;
    this.#onStartFailure = options.onStartFailure;
    const { host = '127.0.0.1', port = 3306, user = 'root', password = '', database = 'eventflow', connectionLimit = 10 } = config.mysql;
    // v4's pool settings (§1.4): UTC dates, utf8mb4.
    this.#pool = createPool({ host, port, user, password, database, connectionLimit, charset: 'utf8mb4', timezone: 'Z' });
    // Values here are still formatted on the client: correct only under a known sql_mode.
    setSessionOnConnect(this.#pool);
    // Nothing of the hub's runs at READ COMMITTED: a binary log in STATEMENT format, which v4 allows, is no reason to refuse it.
    this.#store = new MysqlStore({ ...config.mysql, checkBinlogFormat: false });
    this.#routing = new HubRouting({
      id: this.id,
      registry: this.#registry,
      ready: this.#ready,
      store: this.#store,
      maxBufferedBytes: this.#maxBufferedBytes,
      log: (message, error) => this.#log(message, error),
      track: (promise) => this.#track(promise),
    });
    this.certificates = new CertificateManager({
      pool: this.#pool,
      id: this.id,
      name: config.name,
      config: config.certificates,
      onError: (error) => this.#logger.warn('certificate refresh failed', { error }),
    });
    this.#scheduler = new Scheduler({
      store: this.#store,
      fire: (event) => this.#fireScheduled(event),
      log: (message, error) => this.#log(message, error),
      pollMs: config.scheduledPollMs,
    });
    this.#sweeper = new HubSweeper({
      pool: this.#pool,
      hubId: this.id,
      leaseMs: config.claimLeaseMs,
      maxRedeliveries: config.claimMaxRedeliveries,
      redeliver: async (claim) => this.#routing.route(claim.domain, claim.eventId, claim.name, claim.pid),
      log: (message, error) => this.#log(message, error),
    });
  }

  /** The address listened on and the one advertised; after start(). */
  get address(): { internalIp: string; internalPort: number; externalIp: string; externalPort: number } {
    if (!this.#address) throw new EventflowError('E_EVENTFLOW_INTERNAL', 'the hub has not started');
    return this.#address;
  }

  /** The port listened on; after start(). */
  get port(): number {
    return this.address.internalPort;
  }

  get running(): boolean {
    return this.#state === 'running';
  }

  /** The routing table, for diagnostics and tests. */
  subscriptions(): HubSubscription[] {
    return [...this.#ready].flatMap((client) => this.#registry.subscriptions(client).map(([domain, name]) => ({ client: client.id, domain, name })));
  }

  /** IDs of the connections that received STX. */
  clients(): string[] {
    return [...this.#ready].map((client) => client.id);
  }

  /** Runs one lease sweep now (it also runs on its timer); returns how many events were redelivered. */
  sweepStuckClaims(): Promise<number> {
    return this.#sweeper.sweep();
  }

  /**
   * v4's bootstrap (§9.1): create missing tables, listen (TLS, client certificates required, identity
   * by SNI), insert this hub's row, announce to every other online hub, start the scheduled loop and
   * the lease sweeper. Connections accepted before the row exists get STX once it does.
   */
  async start(): Promise<void> {
    if (this.#state !== 'new') throw new EventflowError('E_EVENTFLOW_INTERNAL', `the hub cannot start: it is ${this.#state}`);
    this.#state = 'starting';
    this.#starting = this.#start();
    try {
      await this.#starting;
    } catch (error) {
      this.#onStartFailure?.(error);
      this.#logger.error('hub failed to start', { error });
      await this.destroy().catch(() => undefined);
      throw error;
    }
  }

  async #start(): Promise<void> {
    const { host = '127.0.0.1', port = 3306, database = 'eventflow', user = 'root' } = this.config.mysql;
    // As the gateway's start says it (exit 5, what to change): the store's own words said "the gateway tries again until it does" and exited 1.
    await this.#store.init().catch((error: unknown) => Promise.reject(storeUnavailable(error, { kind: 'mysql', host, port, database, user })));
    await this.certificates.getTlsMaterial(); // creates this hub's leaf before the first handshake needs it
    const server = tls.createServer(hubServerTlsOptions(this.certificates));
    this.#server = server;
    server.on('connection', (raw: Socket) => {
      this.#raw.add(raw);
      raw.once('close', () => this.#raw.delete(raw));
    });
    server.on('secureConnection', (socket) => this.#accept(socket));
    server.on('tlsClientError', (error, socket) => {
      this.#logger.warn('rejected a TLS client', { error, remote: socket.remoteAddress });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.config.internalPort, this.config.internalIp, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (error) => this.#log('server error', error));
    const internalPort = (server.address() as AddressInfo).port;
    this.#address = {
      internalIp: this.config.internalIp,
      internalPort,
      externalIp: this.config.externalIp,
      externalPort: this.config.externalPort ?? internalPort,
    };
    if (this.#state !== 'starting') throw new EventflowError('E_EVENTFLOW_INTERNAL', 'the hub was destroyed while starting');
    await persistHub(this.#pool, {
      id: this.id,
      internal_ip: this.#address.internalIp,
      internal_port: internalPort,
      external_ip: this.#address.externalIp,
      external_port: this.#address.externalPort,
    });
    this.#registeredRow = true;
    if (this.#state !== 'starting') throw new EventflowError('E_EVENTFLOW_INTERNAL', 'the hub was destroyed while starting');
    this.#state = 'running';
    this.#registered.resolve();
    this.#logger.info('hub listening', { ...this.#address });
    await this.#announceToPeers();
    if (this.#state !== 'running') return;
    this.#scheduler.start();
    this.#sweeper.start();
    const every = Math.min(10_000, Math.max(250, Math.floor(this.config.claimLeaseMs / 3)));
    this.#ownRowTimer = setInterval(() => void this.#track(this.#checkOwnRow()), every);
    this.#ownRowTimer.unref();
  }

  /** Stops the hub (§9.6): timers, server, client sockets, routing table, then marks its row quit and closes the pools. */
  destroy(): Promise<void> {
    this.#destroying ??= this.#destroy();
    return this.#destroying;
  }

  /** Same as destroy(). */
  stop(): Promise<void> {
    return this.destroy();
  }

  async #destroy(): Promise<void> {
    this.#state = 'stopping';
    this.#registered.reject(new EventflowError('E_EVENTFLOW_INTERNAL', 'the hub was destroyed'));
    // A start in progress may be announcing to a peer that does not answer: end those dials first
    // (their timeout can be long), then the start notices and stops at its next step.
    for (const socket of this.#outbound) socket.destroy();
    await this.#starting?.catch(() => undefined);
    clearInterval(this.#ownRowTimer);
    await Promise.allSettled([this.#scheduler.stop(), this.#sweeper.stop()]);
    const server = this.#server;
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    for (const socket of this.#outbound) socket.destroy();
    await Promise.allSettled([...this.#clients].map((client) => this.#end(client.socket)));
    for (const raw of this.#raw) raw.destroy();
    await closed;
    this.#registry.clear();
    await this.#drainPending();
    if (this.#registeredRow) {
      await persistLog(this.#pool, this.id, 'destroyed').catch((error: unknown) => this.#logger.warn('log row failed', { error }));
      await updateHubToQuit(this.#pool, this.id).catch((error: unknown) => this.#logger.error('could not mark the hub quit', { error }));
    }
    await this.#drainPending();
    await Promise.allSettled([this.#store.close(), this.#pool.end()]);
    this.#state = 'stopped';
    this.#logger.info('hub stopped');
  }

  async #drainPending(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #end(socket: TLSSocket): Promise<void> {
    if (socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => socket.destroy(), CLOSE_GRACE_MS);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.end();
    });
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    this.#pending.add(promise);
    void promise.then(
      () => this.#pending.delete(promise),
      () => this.#pending.delete(promise),
    );
    return promise;
  }

  /** A `log` row (§9.7), agent = this hub's ID, and the same line on the process log. Never throws. */
  #log(message: string, error?: unknown): void {
    if (error === undefined) this.#logger.info(message);
    else this.#logger.warn(message, { error });
    if (this.#state === 'stopped' || this.#state === 'new') return;
    this.#track(persistLog(this.#pool, this.id, message, error).catch((failure: unknown) => this.#logger.warn('could not write a log row', { error: failure, message })));
  }

  // ── accepting (§9.2) ──

  #accept(socket: TLSSocket): void {
    const id = peerCertificateId(socket);
    const client = new HubClient(socket, asciiText(id ?? 'unknown', 64), this.#maxRecordBytes);
    socket.on('error', (error) => {
      if (!client.closed) this.#log(`client error ${client.id}`, error);
    });
    if (this.#state === 'stopping' || this.#state === 'stopped' || !socket.authorized || id === undefined) {
      if (this.#state !== 'stopping' && this.#state !== 'stopped') {
        this.#logger.warn('dropped an unauthorised client', { client: client.id, reason: String(socket.authorizationError ?? 'no subject UID') });
      }
      client.closed = true;
      socket.destroy();
      return;
    }
    this.#clients.add(client);
    socket.setKeepAlive(true, this.config.keepAliveIntervalMs);
    socket.setNoDelay(true);
    socket.on('close', () => this.#closed(client));
    this.#registered.promise.then(
      () => {
        if (client.closed) return;
        // STX alone, first, and the socket joins the broadcast set (and is read) only once it is out.
        socket.write(STX_CHUNK, (error) => {
          if (error || client.closed || this.#state !== 'running') return;
          client.ready = true;
          this.#ready.add(client);
          socket.on('data', (chunk: Buffer) => this.#routing.data(client, chunk));
          this.#log(`connected ${client.id}`);
        });
      },
      () => socket.destroy(),
    );
  }

  #closed(client: HubClient): void {
    client.closed = true;
    this.#clients.delete(client);
    this.#ready.delete(client);
    this.#registry.remove(client);
    if (client.ready) this.#log(`disconnected ${client.id}`);
  }

  // ── peers (§6.4 A) ──

  async #announceToPeers(): Promise<void> {
    let peers: HubRow[];
    try {
      peers = (await readOnlineHubs(this.#pool)).filter((peer) => peer.id !== this.id);
    } catch (error) {
      this.#log('failed to read the online hubs', error);
      return;
    }
    // Concurrently: each is bounded by PEER_HUB_ONLINE_TIMEOUT, so a dead peer delays start by that much at most.
    await Promise.all(peers.map((peer) => this.#announce(peer)));
  }

  async #announce(peer: HubRow): Promise<void> {
    try {
      await sayOnline({ id: this.id, certificates: this.certificates, address: this.address, timeoutMs: this.config.peerHubOnlineTimeoutMs, outbound: this.#outbound }, peer);
      this.#log(`broadcasted online status to peer hub ${peer.id}`);
    } catch (error) {
      if (this.#state !== 'running') return;
      this.#log(`failed to connect to peer hub ${peer.id} at ${peer.external_ip}:${peer.external_port}; marking it quit`, error);
      await updateHubToQuit(this.#pool, peer.id).catch((failure: unknown) => this.#log(`could not mark peer hub ${peer.id} quit`, failure));
    }
  }

  async #checkOwnRow(): Promise<void> {
    if (this.#state !== 'running') return;
    try {
      if (await restoreHubOnline(this.#pool, this.id)) this.#log('observed own quit mark while running; restored online status');
    } catch (error) {
      this.#logger.warn('could not check the own hub row', { error });
    }
  }

  // ── scheduled events (§9.5) ──

  /** Routing claim, then broadcast with the pid; true if this hub won the claim. */
  async #fireScheduled(event: StoredEvent): Promise<boolean> {
    if (!(await this.#store.claimForRouting(event.id, this.id))) return false;
    this.#routing.route(event.domain, event.id, event.name, event.pid);
    return true;
  }
}

/** Parses the configuration from `env` (EVENTFLOW_HUB_*, EVENTFLOW_MYSQL_*, EVENTFLOW_CERT_*) and starts a hub. */
export async function startHub(env: HubEnv = process.env, options: Omit<HubOptions, 'config'> = {}): Promise<Hub> {
  const hub = new Hub({ ...options, config: parseHubConfig(env) });
  await hub.start();
  return hub;
}
