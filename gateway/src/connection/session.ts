/**
 * One client connection: the handshake, the requests (read by frames.ts, checked and run here),
 * its rights, and what it sends. The Session is the one owner of its subscriptions, consumers and
 * waits, which it keeps in a Registrations (registrations.ts): operations register and remove them
 * through its methods (the Connection interface of operation.ts), which also update the dispatcher.
 * Bad input gets an error frame; the connection stays open and nothing is stored. So does a request
 * beyond the connection's limits (limits.ts): requests in flight, subscriptions + consumers + waits
 * (request-limits.ts), and the publish rate.
 */
import { EventflowError, type ErrorCode, type OperationName, type Params, type StoredEvent, type ServerTransport } from '@eventflow/core';
import { tracer, WriteTrace } from '../tracing.js';
import type { LogFields, Logger } from '../log.js';
import { ConditionLog, type ConditionLevel } from '../condition-log.js';
import { allows, allowsAny, denied, refusalOf, type Action, type Authorization } from './auth.js';
import { requestScope, type SessionContext } from './context.js';
import { encodeDelivery, encodeEvent } from './encode.js';
import { readFrame, readParams, unboundedReads, writes } from './frames.js';
import { helloRights, isRefusal, protocolRefusal, welcomeFrame } from './handshake.js';
import type { Connection, Operation, Operations } from './operation.js';
import { Outbound } from './outbound.js';
import { Registrations, type ConsumeOptions, type RegistrationHost } from './registrations.js';
import { RequestLimits } from './request-limits.js';
import type { Fate } from './request-waits.js';
import { ConnectionRights } from './rights.js';
import type { PatternFilter } from '../delivery/patterns.js';
import { eventFor, eventNotFound, hearsFailure, knows, readableAnswer } from './visibility.js';

export { BINARY_FRAME } from './frames.js';
export type { SessionContext } from './context.js';

export class Session implements Connection, RegistrationHost {
  readonly id: string;
  readonly context: SessionContext;
  readonly #transport: ServerTransport;
  readonly #operations: Operations;
  readonly #log: Logger;
  /** The connection's repeatable log lines, one per condition with a count (condition-log.ts). */
  readonly #conditions: ConditionLog;
  /** The one write path (outbound.ts). */
  readonly #out: Outbound;
  /**
   * Subscriptions, pattern subscriptions, consumers and waits (registrations.ts), made on the first registration: most
   * connections hold few or none (bench/idle-memory.mjs). Reads that must not create go through this field.
   */
  #registrationsMade: Registrations | undefined;
  /** Requests in flight, the publish rate, the registration limit. */
  readonly #limits: RequestLimits;
  /** The outbound rule for results (keepReadable), made once rather than per request. */
  readonly #mayRead = (domain: string): boolean => this.#mayReceive('read', domain);
  #greeted = false;
  /** A hello is being verified: later hellos are ignored. */
  #greeting = false;
  /** The gateway decided to close the connection, or it is closed: from then on no frame is handled and nothing is sent, however long the client takes to answer the close. */
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

  constructor(id: string, transport: ServerTransport, context: SessionContext, operations: Operations) {
    this.id = id;
    this.context = context;
    this.#transport = transport;
    this.#operations = operations;
    this.#log = context.log.child({ connection: id });
    this.#rights = new ConnectionRights(context.auth.anonymous, context.auth.maxLifetimeMs, () => this.#expire());
    this.#conditions = new ConditionLog(this.#log);
    this.#out = new Outbound({ transport, context, conditions: this.#conditions, stopped: () => this.#closing || this.#rights.ended(), close: (code, reason) => this.close(code, reason) });
    this.#limits = new RequestLimits(context.limits, (registration) => this.#registrationsMade?.holds(registration) ?? false, () => this.#registrationsMade?.count ?? 0);
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

  get #registrations(): Registrations {
    return (this.#registrationsMade ??= new Registrations(this));
  }

  // ── what the registrations need of their connection (RegistrationHost) ──

  get closing(): boolean {
    return this.#closing;
  }

  get bufferedAmount(): number {
    return this.#transport.bufferedAmount;
  }

  receives(action: Action, domain: string): boolean {
    return this.#mayReceive(action, domain);
  }

  sendFrame(frame: string): void {
    this.#out.frame(frame);
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
   * Throws as the request's own check would (auth.ts refusalOf) when the connection may no longer do
   * `action` on `domain`: after an await, `authenticate` may have narrowed the rights.
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
    // Narrower rights: registrations they no longer cover are dropped (registrations.ts).
    await this.#registrationsMade?.narrow(auth);
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
    // Fan-out calls this once per subscribed connection: the common case (no replay running on this connection) looks nothing up and sends the frame encoded for the previous connection.
    if (!this.#registrationsMade?.replaying) {
      this.#out.sharedEvent(encodeEvent(event, names));
      return;
    }
    const now = this.#registrationsMade.parkReplaying(event, names);
    if (now.length > 0) this.#out.sharedEvent(encodeEvent(event, now));
  }

  /** Live events parked by running replays, in bytes (bounded by EVENTFLOW_MAX_PARKED_BYTES). */
  get parkedBytes(): number {
    return this.#registrationsMade?.parkedBytes ?? 0;
  }

  sendMatched(event: StoredEvent, handles: string[]): void {
    if (this.#mayReceive('subscribe', event.domain)) this.#registrations.sendMatched(event, handles);
  }

  /** Whether this connection's token may consume the domain now (a settle of a delivery another connection was sent). */
  mayConsume(domain: string): boolean {
    return this.#mayReceive('consume', domain);
  }

  consumersRegistered(): Promise<void> | undefined {
    return this.#registrationsMade?.consumersRegistered();
  }

  sendDelivery(consumer: string, delivery: string, attempt: number, event: StoredEvent, dataText?: string): void {
    // Not sent: the delivery stays open until its consumer is removed (authenticate, close), which hands it back.
    if (!this.#mayReceive('consume', event.domain)) return;
    this.#out.sendEncoded(encodeDelivery(consumer, delivery, attempt, event, dataText), 'delivery', attempt);
  }

  sendRevoked(delivery: string): void {
    this.#out.send({ type: 'revoked', delivery });
  }

  /** The gateway ends consumer `handle` (Peer.endConsumer): its registrations drop it, then its client is told why. */
  endConsumer(handle: string, code: ErrorCode, message: string, details: Record<string, unknown>): void {
    if (this.#registrations.endConsumer(handle)) this.#out.send({ type: 'consumerEnded', consumer: handle, code, message, details });
  }

  sendWaited(wait: string, event: StoredEvent): void {
    this.#registrationsMade?.waitEnded(wait);
    if (this.#mayReceive('subscribe', event.domain)) this.#out.send({ type: 'waited', wait, event });
  }

  sendWaitFailed(wait: string, domain: string, message: string, details: Record<string, unknown>): void {
    this.#registrationsMade?.waitEnded(wait);
    void hearsFailure(this, String(details['event'])).then((heard) => heard && this.#mayReceive('subscribe', domain) && this.#out.send({ type: 'waitFailed', wait, code: 'E_EVENTFLOW_CONSUMER_FAILED', message, details }));
  }

  sendDeleted(domain: string, pid: string, id: string | undefined): void {
    if (this.#mayReceive('subscribe', domain)) this.#out.send({ type: 'deleted', domain, pid, ...(id === undefined ? {} : { id }) });
  }

  // ── registrations: kept by registrations.ts, which alone changes them, there and in the dispatcher ──

  /** Subscribes (domain, name); with `after` below the head, the events after it are replayed once the result is sent. Returns the head. */
  subscribe(domain: string, name: string, after: number | undefined | Promise<number | undefined>): Promise<number> {
    return this.#registrations.subscribe(domain, name, after);
  }

  unsubscribe(domain: string, name: string): Promise<void> | undefined {
    return this.#registrations.unsubscribe(domain, name);
  }

  /** Registers (or replaces) pattern subscription `handle`, replayed from `after` (or the head) once the result is sent. Returns the head. */
  subscribePattern(handle: string, filter: PatternFilter, after: number | undefined): Promise<number> {
    return this.#registrations.subscribePattern(handle, filter, after);
  }

  unsubscribePattern(handle: string): Promise<void> | undefined {
    return this.#registrationsMade?.unsubscribePattern(handle);
  }

  /** Registers consumer `handle` for (domain, name) in `group`. Returns the head. A handle already naming another consumer is refused. */
  consume(handle: string, domain: string, name: string, options: ConsumeOptions): Promise<number> {
    return this.#registrations.consume(handle, domain, name, options);
  }

  /** Unregisters consumer `handle`; its open deliveries go to other consumers. */
  removeConsumer(handle: string): Promise<void> {
    return this.#registrations.removeConsumer(handle);
  }

  /** Registers wait `handle`; `after` also matches an outcome already stored after that position. */
  wait(handle: string, domain: string, pid: string, names: string[], after: number | undefined | Promise<number>, request?: string): Promise<void> {
    return this.#registrations.wait(handle, domain, pid, names, after, request);
  }

  requestWait(id: string): Promise<void> | undefined {
    return this.#registrationsMade?.requestWaitsMade?.check(id);
  }

  cancelWait(handle: string): Promise<void> | undefined {
    return this.#registrations.cancelWait(handle);
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
    const decided = op === 'wait' ? this.#registrations.requestWaits.begin(params) : undefined;
    const busy = this.#limits.enter(op);
    if (busy) {
      this.#out.coded(id, busy);
      return decided?.(busy);
    }
    try {
      // Performed whether or not a wait is decided (an optional call skips its arguments).
      const fate = await this.#perform(id, op, params);
      decided?.(fate);
    } finally {
      this.#limits.leave();
    }
  }

  /** Validates, checks (rights, publish rate, registration limit), runs and answers one request. */
  async #perform<O extends OperationName>(id: number, op: O, params: unknown): Promise<Fate> {
    // A write's span (tracing.ts), only when the gateway traces: validation is its first step.
    const trace = tracer && writes.has(op) ? new WriteTrace(op, params) : undefined;
    const read = readParams(id, op, params, this.context.limits);
    if (read.kind === 'refused') return this.#refused(trace, read, () => this.#out.refuse(read));
    const data = read.params;
    // Nothing is done, counted or answered with data for a request the connection may not make.
    const refusal = refusalOf(this.#rights.current, op, data);
    if (refusal) return this.#refused(trace, refusal, () => this.#out.coded(id, refusal));
    const spent = this.#limits.spend(op);
    if (spent) return this.#refused(trace, spent, () => this.#out.coded(id, spent));
    // A new subscription, consumer or wait is counted from here on, while its request runs.
    const reserved = this.#limits.reserve(op, data);
    if (reserved instanceof EventflowError) return this.#refused(trace, reserved, () => this.#out.coded(id, reserved));
    // A read with no bound on its answer waits for a turn (read-turns.ts), then is made only for a client that takes what it is sent.
    const turn = unboundedReads.has(op) ? await this.context.readTurns.take(this) : undefined;
    const request = requestScope(this.#log, id, op, trace);
    try {
      if (turn && !this.#out.keepingUp()) return undefined;
      const operation = this.#operations[op] as Operation<O>;
      const result = await operation(this, data, request);
      trace?.end(undefined, (result as { position?: number }).position);
      this.context.metrics.handled(op);
      // The outbound rule for results: a read under the rights as they are now, and only events of domains the connection
      // may read. A request()'s wait and publish are answered together, and with the outcome (request-waits.ts › takeAnswer).
      const readable = readableAnswer(result, this.#rights.current, op, data, this.#mayRead);
      if (readable === undefined) throw eventNotFound((data as { id?: string }).id ?? '');
      this.#out[this.#registrationsMade?.requestWaitsMade?.takeAnswer(op, data) ?? 'send']({ type: 'result', id, result: readable });
      for (const start of this.#registrationsMade?.takeAfterResult() ?? []) start();
      return undefined;
    } catch (error) {
      trace?.end(error);
      this.#registrationsMade?.takeAfterResult();
      this.#registrationsMade?.requestWaitsMade?.takeAnswer(op, data);
      if (!(error instanceof EventflowError)) this.#conditions.note(`request failed: ${op}`, 'error', 'request failed', { request: id, op, error });
      const answer = error instanceof EventflowError ? error : { code: 'E_EVENTFLOW_STORE_FAILED', message: `${op} failed inside the gateway; see the gateway log (connection ${this.id}, request ${id})`, details: undefined };
      this.#out.error(id, answer.code, answer.message, answer.details);
      return answer;
    } finally {
      turn?.();
      reserved?.();
    }
  }

  /** A refused request's answer, its write span ended with the refusal. */
  #refused(trace: WriteTrace | undefined, refusal: NonNullable<Fate>, answer: () => void): Fate {
    trace?.end(new EventflowError(refusal.code as ErrorCode, refusal.message));
    answer();
    return refusal;
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
