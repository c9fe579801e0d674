/**
 * The gateway as a spoke of an eventflow v4 hub mesh (eventflow-v4.md §6, §7): mTLS to every
 * online hub in the `hub` table, v4 framing, `subscribe` for this gateway's interests replayed
 * after every (re)connect, `publish` to every connected hub after the rows are stored.
 *
 * Unlike a v4 spoke it reconnects to each hub on its own, with backoff and a ready timeout, and then
 * reads the store for what the mesh published meanwhile (v4 loses it); a hub
 * is known by its id, not its address; and a `publish` record from a hub is only a notification:
 * the dispatcher reads the event (and any it missed) from the shared store. A record for an event
 * the dispatcher has already routed is a hub's redelivery of a stuck claim: it goes to a consumer
 * here again, not to subscribers (Dispatcher.routeAnnounced).
 */
import tls from 'node:tls';
import { backoffDelay, streamKey, type StoredEvent } from '@eventflow/core';
import type { Pool } from 'mysql2/promise';
import { ClientReader, encodeRecord, type Unit } from './codec.js';
import { clientTlsOptions } from './certificates/tls.js';
import type { CertificateManager } from './certificates/manager.js';
import type { Logger } from '../log.js';
import type { EventStore } from '../store/store.js';
import type { RouteTarget, Router, RouterStatus } from '../router/router.js';
import { HUB_MAX_BUFFERED_BYTES, HUB_PING_INTERVAL_MS, HUB_PING_TIMEOUT_MS } from '../defaults.js';
import { HubPings } from './hub-pings.js';
import { readUnrouted } from './unrouted.js';

export interface HubRouterOptions {
  store: EventStore;
  /** A pool on the shared database, for the `hub` table. */
  pool: Pool;
  certificates: CertificateManager;
  log: Logger;
  /** How often the `hub` table is read for hubs to connect to (v4 spokes poll every 3 s). */
  pollInterval?: number;
  /** Time allowed for TLS and STX before a connect attempt counts as failed. */
  readyTimeout?: number;
  /** Publishes waiting for a first hub connection, at most. */
  maxPending?: number;
  /** Pings to a hub that answers them (hub-pings.ts). */
  pingInterval?: number;
  /** Silence after which such a hub is dropped. */
  pingTimeout?: number;
  /** Bytes a hub connection may hold unsent before it is dropped as not reading. */
  maxBufferedBytes?: number;
  /** This gateway's id as v4's `publisher`: its publishes no hub routed are announced again after a reconnect. */
  publisher?: string;
}

/** After a (re)connect, the store is read again this much later too: the hub has had the subscriptions by then. */
const RESYNC_AGAIN_MS = 1_000;
/** Publishes no hub routed, announced again at a reconnect: at most this many, this old (s), plus a margin (s) for clocks. */
const UNROUTED_LIMIT = 10_000;
const UNROUTED_HORIZON_S = 3_600;
const UNROUTED_MARGIN_S = 5;

interface HubRow {
  id: string;
  external_ip: string;
  external_port: number;
}

interface HubConnection {
  readonly id: string;
  host: string;
  port: number;
  socket: tls.TLSSocket | undefined;
  ready: boolean;
  attempt: number;
  retry: ReturnType<typeof setTimeout> | undefined;
  /** Still listed online in the `hub` table. */
  listed: boolean;
  /** While ready: whether the hub answers pings, and its silence. */
  pings: HubPings | undefined;
}

export class HubRouter implements Router {
  readonly kind = 'hubs';
  /** v4 spokes consume without a group in the store: a request() for one of them must not be refused. */
  readonly outsideConsumers = true;
  readonly #options: Required<Omit<HubRouterOptions, 'log' | 'publisher'>> & Pick<HubRouterOptions, 'publisher'> & { log: Logger };
  readonly #hubs = new Map<string, HubConnection>();
  readonly #interests = new Map<string, [string, string]>();
  /** Publishes waiting for a hub connection, with when each was queued (ms). */
  #pending: Array<{ event: StoredEvent; at: number }> = [];
  /**
   * Since when this gateway's publishes may have reached no hub (ms): a ready link was lost (what was
   * written into it went with it), or #pending dropped one (when it was queued). The next hub to be ready,
   * whichever (a killed hub comes back under a new id), is sent them again from the store.
   */
  #unroutedSince: number | undefined;
  #target: RouteTarget | undefined;
  #poll: ReturnType<typeof setInterval> | undefined;
  #closed = false;
  #resyncAgain: ReturnType<typeof setTimeout> | undefined;

  constructor(options: HubRouterOptions) {
    this.#options = { pollInterval: 3_000, readyTimeout: 5_000, maxPending: 10_000, pingInterval: HUB_PING_INTERVAL_MS, pingTimeout: HUB_PING_TIMEOUT_MS, maxBufferedBytes: HUB_MAX_BUFFERED_BYTES, ...options };
  }

  /** Ids of the hubs with a ready connection. */
  get connected(): string[] {
    return [...this.#hubs.values()].filter((hub) => hub.ready).map((hub) => hub.id);
  }

  /**
   * Readiness: ready with a hub connection; `degraded` while a hub the `hub` table lists (not quit) has none. Its
   * spokes' jobs and events then wait for it, and what this gateway publishes reaches only the connected hubs'
   * spokes. Before, /readyz said ready with one hub of several, as with all. Hub ids stay out of the answer (an
   * unauthenticated endpoint); the log names the hub whose connection failed.
   */
  status(): RouterStatus {
    const listed = [...this.#hubs.values()].filter((hub) => hub.listed);
    const hubs = this.connected.length;
    if (hubs === 0) return { ready: false, hubs, reason: 'no hub connection' };
    const missing = listed.filter((hub) => !hub.ready).length;
    return missing === 0 ? { ready: true, hubs } : { ready: true, hubs, degraded: true, reason: `no connection to ${missing} of the ${listed.length} hubs in the hub table` };
  }

  /** Ids of the connected hubs that answer pings (ours): a silent one of them is dropped. */
  get watched(): string[] {
    return [...this.#hubs.values()].filter((hub) => hub.ready && hub.pings?.watched === true).map((hub) => hub.id);
  }

  async start(target: RouteTarget): Promise<void> {
    this.#target = target;
    await this.#options.certificates.getChain();
    await this.#discover();
    this.#poll = setInterval(() => void this.#discover(), this.#options.pollInterval);
    this.#poll.unref();
  }

  async publish(event: StoredEvent): Promise<void> {
    this.#announce(event);
    // The hubs route to other spokes; this gateway's own connections learn of it from the store.
    await this.#target?.route(event);
  }

  #announce(event: StoredEvent): void {
    const ready = [...this.#hubs.values()].filter((hub) => hub.ready);
    if (ready.length === 0) {
      // v4 loses such events; ours are sent once a hub is connected (bounded: past the bound, the next
      // connection reads the store for the publishes no hub routed since the first one dropped).
      this.#pending.push({ event, at: Date.now() });
      if (this.#pending.length > this.#options.maxPending) {
        const dropped = this.#pending.shift();
        if (dropped) this.#unroutedSince = Math.min(this.#unroutedSince ?? Infinity, dropped.at);
      }
      return;
    }
    const record = encodeRecord(['publish', event.domain, event.id, event.name, event.pid]);
    for (const hub of ready) this.#write(hub, record);
  }

  setInterest(domain: string, name: string, interested: boolean): void {
    const key = streamKey(domain, name);
    if (interested) this.#interests.set(key, [domain, name]);
    else this.#interests.delete(key);
    this.#broadcast([interested ? 'subscribe' : 'unsubscribe', domain, name]);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#poll);
    clearTimeout(this.#resyncAgain);
    await Promise.all(
      [...this.#hubs.values()].map(
        (hub) =>
          new Promise<void>((resolve) => {
            clearTimeout(hub.retry);
            hub.pings?.stop();
            if (!hub.socket || hub.socket.destroyed) return resolve();
            hub.socket.once('close', () => resolve());
            hub.socket.end();
            setTimeout(() => hub.socket?.destroy(), 1_000).unref();
          }),
      ),
    );
  }

  /** Reads the online hubs and connects to the ones without a connection. */
  async #discover(): Promise<void> {
    if (this.#closed) return;
    let rows: HubRow[];
    try {
      const [result] = await this.#options.pool.query('SELECT id, external_ip, external_port FROM hub WHERE quit IS NULL ORDER BY timestamp');
      rows = result as HubRow[];
    } catch (error) {
      this.#options.log.warn('could not read the hub table', { error });
      return;
    }
    const online = new Set(rows.map((row) => row.id));
    for (const hub of this.#hubs.values()) hub.listed = online.has(hub.id);
    for (const row of rows) this.#ensure(row.id, row.external_ip, Number(row.external_port));
  }

  #ensure(id: string, host: string, port: number): void {
    let hub = this.#hubs.get(id);
    if (!hub) {
      hub = { id, host, port, socket: undefined, ready: false, attempt: 0, retry: undefined, listed: true, pings: undefined };
      this.#hubs.set(id, hub);
    } else {
      hub.listed = true;
      if (hub.host !== host || hub.port !== port) Object.assign(hub, { host, port });
    }
    if (!hub.socket && !hub.retry) void this.#connect(hub);
  }

  async #connect(hub: HubConnection): Promise<void> {
    if (this.#closed) return;
    hub.retry = undefined;
    let options: tls.ConnectionOptions;
    try {
      options = await clientTlsOptions(this.#options.certificates, hub.id);
    } catch (error) {
      this.#options.log.error('no client certificate for the hub mesh', { error });
      this.#scheduleRetry(hub);
      return;
    }
    const socket = tls.connect({ ...options, host: hub.host, port: hub.port });
    hub.socket = socket;
    const reader = new ClientReader();
    const readyTimer = setTimeout(() => socket.destroy(new Error(`no STX from hub ${hub.id} within ${this.#options.readyTimeout} ms`)), this.#options.readyTimeout);
    socket.setKeepAlive(true, 60_000);
    socket.on('data', (chunk: Buffer) => {
      let records: string[][];
      try {
        records = reader.push(chunk);
      } catch (error) {
        this.#options.log.warn('dropping a hub connection that sent invalid data', { hub: hub.id, error });
        socket.destroy();
        return;
      }
      if (reader.ready && !hub.ready) {
        clearTimeout(readyTimer);
        this.#onReady(hub);
      }
      hub.pings?.heard();
      for (const record of records) this.#onRecord(hub, record);
    });
    socket.on('error', (error) => this.#options.log.debug('hub connection error', { hub: hub.id, error }));
    socket.on('close', () => {
      clearTimeout(readyTimer);
      if (hub.socket !== socket) return;
      const wasReady = hub.ready;
      hub.socket = undefined;
      hub.ready = false;
      hub.pings?.stop();
      hub.pings = undefined;
      if (wasReady) {
        this.#unroutedSince = Math.min(this.#unroutedSince ?? Infinity, Date.now() - this.#options.pingTimeout);
        this.#options.log.info('hub connection lost', { hub: hub.id });
      }
      if (this.#closed) return;
      if (!hub.listed) {
        this.#hubs.delete(hub.id);
        return;
      }
      this.#scheduleRetry(hub);
    });
  }

  #onReady(hub: HubConnection): void {
    hub.ready = true;
    hub.attempt = 0;
    const socket = hub.socket;
    hub.pings = new HubPings({
      intervalMs: this.#options.pingInterval,
      timeoutMs: this.#options.pingTimeout,
      send: (units) => this.#send(hub, units),
      dead: (silentMs) => {
        if (hub.socket !== socket) return;
        this.#options.log.warn('hub stopped answering pings; dropping the connection and dialling it again', { hub: hub.id, silentMs });
        socket?.destroy();
      },
    });
    this.#options.log.info('connected to hub', { hub: hub.id, address: `${hub.host}:${hub.port}` });
    // v4 hubs keep subscriptions per socket: replay every interest on every (re)connect.
    for (const [domain, name] of this.#interests.values()) this.#send(hub, ['subscribe', domain, name]);
    const pending = this.#pending;
    this.#pending = [];
    for (const { event } of pending) this.#announce(event);
    const since = this.#unroutedSince;
    this.#unroutedSince = undefined;
    // The hub routed what others published while this link was down to nobody here (v4 never resends):
    // read the store for it, as a notification would have. Once more a moment later, for an event the hub
    // routed after this read but before it had the subscriptions just sent.
    this.#resync();
    if (since !== undefined) void this.#announceUnrouted(hub, since);
    clearTimeout(this.#resyncAgain);
    this.#resyncAgain = setTimeout(() => this.#resync(), RESYNC_AGAIN_MS);
    this.#resyncAgain.unref();
  }

  /**
   * Announces again this gateway's publishes stored since `since` (#unroutedSince) that no hub routed. A hub
   * that did route one refuses its claim again: a record sent twice is routed once.
   */
  async #announceUnrouted(hub: HubConnection, since: number): Promise<void> {
    const publisher = this.#options.publisher;
    if (publisher === undefined) return;
    const seconds = Math.ceil((Date.now() - since) / 1000) + UNROUTED_MARGIN_S;
    try {
      const events = await readUnrouted(this.#options.pool, publisher, Math.min(seconds, UNROUTED_HORIZON_S), UNROUTED_LIMIT);
      if (events.length === UNROUTED_LIMIT) this.#options.log.warn('more events no hub routed than are announced again at a reconnect; v4 spokes miss the rest', { hub: hub.id, limit: UNROUTED_LIMIT });
      for (const event of events) this.#send(hub, ['publish', event.domain, event.id, event.name, event.pid]);
    } catch (error) {
      this.#options.log.warn('could not read the events no hub routed while the link was down; v4 spokes may miss them', { hub: hub.id, error });
    }
  }

  /** Pulls every domain this gateway is interested in from the store (a lost notification's cover). */
  #resync(): void {
    if (this.#closed) return;
    const domains = new Set([...this.#interests.values()].map(([domain]) => domain));
    for (const domain of domains) {
      this.#target?.route({ domain }).catch((error: unknown) => this.#options.log.error('could not read the events missed while a hub was unreachable', { domain, error }));
    }
  }

  #onRecord(hub: HubConnection, units: string[]): void {
    const [type, a, b, c] = units;
    if (type === 'publish' && a && b) {
      void this.#routeNotification(b);
    } else if (type === 'pong') {
      hub.pings?.pong();
    } else if (type === 'online' && a && b && c) {
      this.#options.log.info('hub announced itself', { hub: a, address: `${b}:${c}` });
      this.#ensure(a, b, Number(c));
    } else {
      this.#options.log.warn('ignored an unknown record from a hub', { hub: hub.id, type });
    }
  }

  async #routeNotification(id: string): Promise<void> {
    try {
      // Not only for routeAnnounced's test of the position: the read by id positions an event a v4 spoke wrote
      // (positions.ts), which the domain's pull (a wide read) would only find within a second or so.
      const event = await this.#options.store.read(id);
      if (event) await this.#target?.routeAnnounced(event);
    } catch (error) {
      this.#options.log.error('could not route an event announced by a hub', { event: id, error });
    }
  }

  #scheduleRetry(hub: HubConnection): void {
    if (this.#closed || hub.retry) return;
    const delay = backoffDelay(hub.attempt++, { minDelay: 200, maxDelay: 10_000 });
    hub.retry = setTimeout(() => void this.#connect(hub), delay);
    hub.retry.unref();
  }

  #broadcast(units: readonly Unit[]): void {
    for (const hub of this.#hubs.values()) if (hub.ready) this.#send(hub, units);
  }

  #send(hub: HubConnection, units: readonly Unit[]): void {
    this.#write(hub, encodeRecord(units));
  }

  /**
   * Every record goes out here. A hub that does not read (a stopped v4 hub: pings find only ours) would
   * have this gateway keep every record in memory for as long: past the bound the link is dropped and
   * dialled again, and the publishes no hub routed are announced again once it is back.
   */
  #write(hub: HubConnection, record: Buffer): void {
    const socket = hub.socket;
    if (!socket || socket.destroyed || socket.writableEnded) return;
    socket.write(record);
    if (socket.writableLength > this.#options.maxBufferedBytes) {
      this.#options.log.warn('hub is not reading what this gateway sends; dropping the connection and dialling it again', { hub: hub.id, unsent: socket.writableLength });
      socket.destroy();
    }
  }
}
