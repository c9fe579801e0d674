/**
 * Gateways on one MySQL store notify each other over core NATS (EVENTFLOW_ROUTER=nats; why not
 * JetStream: gateway/DESIGN.md "The NATS router"). server/gateway.ts imports this module only
 * when configured, so that no other gateway loads nats.js.
 *
 * Routing here is the embedded router's (local.ts: the routing claim taken on append, one pump per
 * domain and batch); every routed event is also announced on its (domain, name) subject, with its
 * position as the only payload. Another gateway subscribed to that subject (because a client of
 * its subscribes, consumes or waits there) lets its dispatcher pull the domain from the store. So
 * a notification carries nothing the store does not have, and a lost or doubled one neither loses
 * nor doubles an event; what covers a lost one:
 * - a new interest: once NATS has the subscription (a flush), the domain is pulled once, for
 *   events announced before it existed;
 * - a (re)connect: this gateway pulls every domain it is interested in, and asks every gateway to
 *   do the same (`resync`), for what was published while announcements could not get through.
 * While NATS is unreachable the gateway serves its own clients as before and reports `/readyz` degraded.
 * A link that stops carrying bytes without closing is found by nats.js's pings (join.ts) and
 * handled the same way: degraded, reconnected, resynced.
 *
 * A gateway on the same database that does not announce (EVENTFLOW_ROUTER=local, another prefix or
 * NATS server) is found as the embedded router finds another gateway (elsewhere.ts): every gateway
 * says its id over NATS (members.ts), and a publisher in the store not heard lately makes this one
 * report degraded, say why, and read its domains every second until a minute after its last event.
 *
 * Any client of the NATS server can publish on our subjects. A message is only a wake-up, so one
 * that is not what a gateway sends (headers, a payload other than a position, or any payload on
 * `resync` / `scheduled`) is dropped, and the pulls it asks for are coalesced per domain
 * (coalesce.ts; the scheduler coalesces its rescans): however many messages arrive, the store is
 * read at most twice per domain at a time, and nothing is queued per message.
 */
import { backoffDelay, streamKey, type StoredEvent } from '@eventflow/core';
import { connect, type Msg, type NatsConnection, type NodeConnectionOptions, type Subscription } from '@nats-io/transport-node';
import { MEMBER_HEARTBEAT_MS, NATS_FIRST_CONNECT_WAIT_MS } from '../../defaults.js';
import type { Logger } from '../../log.js';
import type { EventStore } from '../../store/store.js';
import { LocalRouter } from '../local.js';
import type { RouterStatus, RouteTarget, Router } from '../router.js';
import { Coalescer } from '../coalesce.js';
import { isPositionPayload, Subjects } from './subjects.js';
import { Members } from './members.js';
import type { Advice } from '../elsewhere.js';

const ADVICE: Advice = {
  warning:
    'a gateway (or a v4 hub) publishes to this database without announcing its events over NATS here: EVENTFLOW_ROUTER=local, another EVENTFLOW_NATS_SUBJECT_PREFIX or NATS server, its NATS link down, or a gateway version that does not say its id over NATS yet. Its events reach the subscribers, request() waits and consumers here up to a second late, by reading the store. Set EVENTFLOW_ROUTER=nats, with the same NATS servers and subject prefix, on every gateway of one database',
  reason: 'a gateway publishes to this database without announcing its events over NATS; set EVENTFLOW_ROUTER=nats, with the same NATS servers and subject prefix, on every gateway of it',
  quiet: 'every gateway publishing to this database has announced its events over NATS for a minute: routing by announcements alone again',
};

export interface NatsRouterOptions {
  store: EventStore;
  /** This gateway's id: its routing claims, and its client name at the NATS server. */
  id: string;
  log: Logger;
  /** nats.js options (servers, authentication, TLS); reconnecting is configured here. */
  connection: NodeConnectionOptions;
  /** EVENTFLOW_NATS_SUBJECT_PREFIX. */
  prefix: string;
}

/** What arrived over NATS, for tests and diagnostics. */
export interface NatsRouterCounts {
  /** Messages taken as wake-ups. */
  readonly accepted: number;
  /** Messages dropped: not what a gateway sends. */
  readonly ignored: number;
  /** Pulls of a domain (store reads) the messages, new interests and resyncs started. */
  readonly pulls: number;
}

interface Interest {
  readonly domain: string;
  readonly name: string;
  subscription: Subscription | undefined;
}

const encoder = new TextEncoder();

export class NatsRouter implements Router {
  readonly kind = 'nats';
  readonly claimsOnAppend: string;
  readonly #options: NatsRouterOptions;
  readonly #subjects: Subjects;
  readonly #local: LocalRouter;
  readonly #interests = new Map<string, Interest>();
  readonly #scheduledListeners: Array<() => void> = [];
  #target: RouteTarget | undefined;
  #connection: NatsConnection | undefined;
  /** Whether this gateway has pattern subscriptions, and its subscription to every event subject for them. */
  #patterns: { subscription: Subscription | undefined } | undefined;
  /** Connected and subscribed: announcements get through. */
  #ready = false;
  #closed = false;
  #attempt = 0;
  #retry: ReturnType<typeof setTimeout> | undefined;
  #firstConnect: Promise<void> | undefined;
  #accepted = 0;
  #ignored = 0;
  readonly #pulls: Coalescer;
  readonly #members = new Members();
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  /** When this gateway last said its id for a peer's resync: a newcomer hears every member at once, a flood of resyncs gets 4 a second. */
  #answeredAt = 0;

  constructor(options: NatsRouterOptions) {
    this.#options = options;
    this.#subjects = new Subjects(options.prefix);
    this.#local = new LocalRouter(
      options.store,
      options.id,
      (events) => this.#announce(events),
      // As the embedded router's (server/gateway.ts): the events are routed and announced all the same.
      (error, events) => options.log.warn('could not write the routing claim of events (routed all the same)', { error, events: events.map((event) => event.id) }),
      { log: options.log, announced: (publisher) => this.#members.announced(publisher), advice: ADVICE },
    );
    this.claimsOnAppend = this.#local.claimsOnAppend;
    this.#pulls = new Coalescer((domain, error) => this.#options.log.error('could not route events announced over NATS', { domain, error }));
  }

  get counts(): NatsRouterCounts {
    return { accepted: this.#accepted, ignored: this.#ignored, pulls: this.#pulls.runs };
  }

  /** Whether this gateway holds a NATS connection now. */
  get connected(): boolean {
    return this.#ready;
  }

  async start(target: RouteTarget): Promise<void> {
    this.#target = target;
    await this.#local.start(target);
    this.#heartbeat = setInterval(() => this.#sayId(), MEMBER_HEARTBEAT_MS);
    this.#heartbeat.unref();
    this.#firstConnect = new Promise<void>((resolve) => void this.#connect(resolve));
    // A gateway whose NATS is down still starts (and serves its own clients, not ready).
    const waited = await Promise.race([this.#firstConnect.then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), NATS_FIRST_CONNECT_WAIT_MS).unref())]);
    if (!waited) this.#options.log.warn('NATS not reachable yet: serving this gateway\'s clients, retrying', { servers: this.#options.connection.servers });
  }

  publish(event: StoredEvent, claimed?: boolean): Promise<void> {
    // Claimed on append: announced at once, not behind the batch queue (the previous batch's pump
    // here). Otherwise once the claim is won (LocalRouter's onClaimed).
    if (claimed) this.#announce([event]);
    return this.#local.publish(event, claimed);
  }

  setInterest(domain: string, name: string, interested: boolean): void {
    this.#local.setInterest(domain, name, interested);
    const key = streamKey(domain, name);
    if (interested) {
      if (this.#interests.has(key)) return;
      const interest: Interest = { domain, name, subscription: undefined };
      this.#interests.set(key, interest);
      if (this.#connection) this.#subscribe(this.#connection, interest, true);
    } else {
      this.#interests.get(key)?.subscription?.unsubscribe();
      this.#interests.delete(key);
    }
  }

  setPatternInterest(interested: boolean): void {
    this.#local.setPatternInterest(interested);
    if (!interested) {
      this.#patterns?.subscription?.unsubscribe();
      this.#patterns = undefined;
    } else if (!this.#patterns) {
      this.#patterns = { subscription: undefined };
      if (this.#connection) this.#subscribePatterns(this.#connection, true);
    }
  }

  status(): RouterStatus {
    // Without NATS this gateway still serves its own clients fully: degraded, not out of service.
    if (!this.#ready) return { ready: true, degraded: true, reason: 'no NATS connection' };
    return this.#local.status?.() ?? { ready: true };
  }

  scheduled(): void {
    if (this.#ready) this.#publish(this.#subjects.scheduled);
  }

  onScheduledElsewhere(listener: () => void): void {
    this.#scheduledListeners.push(listener);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    clearInterval(this.#heartbeat);
    await this.#local.close();
    const connection = this.#connection;
    this.#connection = undefined;
    this.#ready = false;
    await connection?.close().catch(() => undefined);
  }

  /** Connects (again and again until it works); nats.js reconnects by itself from then on. */
  async #connect(connected: () => void): Promise<void> {
    if (this.#closed) return;
    this.#retry = undefined;
    let connection: NatsConnection;
    try {
      connection = await connect(this.#options.connection);
    } catch (error) {
      if (this.#attempt === 0) this.#options.log.warn('could not connect to NATS; retrying', { error: errorCode(error) });
      const delay = backoffDelay(this.#attempt++, { minDelay: 200, maxDelay: 5_000 });
      this.#retry = setTimeout(() => void this.#connect(connected), delay);
      this.#retry.unref();
      return;
    }
    if (this.#closed) {
      await connection.close();
      return;
    }
    this.#attempt = 0;
    this.#connection = connection;
    connection.subscribe(this.#subjects.resync, { callback: (_, message) => void (this.#accept(message, false) && (this.#resync(), this.#answerResync())) });
    connection.subscribe(this.#subjects.gateway, {
      callback: (_, message) => {
        const ok = message !== undefined && message.headers === undefined && this.#members.heard(message.data);
        if (ok) this.#accepted += 1;
        else this.#ignored += 1;
      },
    });
    connection.subscribe(this.#subjects.scheduled, { callback: (_, message) => void (this.#accept(message, false) && this.#rescanScheduled()) });
    for (const interest of this.#interests.values()) this.#subscribe(connection, interest, false);
    if (this.#patterns) this.#subscribePatterns(connection, false);
    void this.#watch(connection);
    void connection.closed().then((error) => {
      if (this.#closed || this.#connection !== connection) return;
      // Only a close nats.js gives up on (it retries forever otherwise): start over.
      this.#options.log.error('NATS connection closed; connecting again', { error: errorCode(error) });
      this.#connection = undefined;
      this.#ready = false;
      this.#members.offline();
      void this.#connect(() => undefined);
    });
    await this.#online(connection, 'connected to NATS');
    connected();
  }

  /** Subscriptions are at the server (a flush): pull what was missed, and have the others do so. */
  async #online(connection: NatsConnection, message: string): Promise<void> {
    try {
      await connection.flush();
    } catch {
      return; // Disconnected again: the next reconnect comes back here.
    }
    if (this.#connection !== connection) return;
    this.#ready = true;
    this.#members.online();
    this.#options.log.info(message, { server: connection.getServer() });
    this.#sayId();
    this.#publish(this.#subjects.resync);
    this.#resync();
  }

  async #watch(connection: NatsConnection): Promise<void> {
    for await (const status of connection.status()) {
      if (this.#connection !== connection) return;
      if (status.type === 'staleConnection') {
        // nats.js closes it and reconnects; until then nothing gets through either way.
        this.#ready = false;
        this.#members.offline();
        this.#options.log.warn('NATS link silent (pings unanswered); reconnecting (serving this gateway\'s clients meanwhile)', { server: connection.getServer() });
      } else if (status.type === 'disconnect') {
        this.#ready = false;
        this.#members.offline();
        this.#options.log.warn('NATS connection lost; reconnecting (serving this gateway\'s clients meanwhile)', { server: status.server });
      } else if (status.type === 'reconnect') {
        // nats.js has sent every subscription again.
        void this.#online(connection, 'reconnected to NATS');
      } else if (status.type === 'error') {
        this.#options.log.warn('NATS reported an error', { error: errorCode(status.error) });
      }
    }
  }

  #subscribe(connection: NatsConnection, interest: Interest, isNew: boolean): void {
    const { domain, name } = interest;
    interest.subscription = connection.subscribe(this.#subjects.interest(domain, name), { callback: (_, message) => void (this.#accept(message, true) && this.#pull(domain)) });
    // Events announced before the server had the subscription reached nobody here.
    if (isNew) void connection.flush().then(() => this.#pull(domain), () => undefined);
  }

  /**
   * Pattern subscriptions take any domain a pattern matches, also one nobody here is otherwise
   * interested in: every event subject wakes their pump (coalesced there), for domains they match.
   */
  #subscribePatterns(connection: NatsConnection, isNew: boolean): void {
    const patterns = this.#patterns;
    if (!patterns) return;
    patterns.subscription = connection.subscribe(this.#subjects.anyEvent, {
      callback: (_, message) => {
        const domain = this.#accept(message, true) ? this.#subjects.domainOf(message.subject) : undefined;
        if (domain !== undefined) this.#target?.routePatterns?.(domain);
      },
    });
    if (isNew) void connection.flush().then(() => this.#target?.routePatterns?.(undefined), () => undefined);
  }

  /** Announces routed events: one notification per event, on its (domain, name) subject. */
  #announce(events: readonly StoredEvent[]): void {
    // Not connected: the resync after the reconnect covers these.
    if (!this.#ready) return;
    for (const event of events) this.#publish(this.#subjects.event(event.domain, event.name), String(event.position));
  }

  #publish(subject: string, payload?: string): void {
    try {
      this.#connection?.publish(subject, payload === undefined ? undefined : encoder.encode(payload));
    } catch (error) {
      // Closed or draining: covered by the resync after the next connect.
      this.#options.log.debug('could not publish to NATS', { subject, error: errorCode(error) });
    }
  }

  /** Says this gateway's id (members.ts). */
  #sayId(): void {
    if (this.#ready) this.#publish(this.#subjects.gateway, this.#options.id);
  }

  #answerResync(): void {
    if (Date.now() - this.#answeredAt < 250) return;
    this.#answeredAt = Date.now();
    this.#sayId();
  }

  /** Reads the store again for everything a lost notification could have been about. */
  #resync(): void {
    const domains = new Set([...this.#interests.values()].map((interest) => interest.domain));
    for (const domain of domains) this.#pull(domain);
    if (this.#patterns) this.#target?.routePatterns?.(undefined);
    // `scheduled` notifications are lost the same way.
    this.#rescanScheduled();
  }

  #rescanScheduled(): void {
    for (const listener of this.#scheduledListeners) listener();
  }

  /** Whether `message` is a gateway's (see isPositionPayload): `position` on event subjects, nothing on the others. */
  #accept(message: Msg | undefined, position: boolean): boolean {
    const ok = message !== undefined && message.headers === undefined && (position ? isPositionPayload(message.data) : message.data.length === 0);
    if (ok) this.#accepted += 1;
    else this.#ignored += 1;
    return ok;
  }

  /** Reads the domain's new events: now, or once after the read in flight (coalesce.ts). */
  #pull(domain: string): void {
    const target = this.#target;
    if (target) this.#pulls.ask(domain, () => target.route({ domain }));
  }
}

/** A short reason for logs: the error's code, else its name and message (nats.js puts no credential in them). */
function errorCode(error: unknown): string | undefined {
  if (error === undefined || error === null) return undefined;
  const code = typeof error === 'object' ? (error as { code?: unknown }).code : undefined;
  if (typeof code === 'string') return code;
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
