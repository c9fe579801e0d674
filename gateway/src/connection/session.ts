/**
 * One client connection: the handshake, the requests (read by frames.ts, checked and run here),
 * and the connection's registrations. The Session is the one owner of its subscriptions,
 * consumers and waits: operations.ts registers and removes them through its methods, which also
 * update the dispatcher. Bad input gets an error frame; the connection stays open and nothing is
 * stored. So does a request beyond the connection's limits (limits.ts): requests in flight,
 * subscriptions + consumers + waits (registration-limit.ts), and the publish rate.
 */
import { EventflowError, streamKey, type OperationName, type StoredEvent, type Transport } from '@eventflow/core';
import type { Peer } from '../delivery/dispatcher.js';
import type { LogFields, Logger } from '../log.js';
import { ConditionLog, type ConditionLevel } from '../condition-log.js';
import { allows, allowsAny, denied, refusalOf, type Action, type Authorization } from './auth.js';
import { requestScope, type SessionContext } from './context.js';
import { encodeEvent } from './encode.js';
import { readFrame, readParams } from './frames.js';
import { helloRights, isRefusal, protocolRefusal, welcomeFrame } from './handshake.js';
import type { Operation, Operations } from './operations.js';
import { Outbound } from './outbound.js';
import { RequestLimits, type Registration } from './request-limits.js';
import { limitExceeded } from './limits.js';
import { Replays, type SubscriptionState } from './replay.js';
import { ConnectionRights } from './rights.js';
import { PatternSubscriptions } from './pattern-subscriptions.js';
import type { PatternFilter } from '../delivery/patterns.js';
import type { RetryPolicy } from '../delivery/retry-policy.js';
import { eventFor, eventNotFound, keepReadable, knows } from './visibility.js';

export { BINARY_FRAME } from './frames.js';
export type { SessionContext } from './context.js';

/** A consumer of this connection: what its handle consumes. */
interface ConsumerState {
  readonly domain: string;
  readonly name: string;
  readonly group: string;
}

/** A consumer's registration options, with the gateway's defaults applied (operations.ts). */
export interface ConsumeOptions {
  group: string;
  concurrency: number;
  /** Stored with the group when given. */
  ordered: boolean | undefined;
  retry: RetryPolicy | undefined;
}

/** A subscription of this connection: its (domain, name) and its replay state (replay.ts). */
interface Subscription extends SubscriptionState {
  readonly domain: string;
  readonly name: string;
}

export class Session implements Peer {
  readonly id: string;
  readonly context: SessionContext;
  readonly #transport: Transport;
  readonly #operations: Operations;
  readonly #log: Logger;
  /** The connection's repeatable log lines, one per condition with a count (condition-log.ts). */
  readonly #conditions: ConditionLog;
  /** The one write path (outbound.ts). */
  readonly #out: Outbound;
  // The registrations and their helpers are made on first use: most connections hold one kind or
  // none, and an empty Map or a helper with its callbacks is a few hundred bytes per connection
  // (bench/idle-memory.mjs). Reads that must not create go through the `…Made` fields.
  /** streamKey(domain, name) → the subscription. */
  #subscriptionsMade: Map<string, Subscription> | undefined;
  /** Consumer handle → what it consumes, so that a handle cannot stand for two consumers. */
  #consumersMade: Map<string, ConsumerState> | undefined;
  /** Handles of the waits registered and not finished yet. */
  #waitsMade: Set<string> | undefined;
  /**
   * The consumer groups (domain, name, group) this connection has registered consumers in, over its
   * life (EVENTFLOW_MAX_GROUPS_PER_CONNECTION): groups are durable, so removing the consumer does
   * not give the slot back.
   */
  #groupsJoined: Set<string> | undefined;
  /** Requests in flight, the publish rate, the registration limit. */
  readonly #limits: RequestLimits;
  #replaysMade: Replays | undefined;
  /** Handle → pattern subscription (pattern-subscriptions.ts). */
  #patternsMade: PatternSubscriptions | undefined;
  /** Work to start once the current request's result has been sent (e.g. a subscription replay). */
  #afterResult: Array<() => void> | undefined;
  /** The outbound rule for results (keepReadable), made once rather than per request. */
  readonly #mayRead = (domain: string): boolean => this.#mayReceive('read', domain);
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
  /** Resolves once the connection is gone and its registrations are cleaned up. */
  readonly closed = new Promise<void>((resolve) => (this.#resolveClosed = resolve));
  /** Cleared and dropped once greeted: a cleared Timeout still holds its callback. */
  #handshakeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(id: string, transport: Transport, context: SessionContext, operations: Operations) {
    this.id = id;
    this.context = context;
    this.#transport = transport;
    this.#operations = operations;
    this.#log = context.log.child({ connection: id });
    this.#rights = new ConnectionRights(context.auth.anonymous, context.auth.maxLifetimeMs, () => this.#expire());
    this.#conditions = new ConditionLog(this.#log);
    this.#out = new Outbound({
      transport,
      context,
      conditions: this.#conditions,
      stopped: () => this.#closing || this.#rights.ended(),
      close: (code, reason) => this.close(code, reason),
    });
    this.#limits = new RequestLimits(
      context.limits,
      (registration) => this.#holds(registration),
      () => (this.#subscriptionsMade?.size ?? 0) + (this.#patternsMade?.size ?? 0) + (this.#consumersMade?.size ?? 0) + (this.#waitsMade?.size ?? 0),
    );
    this.#handshakeTimer = setTimeout(() => this.close(4000, 'handshake timeout'), context.handshakeTimeout);
    if (context.authTimeout && !this.#rights.current.authenticated) {
      this.#authTimer = setTimeout(() => {
        this.#log.debug('no valid token in time; closing', { timeoutMs: context.authTimeout });
        this.close(4408, 'authentication timeout');
      }, context.authTimeout);
    }
    // The gateway never crashes on input: anything unexpected becomes a coded error frame.
    const failed = (error: unknown): void => {
      this.#conditions.note('unexpected failure', 'error', 'unexpected failure handling a frame', { error });
      this.#out.error(undefined, 'E_EVENTFLOW_INTERNAL', 'the gateway failed to handle this frame; see its log');
    };
    transport.listen({
      message: (frame) => {
        try {
          this.#onMessage(frame)?.catch(failed);
        } catch (error) {
          failed(error);
        }
      },
      close: (code) => void this.#onClose(code),
    });
  }

  get #subscriptions(): Map<string, Subscription> {
    return (this.#subscriptionsMade ??= new Map());
  }

  get #consumers(): Map<string, ConsumerState> {
    return (this.#consumersMade ??= new Map());
  }

  get #waits(): Set<string> {
    return (this.#waitsMade ??= new Set());
  }

  get #replays(): Replays {
    return (this.#replaysMade ??= new Replays({
      store: this.context.store,
      maxBufferedBytes: this.context.maxBufferedBytes,
      maxParkedBytes: this.context.maxParkedBytes,
      maxScanRate: this.context.maxScanRate,
      turns: this.context.readTurns,
      bufferedAmount: () => this.#transport.bufferedAmount,
      closing: () => this.#closing,
      sendFrame: (frame) => this.#out.frame(frame),
      close: (code, reason) => this.close(code, reason),
      note: (condition, level, message, fields) => this.#conditions.note(condition, level, message, fields),
    }));
  }

  get #patterns(): PatternSubscriptions {
    return (this.#patternsMade ??= new PatternSubscriptions({
      replays: this.#replays,
      readPublishedSince: (after, limit) => this.context.store.readPublishedSince(after, limit),
      mayReceive: (domain) => this.#mayReceive('subscribe', domain),
      closing: () => this.#closing,
      sendFrame: (frame) => this.#out.frame(frame),
    }));
  }

  /**
   * Closes the connection: from now on nothing of it is handled or sent (#closing), its
   * registrations leave the dispatcher at once (so that its deliveries go to other consumers), and
   * the transport drops a client that does not answer the close within a grace (server/ws-transport.ts).
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
   * Throws as the request's own check would (auth.ts refusalOf) when the connection may no longer
   * do `action` on `domain`: for a request about to register something after awaiting, during
   * which `authenticate` may have narrowed the rights (and already dropped what they no longer cover).
   */
  recheck(op: OperationName, action: Action, domain: string): void {
    const auth = this.#rights.current;
    if (!allows(auth, action, domain)) throw denied(auth, op, action, domain);
  }

  /** Whether the connection may know that events of `domain` exist, for an operation needing `action` there (visibility.ts). */
  knows(action: Action, domain: string): boolean {
    return knows(this.#rights.current, action, domain);
  }

  /** Whether the connection's rights allow `action` on `domain` now (on some domain without one). */
  may(action: Action, domain?: string): boolean {
    return domain === undefined ? allowsAny(this.#rights.current, action) : allows(this.#rights.current, action, domain);
  }

  /**
   * The domain patterns the connection's rights allow `action` on now (glob.ts), for a store read to
   * select by; undefined when they allow it on every domain (a `*` grant).
   */
  patterns(action: Action): readonly string[] | undefined {
    const grants = this.#rights.current.grants[action] ?? [];
    return grants.some((pattern) => pattern.source === '*') ? undefined : grants.map((pattern) => pattern.source);
  }

  /** Replaces the connection's rights with those of `token`; throws E_EVENTFLOW_UNAUTHORIZED (keeping the old rights) when it is not valid. */
  async authenticate(token: string): Promise<void> {
    const auth = await this.context.auth.verify(token);
    if (this.#closing) return;
    this.#grant(auth);
    // Narrower rights: registrations they no longer cover are dropped, so that nothing of those
    // domains is matched for this connection any more (the outbound rule already stops it leaving).
    for (const handle of this.context.dispatcher.cancelWaitsWhere(this, (domain) => !allows(auth, 'subscribe', domain))) this.#waits.delete(handle);
    for (const { domain, name } of [...(this.#subscriptionsMade?.values() ?? [])]) if (!allows(auth, 'subscribe', domain)) this.unsubscribe(domain, name);
    for (const [handle, { domain }] of [...(this.#consumersMade ?? [])]) if (!allows(auth, 'consume', domain)) await this.removeConsumer(handle);
    for (const [handle, { pattern }] of this.#patternsMade?.handles() ?? []) if (!allows(auth, 'wildcard', pattern)) this.unsubscribePattern(handle);
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
    this.#authTimer = undefined;
    this.context.admission?.authenticated(this);
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
    if (!this.#replaysMade || this.#replaysMade.running === 0) {
      this.#out.sharedEvent(encodeEvent(event, names));
      return;
    }
    const now: string[] = [];
    for (const name of names) {
      const subscription = this.#subscriptions.get(streamKey(event.domain, name));
      if (subscription?.parked) this.#replays.park(subscription, event, names);
      else now.push(name);
    }
    if (now.length > 0) this.#out.sharedEvent(encodeEvent(event, now));
  }

  /** Live events parked by running replays, in bytes (bounded by EVENTFLOW_MAX_PARKED_BYTES). */
  get parkedBytes(): number {
    return this.#replaysMade?.parkedBytes ?? 0;
  }

  sendMatched(event: StoredEvent, handles: string[]): void {
    if (this.#mayReceive('subscribe', event.domain)) this.#patterns.send(event, handles);
  }

  /** Whether this connection's token may consume the domain now (a settle of a delivery another connection was sent). */
  mayConsume(domain: string): boolean {
    return this.#mayReceive('consume', domain);
  }

  sendDelivery(consumer: string, delivery: string, attempt: number, event: StoredEvent): void {
    // Not sent: the delivery stays open until its consumer is removed (authenticate, close), which hands it back.
    if (!this.#mayReceive('consume', event.domain)) return;
    this.#out.send({ type: 'delivery', consumer, delivery, attempt, event });
  }

  sendRevoked(delivery: string): void {
    this.#out.send({ type: 'revoked', delivery });
  }

  sendWaited(wait: string, event: StoredEvent): void {
    this.#waitsMade?.delete(wait);
    if (this.#mayReceive('subscribe', event.domain)) this.#out.send({ type: 'waited', wait, event });
  }

  sendWaitFailed(wait: string, domain: string, message: string, details: Record<string, unknown>): void {
    this.#waitsMade?.delete(wait);
    if (this.#mayReceive('subscribe', domain)) this.#out.send({ type: 'waitFailed', wait, code: 'E_EVENTFLOW_CONSUMER_FAILED', message, details });
  }

  sendDeleted(domain: string, pid: string, id: string | undefined): void {
    if (this.#mayReceive('subscribe', domain)) this.#out.send({ type: 'deleted', domain, pid, ...(id === undefined ? {} : { id }) });
  }

  // ── registrations: only these methods change them, here and in the dispatcher ──

  /** Subscribes (domain, name); with `after` below the head, the events after it are replayed once the result is sent. Returns the head. */
  async subscribe(domain: string, name: string, after: number | undefined): Promise<number> {
    const key = streamKey(domain, name);
    const head = await this.context.store.head();
    this.recheck('subscribe', 'subscribe', domain);
    if (this.#subscriptions.has(key) || after === undefined || after >= head) {
      if (!this.#subscriptions.has(key)) this.#subscriptions.set(key, { parked: undefined, parkedBytes: 0, overflowed: false, domain, name });
      this.context.dispatcher.subscribe(this, domain, name);
      return head;
    }
    // Literals of one shape, not spreads: a spread clone may give each connection's object a map of its own.
    const subscription: Subscription = { parked: this.#replays.begin(), parkedBytes: 0, overflowed: false, domain, name };
    this.#subscriptions.set(key, subscription);
    this.context.dispatcher.subscribe(this, domain, name);
    // Unsubscribed (by the client, by `authenticate` taking the right away, or unsubscribed and
    // subscribed again, which starts its own replay) or closing: the replay stops.
    const gone = (): boolean => this.#closing || this.#subscriptions.get(key) !== subscription || !this.#mayReceive('subscribe', domain);
    // The result goes out first; the replay follows on the same ordered connection.
    (this.#afterResult ??= []).push(() => void this.#replays.run(domain, name, after, subscription, gone));
    return head;
  }

  unsubscribe(domain: string, name: string): void {
    this.#subscriptions.delete(streamKey(domain, name));
    this.context.dispatcher.unsubscribe(this, domain, name);
  }

  /**
   * Registers (or replaces) pattern subscription `handle`. Every one replays from `after` (or the
   * head) first, once the result is sent (pattern-subscriptions.ts). Returns the head.
   */
  async subscribePattern(handle: string, filter: PatternFilter, after: number | undefined): Promise<number> {
    const head = await this.context.store.head();
    this.recheck('subscribePattern', 'wildcard', filter.pattern);
    const replay = this.#patterns.add(handle, filter, Math.min(after ?? head, head));
    this.context.dispatcher.subscribePattern(this, handle, filter, head);
    (this.#afterResult ??= []).push(replay);
    return head;
  }

  unsubscribePattern(handle: string): void {
    if (this.#patternsMade?.remove(handle)) this.context.dispatcher.unsubscribePattern(this, handle);
  }

  /**
   * Registers consumer `handle` for (domain, name) as a member of `options.group` with its credit
   * and retry policy. Returns the head. A handle already naming another consumer is refused; the
   * same consumer registered again takes its new options.
   */
  async consume(handle: string, domain: string, name: string, options: ConsumeOptions): Promise<number> {
    const { group } = options;
    const existing = this.#consumers.get(handle);
    if (existing !== undefined && (existing.domain !== domain || existing.name !== name || existing.group !== group)) {
      throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `params.consumer: handle "${handle}" already names another consumer on this connection; use a new handle`);
    }
    const joined = this.#joinGroup(streamKey(streamKey(domain, name), group));
    this.#consumers.set(handle, { domain, name, group });
    const undo = (): void => {
      if (existing === undefined) this.#consumers.delete(handle);
      if (joined) this.#groupsJoined?.delete(joined);
    };
    const head = await this.context.store.head();
    try {
      this.recheck('consume', 'consume', domain);
    } catch (error) {
      undo();
      throw error;
    }
    try {
      const spec = { group, concurrency: options.concurrency, retry: options.retry };
      await this.context.dispatcher.addConsumer(this, handle, domain, name, spec, options.ordered === undefined ? {} : { ordered: options.ordered });
    } catch (error) {
      undo();
      throw error;
    }
    return head;
  }

  /**
   * Counts a group this connection registers a consumer in; returns its key when it is new here
   * (taken back if the registration fails), undefined when the connection joined it before. Throws
   * E_EVENTFLOW_LIMIT_EXCEEDED past EVENTFLOW_MAX_GROUPS_PER_CONNECTION, before anything is stored.
   */
  #joinGroup(key: string): string | undefined {
    const joined = (this.#groupsJoined ??= new Set());
    if (joined.has(key)) return undefined;
    const { maxGroups } = this.context.limits;
    if (joined.size >= maxGroups) {
      throw limitExceeded('EVENTFLOW_MAX_GROUPS_PER_CONNECTION', maxGroups, 'consume: this connection has registered consumers in as many consumer groups as allowed; use a connection per worker, or fewer groups');
    }
    joined.add(key);
    return key;
  }

  /** Unregisters consumer `handle`; its open deliveries go to other consumers. */
  async removeConsumer(handle: string): Promise<void> {
    this.#consumers.delete(handle);
    await this.context.dispatcher.removeConsumer(this, handle);
  }

  /** Registers wait `handle`; `after` also matches an outcome already stored after that position. */
  async wait(handle: string, domain: string, pid: string, names: string[], after: number | undefined, request?: string): Promise<void> {
    this.recheck('wait', 'subscribe', domain);
    // Counted against EVENTFLOW_MAX_SUBSCRIPTIONS until it is waited (sendWaited) or cancelled.
    this.#waits.add(handle);
    await this.context.dispatcher.addWait(this, handle, domain, pid, names, after, request);
  }

  cancelWait(handle: string): void {
    this.#waits.delete(handle);
    this.context.dispatcher.cancelWait(this, handle);
  }

  #holds(registration: Registration): boolean {
    if (registration.kind === 'subscription') return this.#subscriptionsMade?.has(registration.key) || (registration.key.startsWith('pattern:') && this.#patternsMade?.has(registration.key.slice(8))) || false;
    if (registration.kind === 'consumer') return this.#consumersMade?.has(registration.key) ?? false;
    return this.#waitsMade?.has(registration.key) ?? false;
  }

  // ── requests ──

  /** Not async: the promise it returns is the request's own, one hop fewer per frame. */
  #onMessage(data: string): Promise<void> | undefined {
    // A connection being closed executes nothing, whatever the client sends before it answers the close.
    if (this.#closing || this.#rights.ended()) return undefined;
    const frame = readFrame(data, this.context.limits, this.#greeted);
    if (frame.kind === 'hello') return this.#hello(frame.protocol, frame.client, frame.token);
    if (frame.kind === 'request') return this.#request(frame.id, frame.op, frame.params);
    this.#out.refuse(frame);
    return undefined;
  }

  /** Counts the request in flight (EVENTFLOW_MAX_IN_FLIGHT) while it runs. */
  async #request<O extends OperationName>(id: number, op: O, params: unknown): Promise<void> {
    const busy = this.#limits.enter(op);
    if (busy) return this.#out.coded(id, busy);
    try {
      await this.#perform(id, op, params);
    } finally {
      this.#limits.leave();
    }
  }

  /** Validates, checks (rights, publish rate, registration limit), runs and answers one request. */
  async #perform<O extends OperationName>(id: number, op: O, params: unknown): Promise<void> {
    const read = readParams(id, op, params, this.context.limits);
    if (read.kind === 'refused') return this.#out.refuse(read);
    const data = read.params;
    // Nothing is done, counted or answered with data for a request the connection may not make.
    const refusal = refusalOf(this.#rights.current, op, data);
    if (refusal) return this.#out.coded(id, refusal);
    const spent = this.#limits.spend(op);
    if (spent) return this.#out.coded(id, spent);
    // A new subscription, consumer or wait is counted from here on, while its request runs.
    const reserved = this.#limits.reserve(op, data);
    if (reserved instanceof EventflowError) return this.#out.coded(id, reserved);
    const request = requestScope(this.#log, id, op);
    try {
      const operation = this.#operations[op] as Operation<O>;
      const result = await operation(this, data, request);
      this.context.metrics.handled(op);
      // The outbound rule for results: only events of domains the connection may read leave.
      const readable = keepReadable(result, this.#mayRead);
      if (readable === undefined) throw eventNotFound((data as { id?: string }).id ?? '');
      this.#out.send({ type: 'result', id, result: readable });
      const after = this.#afterResult;
      this.#afterResult = undefined;
      for (const start of after ?? []) start();
    } catch (error) {
      this.#afterResult = undefined;
      if (error instanceof EventflowError) {
        this.#out.error(id, error.code, error.message, error.details);
      } else {
        this.#conditions.note(`request failed: ${op}`, 'error', 'request failed', { request: id, op, error });
        this.#out.error(id, 'E_EVENTFLOW_STORE_FAILED', `${op} failed inside the gateway; see the gateway log (connection ${this.id}, request ${id})`);
      }
    } finally {
      reserved?.();
    }
  }

  async #hello(protocol: number, client: string | undefined, token: string | undefined): Promise<void> {
    if (this.#greeted || this.#greeting) return;
    const wrongVersion = protocolRefusal(protocol);
    if (wrongVersion) return this.#refuseHello(wrongVersion);
    this.#greeting = true;
    const auth = await helloRights(this.context.auth, token, client, this.#log);
    if (isRefusal(auth)) return this.#refuseHello(auth);
    if (this.#closing) return;
    this.#grant(auth);
    this.#greeted = true;
    clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = undefined;
    this.#log.debug('client connected', { client });
    void this.context.store.head().then(
      (head) => this.#out.send(welcomeFrame(this.context, this.id, head)),
      (error: unknown) => {
        this.#log.error('store unavailable during handshake', { error });
        this.close(1011, 'store unavailable');
      },
    );
  }

  #refuseHello(refusal: { code: string; message: string; closeCode: number; closeReason: string }): void {
    this.#out.error(undefined, refusal.code, refusal.message);
    this.close(refusal.closeCode, refusal.closeReason);
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
}
