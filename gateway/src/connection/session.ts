/**
 * One client connection: the handshake, frame parsing and validation, request dispatch, and the
 * connection's subscriptions (with replay after a position). Bad input gets an error frame; the
 * connection stays open and nothing is stored. So does a request beyond the connection's limits
 * (limits.ts): requests in flight, subscriptions + consumers + waits, and the publish rate.
 */
import { EventflowError, type OperationName, type Result, type ServerFrame, type StoredEvent, type Transport } from '@eventflow/core';
import { clientFrame, describeIssues, isOperationName, operations, PROTOCOL_VERSION } from '@eventflow/core/protocol';
import { en } from 'zod/locales';
import type { z } from 'zod/mini';
import { allows, allowsAny, denied, rules, type Action, type Authenticator, type Authorization } from './auth.js';
import type { Dispatcher, Peer } from '../delivery/dispatcher.js';
import { dataShapeRefusal, frameTooDense, scanFrame } from './data-shape.js';
import { limitExceeded, rateLimited, TokenBucket, type ConnectionLimits } from './limits.js';
import type { LogFields, Logger } from '../log.js';
import type { GatewayMetrics } from '../metrics.js';
import { ConditionLog, type ConditionLevel } from '../condition-log.js';
import { logRefusal } from '../refusal-log.js';
import type { EventStore } from '../store/store.js';
import type { Router } from '../router/router.js';
import { ConnectionRights } from './rights.js';
import { eventFor, eventNotFound, keepReadable, knows } from './visibility.js';

export interface SessionContext {
  readonly gatewayId: string;
  readonly store: EventStore;
  readonly router: Router;
  readonly dispatcher: Dispatcher;
  readonly log: Logger;
  readonly metrics: GatewayMetrics;
  readonly maxFrameBytes: number;
  readonly maxBufferedBytes: number;
  /** Live events parked while replays run, per connection (EVENTFLOW_MAX_PARKED_BYTES); beyond, they are re-read from the store. */
  readonly maxParkedBytes: number;
  readonly handshakeTimeout: number;
  /**
   * EVENTFLOW_AUTH_TIMEOUT_MS when it applies (jwt without anonymous rights), else 0: a connection
   * without a valid token this long after it opened is closed with 4408.
   */
  readonly authTimeout?: number;
  /** Told when the connection first holds a valid token (server/admission.ts counts those without). */
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
  /** What the parked events weigh (their frames' length), also counted in the connection's #parkedBytes. */
  parkedBytes: number;
  /**
   * Parking went over EVENTFLOW_MAX_PARKED_BYTES: the parked events were dropped, and so is every
   * live one until the replay has read them from the store (they are stored: nothing is lost).
   */
  overflowed: boolean;
}

const live = (): SubscriptionState => ({ parked: undefined, parkedBytes: 0, overflowed: false });

/** What a transport passes for a binary WebSocket frame: no text frame is this (not JSON, leading NUL). */
export const BINARY_FRAME = '\u0000binary';

export class Session implements Peer {
  readonly id: string;
  readonly context: SessionContext;
  readonly #transport: Transport;
  readonly #handlers: Handlers;
  readonly #log: Logger;
  /** The connection's repeatable log lines, one per condition with a count (condition-log.ts). */
  readonly #conditions: ConditionLog;
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
  /** Bytes of the live events parked by all of this connection's replays; at most context.maxParkedBytes. */
  #parkedBytes = 0;
  /** The publish rate; undefined when unlimited. */
  readonly #writeBucket: TokenBucket | undefined;
  /** Work to start once the current request's result has been sent (e.g. a subscription replay). */
  #afterResult: Array<() => void> = [];
  #greeted = false;
  /** A hello is being verified: later hellos are ignored. */
  #greeting = false;
  /**
   * The gateway decided to close the connection, or it is closed: from then on no frame is
   * handled and nothing is sent, however long the client takes to answer the close.
   */
  #closing = false;
  /** The transport reported the close (set once, by #onClose). */
  #closed = false;
  /** Registrations are being (or have been) removed from the dispatcher. */
  #cleanup: Promise<void> | undefined;
  /** What this connection may do now; set from the hello's token; closes the connection with 4401 when they end. */
  readonly #rights: ConnectionRights;
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
    this.#rights = new ConnectionRights(context.auth.anonymous, context.auth.maxLifetimeMs, () => this.#expire());
    this.#conditions = new ConditionLog(this.#log);
    this.#writeBucket = context.limits.maxPublishRate > 0 ? new TokenBucket(context.limits.maxPublishRate) : undefined;
    this.#handshakeTimer = setTimeout(() => this.close(4000, 'handshake timeout'), context.handshakeTimeout);
    if (context.authTimeout && !this.#rights.current.authenticated) {
      this.#authTimer = setTimeout(() => {
        this.#log.debug('no valid token in time; closing', { timeoutMs: context.authTimeout });
        this.close(4408, 'authentication timeout');
      }, context.authTimeout);
    }
    transport.listen({
      message: (frame) =>
        void this.#onMessage(frame).catch((error: unknown) => {
          // The gateway never crashes on input: anything unexpected becomes a coded error frame.
          this.#conditions.note('unexpected failure', 'error', 'unexpected failure handling a frame', { error });
          this.#sendError(undefined, 'E_EVENTFLOW_INTERNAL', 'the gateway failed to handle this frame; see its log');
        }),
      close: (code) => void this.#onClose(code),
    });
  }

  /**
   * Closes the connection: from now on nothing of it is handled or sent (#closing), its
   * registrations leave the dispatcher at once (so that its deliveries go to other consumers), and
   * the transport drops a client that does not answer the close within a grace (server.ts).
   */
  close(code: number, reason: string): void {
    if (this.#closing) return;
    this.#closing = true;
    clearTimeout(this.#handshakeTimer);
    clearTimeout(this.#authTimer);
    this.#rights.stop();
    this.#transport.close(code, reason);
    // Not synchronously: close() may be called from inside the dispatcher's fan-out over these registrations.
    queueMicrotask(() => void this.#removeRegistrations());
  }

  #removeRegistrations(): Promise<void> {
    return (this.#cleanup ??= this.context.dispatcher.removePeer(this).catch((error: unknown) => this.#log.error('cleanup after disconnect failed', { error })));
  }

  /** Whether the connection holds a valid token (always, without authentication). */
  get authenticated(): boolean {
    return this.#rights.current.authenticated;
  }

  // ── authorization ──

  /**
   * The stored event `id`, for `op` which needs `action` on its domain. An event of a domain the
   * connection may not know of is answered as an unknown id (visibility.ts).
   */
  async eventFor(op: OperationName, action: Action, id: string): Promise<StoredEvent> {
    return eventFor(this.#rights.current, op, action, id, await this.context.store.read(id));
  }

  /**
   * Throws as the request's own check would (#refusal) when the connection may no longer do
   * `action` on `domain`: for a request about to register something after awaiting, during which
   * `authenticate` may have narrowed the rights (and already dropped what they no longer cover).
   */
  recheck(op: OperationName, action: Action, domain: string): void {
    const auth = this.#rights.current;
    if (!allows(auth, action, domain)) throw denied(auth, op, action, domain);
  }

  /** Whether the connection may know that events of `domain` exist, for an operation needing `action` there (visibility.ts). */
  knows(action: Action, domain: string): boolean {
    return knows(this.#rights.current, action, domain);
  }

  /** Replaces the connection's rights with those of `token`; throws E_EVENTFLOW_UNAUTHORIZED (keeping the old rights) when it is not valid. */
  async authenticate(token: string): Promise<void> {
    const auth = await this.context.auth.verify(token);
    if (this.#closing) return;
    this.#grant(auth);
    // Narrower rights: registrations they no longer cover are dropped, so that nothing of those
    // domains is matched for this connection any more (the outbound rule already stops it leaving).
    for (const handle of this.context.dispatcher.cancelWaitsWhere(this, (domain) => !allows(auth, 'subscribe', domain))) this.waits.delete(handle);
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

  #expire(): void {
    this.#log.debug('token expired; closing so that the client reconnects with a fresh one');
    this.close(4401, 'token expired');
  }

  /**
   * The outbound rule: the one check every push (replayed and live events, deliveries, waited
   * events, deletions) and every event in a request's result passes just before it leaves. It uses
   * the connection's rights as they are now, not as they were when the subscription, consumer, wait
   * or request was made; nothing leaves a closing connection or one whose rights have ended.
   */
  #mayReceive(action: Action, domain: string): boolean {
    return !this.#closing && !this.#rights.ended() && this.#rights.allows(action, domain);
  }

  /** Replaces the connection's rights; a first valid token stops the authentication timeout and leaves the unauthenticated count (server/admission.ts). */
  #grant(auth: Authorization): void {
    this.#rights.replace(auth);
    if (!auth.authenticated) return;
    clearTimeout(this.#authTimer);
    this.context.admission?.authenticated(this);
  }

  /** The check that needs only the params (auth.ts `rules`); undefined when allowed. */
  #refusal(op: OperationName, params: unknown): Error | undefined {
    const rule = rules[op];
    const auth = this.#rights.current;
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
    }
  }

  // ── Peer ──

  /** Logs a line a client can cause over and over: the first in full, the rest counted (condition-log.ts). */
  note(condition: string, level: ConditionLevel, message: string, fields?: LogFields): void {
    this.#conditions.note(condition, level, message, fields);
  }

  sendEvent(event: StoredEvent, names: string[]): void {
    if (!this.#mayReceive('subscribe', event.domain)) return;
    // Fan-out calls this once per subscribed connection: the common case (no replay running on
    // this connection) looks nothing up and sends the frame encoded for the previous connection.
    if (this.#replaying === 0) {
      this.#sendFrame(encodeEvent(event, names));
      return;
    }
    const now: string[] = [];
    for (const name of names) {
      const subscription = this.subscriptions.get(`${event.domain}\u001f${name}`);
      if (subscription?.parked) this.#park(subscription, event, names);
      else now.push(name);
    }
    if (now.length > 0) this.#sendFrame(encodeEvent(event, now));
  }

  /** Live events parked by running replays, in bytes (bounded by EVENTFLOW_MAX_PARKED_BYTES). */
  get parkedBytes(): number {
    return this.#parkedBytes;
  }

  /** Parks a live event of a replaying subscription, or drops it when parking is over budget (see SubscriptionState.overflowed). */
  #park(state: SubscriptionState, event: StoredEvent, names: string[]): void {
    if (state.overflowed || !state.parked) return;
    // The frame fan-out encodes for the other connections anyway (cached): its length is the weight.
    const bytes = encodeEvent(event, names).length;
    if (this.#parkedBytes + bytes <= this.context.maxParkedBytes) {
      state.parked.push(event);
      state.parkedBytes += bytes;
      this.#parkedBytes += bytes;
      return;
    }
    this.#unpark(state);
    state.parked = [];
    state.overflowed = true;
    this.#conditions.note('parked-overflow', 'info', 'live events parked during a replay exceed EVENTFLOW_MAX_PARKED_BYTES; the replay reads them from the store instead', {
      limit: this.context.maxParkedBytes,
    });
  }

  /** Forgets a subscription's parked events and gives their bytes back to the connection's budget. */
  #unpark(state: SubscriptionState): void {
    this.#parkedBytes -= state.parkedBytes;
    state.parkedBytes = 0;
    state.parked = undefined;
  }

  sendDelivery(consumer: string, delivery: string, attempt: number, event: StoredEvent): void {
    // Not sent: the delivery stays open until its consumer is removed (authenticate, close), which hands it back.
    if (!this.#mayReceive('consume', event.domain)) return;
    this.#send({ type: 'delivery', consumer, delivery, attempt, event });
  }

  sendRevoked(delivery: string): void {
    this.#send({ type: 'revoked', delivery });
  }

  sendWaited(wait: string, event: StoredEvent): void {
    this.waits.delete(wait);
    if (this.#mayReceive('subscribe', event.domain)) this.#send({ type: 'waited', wait, event });
  }

  sendDeleted(domain: string, pid: string, id: string | undefined): void {
    if (this.#mayReceive('subscribe', domain)) this.#send({ type: 'deleted', domain, pid, ...(id === undefined ? {} : { id }) });
  }

  // ── subscriptions with replay ──

  async subscribe(domain: string, name: string, after: number | undefined): Promise<number> {
    const key = `${domain}\u001f${name}`;
    const head = await this.context.store.head();
    this.recheck('subscribe', 'subscribe', domain);
    if (this.subscriptions.has(key) || after === undefined || after >= head) {
      if (!this.subscriptions.has(key)) this.subscriptions.set(key, live());
      this.context.dispatcher.subscribe(this, domain, name);
      return head;
    }
    const state: SubscriptionState = { ...live(), parked: [] };
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
    const key = `${domain}\u001f${name}`;
    // Unsubscribed (by the client, by `authenticate` taking the right away, or unsubscribed and
    // subscribed again, which starts its own replay) or closing: this one stops.
    const gone = (): boolean => this.#closing || this.subscriptions.get(key) !== state || !this.#mayReceive('subscribe', domain);
    let caughtUp = false;
    try {
      for (;;) {
        const page = await this.context.store.readPublishedAfter({ domain, name }, last, REPLAY_PAGE);
        for (const event of page) {
          if (this.#transport.bufferedAmount > this.context.maxBufferedBytes / 4) await this.#drained();
          if (gone()) return;
          this.#sendFrame(encodeEvent(event, names));
          last = event.position;
        }
        if (gone()) return;
        if (page.length === REPLAY_PAGE) continue;
        if (!state.overflowed) {
          caughtUp = true;
          break;
        }
        // Live events were dropped meanwhile: they are stored after `last`, and live events from now on are parked
        // again. Both are read by the next pass (a dropped event was stored before it was handed out).
        state.overflowed = false;
      }
    } catch (error) {
      // Sending live events now would leave a gap; the client resumes from its position instead.
      this.#conditions.note('replay failed', 'error', 'subscription replay failed; closing so that the client resumes', { domain, name, error });
      this.close(1011, 'replay failed');
      return;
    } finally {
      this.#replaying--;
      if (!caughtUp) this.#unpark(state);
    }
    const parked = state.parked ?? [];
    this.#unpark(state);
    if (gone()) return;
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
    while (!this.#closing && this.#transport.bufferedAmount > this.context.maxBufferedBytes / 4) {
      if (Date.now() - started > REPLAY_STALL_MS) {
        this.#conditions.note('slow client', 'warn', 'client too slow during replay; disconnecting', { buffered: this.#transport.bufferedAmount });
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
    // A connection being closed executes nothing, whatever the client sends before it answers the close.
    if (this.#closing || this.#rights.ended()) return;
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
      // The outbound rule for results: only events of domains the connection may read leave.
      const readable = keepReadable(result, (domain) => this.#mayReceive('read', domain));
      if (readable === undefined) throw eventNotFound((data as { id?: string }).id ?? '');
      this.#send({ type: 'result', id, result: readable });
      for (const start of this.#afterResult.splice(0)) start();
    } catch (error) {
      this.#afterResult = [];
      if (error instanceof EventflowError) {
        this.#sendError(id, error.code, error.message, error.details);
      } else {
        this.#conditions.note(`request failed: ${op}`, 'error', 'request failed', { request: id, op, error });
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
      if (this.#closing) return;
    }
    this.#grant(auth);
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
    this.#closing = true;
    clearTimeout(this.#handshakeTimer);
    this.#rights.stop();
    clearTimeout(this.#authTimer);
    this.#log.debug('client disconnected', { code });
    await this.#removeRegistrations();
    this.#conditions.flush();
    this.#resolveClosed();
  }

  #send(frame: ServerFrame): void {
    if (!this.#closing) this.#sendFrame(JSON.stringify(frame), frame.type, frame.type === 'delivery' ? frame.attempt : 1);
  }

  /** `type` and `attempt` only feed the metrics: event frames arrive here already encoded (encodeEvent). */
  #sendFrame(frame: string, type: ServerFrame['type'] = 'event', attempt = 1): void {
    // Rights that ended a moment ago (the timer may run late) close the connection before this frame.
    if (this.#closing || this.#rights.ended()) return;
    if (this.#transport.bufferedAmount > this.context.maxBufferedBytes) {
      // A client that cannot keep up is cut off rather than letting gateway memory grow; it resumes from its positions.
      this.#conditions.note('slow client', 'warn', 'client too slow; disconnecting', { buffered: this.#transport.bufferedAmount });
      this.context.metrics.dropped(type);
      this.close(4008, 'client too slow');
      return;
    }
    this.context.metrics.sent(type, attempt);
    this.#transport.send(frame);
  }

  #sendError(id: number | undefined, code: string, message: string, details?: Record<string, unknown>): void {
    this.context.metrics.errorSent(code);
    logRefusal(this.#conditions, id, code, message);
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
