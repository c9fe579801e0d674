/**
 * One client connection: the handshake, frame parsing and validation, request dispatch, and the
 * connection's subscriptions (with replay after a position). Bad input gets an error frame; the
 * connection stays open and nothing is stored. So does a request beyond the connection's limits
 * (limits.ts): requests in flight, subscriptions + consumers + waits, and the publish rate.
 */
import {
  clientFrame,
  describeIssues,
  EventflowError,
  isOperationName,
  operations,
  PROTOCOL_VERSION,
  type OperationName,
  type Result,
  type ServerFrame,
  type StoredEvent,
  type Transport,
} from '@eventflow/core';
import { en } from 'zod/locales';
import type { z } from 'zod/mini';
import { allows, allowsAll, allowsAny, denied, rules, type Action, type Authenticator, type Authorization } from './auth.js';
import type { Dispatcher, Peer } from './dispatcher.js';
import { dataShapeRefusal, frameTooDense, scanFrame } from './data-shape.js';
import { limitExceeded, rateLimited, TokenBucket, type ConnectionLimits } from './limits.js';
import type { Logger } from './log.js';
import type { GatewayMetrics } from './metrics.js';
import { logRefusal } from './refusal-log.js';
import type { EventStore } from './store/store.js';
import type { Router } from './router/router.js';

export interface SessionContext {
  readonly gatewayId: string;
  readonly store: EventStore;
  readonly router: Router;
  readonly dispatcher: Dispatcher;
  readonly log: Logger;
  readonly metrics: GatewayMetrics;
  readonly maxFrameBytes: number;
  readonly maxBufferedBytes: number;
  readonly handshakeTimeout: number;
  /**
   * EVENTFLOW_AUTH_TIMEOUT_MS when it applies (jwt without anonymous rights), else 0: a connection
   * without a valid token this long after it opened is closed with 4408.
   */
  readonly authTimeout?: number;
  /** Told when the connection first holds a valid token (admission.ts counts those without). */
  readonly admission?: { authenticated(session: Session): void };
  readonly limits: ConnectionLimits;
  /** Verifies tokens and knows the anonymous rights (auth.ts). */
  readonly auth: Authenticator;
  /** Called after a schedule request, so the scheduler can move its timer earlier. */
  scheduled(at: Date): void;
}

/** The request being handled: its id (unique on its connection) and a logger whose lines carry it. */
export interface RequestScope {
  readonly id: number;
  readonly log: Logger;
}

export type Handler<O extends OperationName> = (session: Session, params: z.infer<(typeof operations)[O]['params']>, request: RequestScope) => Promise<Result<O>>;
export type Handlers = { [O in OperationName]: Handler<O> };

/**
 * The protocol schemas are zod/mini, which carries no locale: parsing with zod's English error map
 * keeps the messages clients get (e.g. "Too big: expected string to have <=64 characters").
 */
const english = { error: en().localeError };

/** Replay pages: large enough to be quick, small enough to bound memory per subscription. */
const REPLAY_PAGE = 500;

/** How long a replay waits for a client that takes none of its buffered frames before cutting it off. */
const REPLAY_STALL_MS = 30_000;

/** The operations that write events, and so spend the connection's publish rate. */
const writes: ReadonlySet<OperationName> = new Set<OperationName>(['publish', 'persist', 'schedule']);

interface SubscriptionState {
  /** While replaying, live events are parked here and sent after the replay, without duplicates. */
  parked: StoredEvent[] | undefined;
}

/** What a transport passes for a binary WebSocket frame: no text frame is this (not JSON, leading NUL). */
export const BINARY_FRAME = '\u0000binary';

export class Session implements Peer {
  readonly id: string;
  readonly context: SessionContext;
  readonly #transport: Transport;
  readonly #handlers: Handlers;
  readonly #log: Logger;
  readonly subscriptions = new Map<string, SubscriptionState>();
  /** Consumer handle → its domain␟name, so that a handle cannot stand for two consumers. */
  readonly consumers = new Map<string, string>();
  /** Handles of the waits registered and not finished yet (kept by the wait/cancelWait handlers and sendWaited). */
  readonly waits = new Set<string>();
  /**
   * Registrations (see #registrationKey) whose request is being handled, so that concurrent
   * requests cannot together exceed EVENTFLOW_MAX_SUBSCRIPTIONS.
   */
  readonly #reserved = new Set<string>();
  /** Requests received and not answered yet. */
  #inFlight = 0;
  /** Subscriptions whose replay is running (their live events are parked meanwhile). */
  #replaying = 0;
  /** The publish rate; undefined when unlimited. */
  readonly #writeBucket: TokenBucket | undefined;
  /** Work to start once the current request's result has been sent (e.g. a subscription replay). */
  #afterResult: Array<() => void> = [];
  #greeted = false;
  /** A hello is being verified: later hellos are ignored. */
  #greeting = false;
  #closed = false;
  /** What this connection may do; set from the hello's token. */
  #auth: Authorization;
  /** Closes the connection with 4401 when its token expires. */
  #expiryTimer: ReturnType<typeof setTimeout> | undefined;
  /** Closes the connection with 4408 if it has not authenticated in time (EVENTFLOW_AUTH_TIMEOUT_MS). */
  #authTimer: ReturnType<typeof setTimeout> | undefined;
  #resolveClosed!: () => void;
  /** Settles once the connection is gone and its registrations are cleaned up. */
  readonly closed = new Promise<void>((resolve) => (this.#resolveClosed = resolve));
  readonly #handshakeTimer: ReturnType<typeof setTimeout>;

  constructor(id: string, transport: Transport, context: SessionContext, handlers: Handlers) {
    this.id = id;
    this.context = context;
    this.#transport = transport;
    this.#handlers = handlers;
    this.#log = context.log.child({ connection: id });
    this.#auth = context.auth.anonymous;
    this.#writeBucket = context.limits.maxPublishRate > 0 ? new TokenBucket(context.limits.maxPublishRate) : undefined;
    this.#handshakeTimer = setTimeout(() => this.close(4000, 'handshake timeout'), context.handshakeTimeout);
    if (context.authTimeout && !this.#auth.authenticated) {
      this.#authTimer = setTimeout(() => {
        this.#log.debug('no valid token in time; closing', { timeoutMs: context.authTimeout });
        this.close(4408, 'authentication timeout');
      }, context.authTimeout);
    }
    transport.listen({
      message: (frame) =>
        void this.#onMessage(frame).catch((error: unknown) => {
          // The gateway never crashes on input: anything unexpected becomes a coded error frame.
          this.#log.error('unexpected failure handling a frame', { error });
          this.#sendError(undefined, 'E_EVENTFLOW_INTERNAL', 'the gateway failed to handle this frame; see its log');
        }),
      close: (code) => void this.#onClose(code),
    });
  }

  close(code: number, reason: string): void {
    this.#transport.close(code, reason);
  }

  /** Whether the connection holds a valid token (always, without authentication). */
  get authenticated(): boolean {
    return this.#auth.authenticated;
  }

  // ── authorization ──

  /** Throws E_EVENTFLOW_FORBIDDEN (E_EVENTFLOW_UNAUTHORIZED when anonymous) unless the connection may do `action` on `domain`. */
  authorize(op: OperationName, action: Action, domain: string): void {
    if (!allows(this.#auth, action, domain)) throw denied(this.#auth, op, action, domain);
  }

  /** Replaces the connection's rights with those of `token`; throws E_EVENTFLOW_UNAUTHORIZED (keeping the old rights) when it is not valid. */
  async authenticate(token: string): Promise<void> {
    const auth = await this.context.auth.verify(token);
    this.#setAuth(auth);
    // Narrower rights: subscriptions and consumers they no longer cover are dropped, so that no event of those domains arrives any more.
    for (const key of [...this.subscriptions.keys()]) {
      const [domain = '', name = ''] = key.split('\u001f');
      if (!allows(auth, 'subscribe', domain)) this.unsubscribe(domain, name);
    }
    for (const [consumer, key] of [...this.consumers]) {
      if (allows(auth, 'consume', key.split('\u001f')[0] ?? '')) continue;
      this.consumers.delete(consumer);
      await this.context.dispatcher.removeConsumer(this, consumer);
    }
  }

  #setAuth(auth: Authorization): void {
    this.#auth = auth;
    if (auth.authenticated) {
      clearTimeout(this.#authTimer);
      this.context.admission?.authenticated(this);
    }
    clearTimeout(this.#expiryTimer);
    this.#expiryTimer = undefined;
    if (auth.expiresAt === undefined || this.#closed) return;
    const check = (): void => {
      const left = (auth.expiresAt ?? 0) - Date.now();
      if (left > 0) {
        // setTimeout holds at most 2^31-1 ms; longer lifetimes are re-checked.
        this.#expiryTimer = setTimeout(check, Math.min(left, 2 ** 31 - 1));
        return;
      }
      this.#log.debug('token expired; closing so that the client reconnects with a fresh one');
      this.close(4401, 'token expired');
    };
    check();
  }

  /** The check that needs only the params (auth.ts `rules`); undefined when allowed. */
  #refusal(op: OperationName, params: unknown): Error | undefined {
    const rule = rules[op];
    const auth = this.#auth;
    switch (rule.kind) {
      case 'none':
        return undefined;
      case 'domain': {
        const domain = rule.domain(params as Record<string, unknown>);
        return allows(auth, rule.action, domain) ? undefined : denied(auth, op, rule.action, domain);
      }
      case 'byEvent':
      case 'own':
        return allowsAny(auth, rule.action) ? undefined : denied(auth, op, rule.action, undefined);
      case 'allDomains':
        return allowsAll(auth, rule.action) ? undefined : denied(auth, op, rule.action, '*');
    }
  }

  // ── Peer ──

  sendEvent(event: StoredEvent, names: string[]): void {
    // Fan-out calls this once per subscribed connection: the common case (no replay running on
    // this connection) looks nothing up and sends the frame encoded for the previous connection.
    if (this.#replaying === 0) {
      this.#sendFrame(encodeEvent(event, names));
      return;
    }
    const live: string[] = [];
    for (const name of names) {
      const subscription = this.subscriptions.get(`${event.domain}\u001f${name}`);
      if (subscription?.parked) subscription.parked.push(event);
      else live.push(name);
    }
    if (live.length > 0) this.#sendFrame(encodeEvent(event, live));
  }

  sendDelivery(consumer: string, delivery: string, attempt: number, event: StoredEvent): void {
    this.#send({ type: 'delivery', consumer, delivery, attempt, event });
  }

  sendRevoked(delivery: string): void {
    this.#send({ type: 'revoked', delivery });
  }

  sendWaited(wait: string, event: StoredEvent): void {
    this.waits.delete(wait);
    this.#send({ type: 'waited', wait, event });
  }

  sendDeleted(domain: string, pid: string, id: string | undefined): void {
    this.#send({ type: 'deleted', domain, pid, ...(id === undefined ? {} : { id }) });
  }

  // ── subscriptions with replay ──

  async subscribe(domain: string, name: string, after: number | undefined): Promise<number> {
    const key = `${domain}\u001f${name}`;
    const head = await this.context.store.head();
    if (this.subscriptions.has(key) || after === undefined || after >= head) {
      if (!this.subscriptions.has(key)) this.subscriptions.set(key, { parked: undefined });
      this.context.dispatcher.subscribe(this, domain, name);
      return head;
    }
    const state: SubscriptionState = { parked: [] };
    this.subscriptions.set(key, state);
    this.#replaying++;
    this.context.dispatcher.subscribe(this, domain, name);
    // The result goes out first; the replay follows on the same ordered connection.
    this.#afterResult.push(() => void this.#replay(domain, name, after, state));
    return head;
  }

  async #replay(domain: string, name: string, after: number, state: SubscriptionState): Promise<void> {
    let last = after;
    const names = [name];
    try {
      for (;;) {
        const page = await this.context.store.readPublishedAfter({ domain, name }, last, REPLAY_PAGE);
        for (const event of page) {
          if (this.#transport.bufferedAmount > this.context.maxBufferedBytes / 4) await this.#drained();
          this.#sendFrame(encodeEvent(event, names));
        }
        const newest = page.at(-1);
        if (newest) last = newest.position;
        if (page.length < REPLAY_PAGE || this.#closed) break;
      }
    } catch (error) {
      // Sending live events now would leave a gap; the client resumes from its position instead.
      this.#log.error('subscription replay failed; closing so that the client resumes', { domain, name, error });
      this.close(1011, 'replay failed');
      return;
    } finally {
      this.#replaying--;
    }
    const parked = state.parked ?? [];
    state.parked = undefined;
    for (const event of parked) if (event.position > last) this.#sendFrame(encodeEvent(event, names));
  }

  /**
   * Waits until the client has taken most of what was sent. A replay is written without waiting
   * for the network, so a long one (tens of thousands of events) would otherwise exceed
   * EVENTFLOW_MAX_BUFFERED_BYTES by itself and cut the client off with 4008 mid-resume, over and
   * over; this way it goes at the client's pace. A client that has not taken its backlog within
   * REPLAY_STALL_MS is cut off as too slow (its parked live events would grow meanwhile).
   */
  async #drained(): Promise<void> {
    const started = Date.now();
    while (!this.#closed && this.#transport.bufferedAmount > this.context.maxBufferedBytes / 4) {
      if (Date.now() - started > REPLAY_STALL_MS) {
        this.#log.warn('client too slow during replay; disconnecting', { buffered: this.#transport.bufferedAmount });
        this.close(4008, 'client too slow');
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  unsubscribe(domain: string, name: string): void {
    this.subscriptions.delete(`${domain}\u001f${name}`);
    this.context.dispatcher.unsubscribe(this, domain, name);
  }

  // ── frames ──

  async #onMessage(data: string): Promise<void> {
    if (this.#closed) return;
    // Parsing costs time per value: a frame with more values than any valid one is refused unparsed.
    const dense = scanFrame(data, this.context.limits);
    if (dense) {
      const error = frameTooDense(dense.limit, dense.value);
      this.#sendError(dense.id, error.code, error.message, error.details);
      return;
    }
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      this.#sendError(undefined, 'E_EVENTFLOW_INVALID_FRAME', data === BINARY_FRAME ? 'binary frames are not part of the protocol; send JSON text frames' : 'frame is not valid JSON');
      return;
    }
    const frame = clientFrame.safeParse(json, english);
    if (!frame.success) {
      const id = readId(json);
      const type = json !== null && typeof json === 'object' ? (json as { type?: unknown }).type : undefined;
      const message = type === 'hello' || type === 'request' ? describeIssues(frame.error) : `unknown frame type ${JSON.stringify(type ?? null)}; expected "hello" or "request"`;
      this.#sendError(id, 'E_EVENTFLOW_INVALID_FRAME', message);
      return;
    }
    if (frame.data.type === 'hello') {
      await this.#hello(frame.data.protocol, frame.data.client, frame.data.token);
      return;
    }
    const { id, op, params } = frame.data;
    if (!this.#greeted) {
      this.#sendError(id, 'E_EVENTFLOW_HANDSHAKE_REQUIRED', 'send a "hello" frame before any request');
      return;
    }
    if (!isOperationName(op)) {
      this.#sendError(id, 'E_EVENTFLOW_UNKNOWN_OPERATION', `unknown operation ${JSON.stringify(op)}`);
      return;
    }
    await this.#dispatch(id, op, params);
  }

  async #dispatch<O extends OperationName>(id: number, op: O, params: unknown): Promise<void> {
    const { limits } = this.context;
    if (this.#inFlight >= limits.maxInFlight) {
      const error = limitExceeded('EVENTFLOW_MAX_IN_FLIGHT', limits.maxInFlight, `${op}: too many unanswered requests on this connection; wait for answers before sending more`);
      this.#sendError(id, error.code, error.message, error.details);
      return;
    }
    this.#inFlight++;
    try {
      await this.#handle(id, op, params);
    } finally {
      this.#inFlight--;
    }
  }

  async #handle<O extends OperationName>(id: number, op: O, params: unknown): Promise<void> {
    // Before validation walks it: an event's data is bounded in values and depth (data-shape.ts).
    const shape = writes.has(op) ? dataShapeRefusal(op, params, this.context.limits) : undefined;
    if (shape) {
      this.#sendError(id, shape.code, shape.message, shape.details);
      return;
    }
    let parsed;
    try {
      parsed = operations[op].params.safeParse(params ?? {}, english);
    } catch (error) {
      // zod validates JSON recursively: absurdly deep nesting overflows the stack instead of failing.
      if (!(error instanceof RangeError)) throw error;
      this.#sendError(id, 'E_EVENTFLOW_INVALID_INPUT', `${op}: params are nested too deeply`);
      return;
    }
    if (!parsed.success) {
      this.#sendError(id, 'E_EVENTFLOW_INVALID_INPUT', `${op}: ${describeIssues(parsed.error, 'params')}`);
      return;
    }
    const data = parsed.data as z.infer<(typeof operations)[O]['params']>;
    // Nothing is done, counted or answered with data for a request the connection may not make.
    const refusal = this.#refusal(op, data);
    if (refusal instanceof EventflowError) {
      this.#sendError(id, refusal.code, refusal.message, refusal.details);
      return;
    }
    if (this.#writeBucket && writes.has(op)) {
      const retryAfterMs = this.#writeBucket.take();
      if (retryAfterMs > 0) {
        const error = rateLimited(op, this.#writeBucket.rate, retryAfterMs);
        this.#sendError(id, error.code, error.message, error.details);
        return;
      }
    }
    // A new subscription, consumer or wait is counted from here on, while its request runs.
    let reserved = this.#registrationKey(op, data);
    if (reserved !== undefined && (this.#isRegistered(reserved) || this.#reserved.has(reserved))) reserved = undefined;
    if (reserved !== undefined) {
      if (this.#registrations() >= this.context.limits.maxSubscriptions) {
        const error = limitExceeded(
          'EVENTFLOW_MAX_SUBSCRIPTIONS',
          this.context.limits.maxSubscriptions,
          `${op}: this connection already holds as many subscriptions, consumers and waits as allowed; remove some before adding more`,
        );
        this.#sendError(id, error.code, error.message, error.details);
        return;
      }
      this.#reserved.add(reserved);
    }
    const request = requestScope(this.#log, id, op);
    try {
      const handler = this.#handlers[op] as Handler<O>;
      const result = await handler(this, data, request);
      this.context.metrics.handled(op);
      this.#send({ type: 'result', id, result });
      for (const start of this.#afterResult.splice(0)) start();
    } catch (error) {
      this.#afterResult = [];
      if (error instanceof EventflowError) {
        this.#sendError(id, error.code, error.message, error.details);
      } else {
        request.log.error('request failed', { error });
        this.#sendError(id, 'E_EVENTFLOW_STORE_FAILED', `${op} failed inside the gateway; see the gateway log (connection ${this.id}, request ${id})`);
      }
    } finally {
      if (reserved !== undefined) this.#reserved.delete(reserved);
    }
  }

  // ── registration limit ──

  /** What a subscribe, consume or wait request registers, as a key of #reserved; undefined for other operations. */
  #registrationKey(op: OperationName, params: unknown): string | undefined {
    switch (op) {
      case 'subscribe': {
        const { domain, name } = params as { domain: string; name: string };
        return `s\u001f${domain}\u001f${name}`;
      }
      case 'consume':
        return `c\u001f${(params as { consumer: string }).consumer}`;
      case 'wait':
        return `w\u001f${(params as { wait: string }).wait}`;
      default:
        return undefined;
    }
  }

  #isRegistered(key: string): boolean {
    const [kind, ...rest] = key.split('\u001f');
    const value = rest.join('\u001f');
    if (kind === 's') return this.subscriptions.has(value);
    if (kind === 'c') return this.consumers.has(value);
    return this.waits.has(value);
  }

  /** Subscriptions + consumers + waits of this connection, including those being registered. */
  #registrations(): number {
    let pending = 0;
    for (const key of this.#reserved) if (!this.#isRegistered(key)) pending++;
    return this.subscriptions.size + this.consumers.size + this.waits.size + pending;
  }

  async #hello(protocol: number, client: string | undefined, token: string | undefined): Promise<void> {
    if (this.#greeted || this.#greeting) return;
    if (protocol !== PROTOCOL_VERSION) {
      this.#sendError(undefined, 'E_EVENTFLOW_PROTOCOL_VERSION', `this gateway speaks protocol ${PROTOCOL_VERSION}, the client ${protocol}; upgrade the older side`);
      this.close(1002, 'protocol version mismatch');
      return;
    }
    this.#greeting = true;
    let auth = this.context.auth.anonymous;
    if (token !== undefined && this.context.auth.mode === 'jwt') {
      try {
        auth = await this.context.auth.verify(token);
      } catch (error) {
        const message = error instanceof EventflowError ? error.message : 'the token could not be verified';
        this.#log.info('handshake refused: bad token', { client, reason: message });
        this.#sendError(undefined, 'E_EVENTFLOW_UNAUTHORIZED', message);
        this.close(4401, 'unauthorized');
        return;
      }
      if (this.#closed) return;
    }
    this.#setAuth(auth);
    this.#greeted = true;
    clearTimeout(this.#handshakeTimer);
    this.#log.debug('client connected', { client });
    void this.context.store.head().then(
      (head) =>
        this.#send({
          type: 'welcome',
          protocol: PROTOCOL_VERSION,
          connection: this.id,
          gateway: this.context.gatewayId,
          head,
          limits: { maxFrameBytes: this.context.maxFrameBytes },
        }),
      (error: unknown) => {
        this.#log.error('store unavailable during handshake', { error });
        this.close(1011, 'store unavailable');
      },
    );
  }

  async #onClose(code: number): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#handshakeTimer);
    clearTimeout(this.#expiryTimer);
    clearTimeout(this.#authTimer);
    this.#log.debug('client disconnected', { code });
    try {
      await this.context.dispatcher.removePeer(this);
    } catch (error) {
      this.#log.error('cleanup after disconnect failed', { error });
    }
    this.#resolveClosed();
  }

  #send(frame: ServerFrame): void {
    if (!this.#closed) this.#sendFrame(JSON.stringify(frame), frame.type, frame.type === 'delivery' ? frame.attempt : 1);
  }

  /** `type` and `attempt` only feed the metrics: event frames arrive here already encoded (encodeEvent). */
  #sendFrame(frame: string, type: ServerFrame['type'] = 'event', attempt = 1): void {
    if (this.#closed) return;
    if (this.#transport.bufferedAmount > this.context.maxBufferedBytes) {
      // A client that cannot keep up is cut off rather than letting gateway memory grow; it resumes from its positions.
      this.#log.warn('client too slow; disconnecting', { buffered: this.#transport.bufferedAmount });
      this.context.metrics.dropped(type);
      this.close(4008, 'client too slow');
      return;
    }
    this.context.metrics.sent(type, attempt);
    this.#transport.send(frame);
  }

  #sendError(id: number | undefined, code: string, message: string, details?: Record<string, unknown>): void {
    this.context.metrics.errorSent(code);
    logRefusal(this.#log, id, code, message);
    this.#send({ type: 'error', ...(id === undefined ? {} : { id }), code, message, ...(details ? { details } : {}) });
  }
}

/** The request's logger is made when a line is logged: most requests log nothing. */
function requestScope(connection: Logger, id: number, op: OperationName): RequestScope {
  let log: Logger | undefined;
  return {
    id,
    get log() {
      return (log ??= connection.child({ request: id, op }));
    },
  };
}

/**
 * The event frames encoded for the event handed out last, by their names. A fan-out hands one
 * event to every subscribed connection in a row (dispatcher.ts), so each event is encoded once
 * per distinct `names` instead of once per subscriber. Events are not mutated once stored.
 */
let encodedFor: StoredEvent | undefined;
const encoded = new Map<string, string>();

export function encodeEvent(event: StoredEvent, names: string[]): string {
  if (encodedFor !== event) {
    encodedFor = event;
    encoded.clear();
  }
  const key = names.length === 1 ? (names[0] as string) : names.join('\u001f');
  let frame = encoded.get(key);
  if (frame === undefined) {
    frame = JSON.stringify({ type: 'event', names, event } satisfies ServerFrame);
    encoded.set(key, frame);
  }
  return frame;
}

function readId(json: unknown): number | undefined {
  if (json === null || typeof json !== 'object') return undefined;
  const id = (json as { id?: unknown }).id;
  return typeof id === 'number' && Number.isSafeInteger(id) && id >= 0 ? id : undefined;
}
