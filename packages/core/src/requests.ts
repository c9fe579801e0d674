/**
 * Pending requests by id: correlation, timeouts, AbortSignal, and what happens to them when the
 * connection drops. Requests marked `resend` are sent again on the next connection: publishes
 * carry a client-generated id, so the gateway stores them once; reads and deletes are safe to
 * repeat. Registrations are not resent: they fail with `connectionLost` and their owner
 * re-registers them with the state it keeps.
 *
 * A write the gateway answers E_EVENTFLOW_STORE_FAILED with `details.retryable` (its store failed;
 * `details.stored` false or 'unknown') is sent again, the same frame with the same event id, after
 * a backoff and until its timeout: the store's same-id idempotency answers it with the stored
 * event if an earlier attempt did commit, so an application never has a reason to publish again
 * under a new id (which would store the event twice). Out of time, it fails with the store's error,
 * `stored: 'unknown'` if any attempt left it unknown; with E_EVENTFLOW_REQUEST_TIMEOUT (its fate unknown)
 * if it was sent again and that went unanswered.
 */
import { EventflowError, isCodeShaped } from './errors.js';
import { DEFAULT_RETRY_MAX_DELAY, DEFAULT_RETRY_MIN_DELAY, GATEWAY_MAX_IN_FLIGHT, GATEWAY_MAX_PUBLISH_RATE } from './defaults.js';
import { backoffDelay } from './backoff.js';
import { invalid } from './validate.js';
import type { ConsumerEndedFrame, ErrorFrame, OperationName, Params, Result, ResultFrame } from './protocol.js';

export interface RequestOptions {
  /** Milliseconds until E_EVENTFLOW_REQUEST_TIMEOUT; counted from the call, including time spent reconnecting. */
  timeout?: number;
  signal?: AbortSignal | undefined;
}

/** Marks a failure caused only by a dropped connection, which the owner retries by itself. */
export const connectionLost = Symbol('connection lost');

/** Settles a promise made by `pending`: rejects with `error`, or resolves with `value` when `error` is undefined. */
export type Settle<T = unknown> = (error: unknown, value?: T) => void;

/**
 * A promise that `start` settles through the function it is given (the first call wins). When
 * `signal` aborts, it rejects with E_EVENTFLOW_ABORTED, and `start` is not run at all when the
 * signal already has. The function `start` returns runs once it settles, with the error if any.
 */
export function pending<T>(what: string, signal: AbortSignal | undefined, start: (settle: Settle<T>) => ((error: unknown) => void) | void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let cleanup: ((error: unknown) => void) | void;
    let done = false;
    const onAbort = (): void => settle(abortError(what, signal));
    const settle: Settle<T> = (error, value) => {
      if (done) return;
      done = true;
      signal?.removeEventListener('abort', onAbort);
      cleanup?.(error);
      if (error === undefined) resolve(value as T);
      else reject(error);
    };
    if (signal?.aborted) return onAbort();
    // settle removes it, so no { once: true }.
    signal?.addEventListener('abort', onAbort);
    cleanup = start(settle);
  });
}

interface Pending {
  readonly op: OperationName;
  readonly frame: string;
  /** It spends the publish rate (publish, persist, schedule: what the gateway paces). */
  readonly write: boolean;
  readonly resend: boolean;
  /** Whether the client was connected at some moment since the call (else a timeout is E_EVENTFLOW_OFFLINE). */
  connected?: boolean;
  /** A write's last retryable store failure (see the header), and how many there were. */
  failed?: EventflowError;
  failures?: number;
  settle: Settle;
}

/** What the client keeps within, from `welcome.limits` (RequestManager.open). */
export interface SendLimits {
  maxInFlight?: number | undefined;
  maxPublishRate?: number | undefined;
  maxFrameBytes?: number | undefined;
}

/**
 * The pending requests and the send window. At most `maxInFlight` requests are on the wire (sent
 * and not answered, counting those whose caller gave up: the gateway still counts them); later
 * ones wait in the client, in call order, and go out as answers come back. Writes are paced by a
 * token bucket like the gateway's (burst = rate, refilled continuously), and a write the gateway
 * still refuses as rate limited is sent again after `retryAfterMs`, within its timeout. So a
 * burst of calls never turns into E_EVENTFLOW_LIMIT_EXCEEDED or E_EVENTFLOW_RATE_LIMITED.
 */
export class RequestManager {
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();
  /** Ids on the wire of the current connection. */
  readonly #onWire = new Set<number>();
  /** The requests not sent on this connection, in call order: #pump walks these, not the hundreds on the wire of a pipelined client. */
  #unsent = new Map<number, Pending>();
  readonly #send: (frame: string) => boolean;
  readonly #defaultTimeout: number;
  #open = false;
  #window = GATEWAY_MAX_IN_FLIGHT;
  #maxFrameBytes = Infinity;
  #rate = GATEWAY_MAX_PUBLISH_RATE;
  #tokens = 0;
  #refilledAt = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Set while calls cannot succeed (RequestManager.block): resendable requests fail with it at once. */
  #blocked: EventflowError | undefined;
  /** Set by failAll (the client closed): every request fails with it at once, the features' (settles, extends) too. */
  #closed: EventflowError | undefined;

  constructor(send: (frame: string) => boolean, defaultTimeout: number) {
    this.#send = send;
    this.#defaultTimeout = defaultTimeout;
  }

  request<O extends OperationName>(op: O, params: Params<O>, { signal, timeout = this.#defaultTimeout }: RequestOptions = {}, resend = true): Promise<Result<O>> {
    // Results are shaped by the gateway from protocol.ts; re-validating them would cost every
    // browser bundle the whole schema set.
    // A write names its event: one that ends without an answer may be stored, and is to be sent again with that id, never a new one.
    const event = (params as { event?: { id?: string } } | undefined)?.event?.id;
    const what = event ? `${op} of event ${event}` : op;
    const answer = pending<Result<O>>(what, signal, (settle) => {
      const refusal = this.#closed ?? (resend ? this.#blocked : undefined);
      if (refusal) return settle(blockedError(refusal, op));
      const id = this.#nextId++;
      const request: Pending = { op, frame: JSON.stringify({ type: 'request', id, op, params }), write: op === 'publish' || op === 'persist' || op === 'schedule', resend, connected: this.#open, settle: settle as Settle };
      // Never connected while it waited: the gateway cannot have seen it, and "no answer" would mislead.
      const timer = setTimeout(
        () =>
          settle(
            // A write the store failed, sent again and unanswered (on the wire, or to go again after a lost connection), may be
            // stored after the call gave up: its fate is unknown, as a timeout's. Its first answer's `stored: false` told the
            // application it could publish anew under a new id, and the retry and the new id stored the event twice.
            (!this.#onWire.has(id) && !this.#unsent.has(id) && request.failed) ||
              new EventflowError(
                request.connected ? 'E_EVENTFLOW_REQUEST_TIMEOUT' : 'E_EVENTFLOW_OFFLINE',
                `${what}: ${request.connected ? 'no answer from the gateway within' : 'not connected to the gateway during the whole'} ${timeout} ms`,
                { details: { op, timeout, id: event } },
              ),
          ),
        timeout,
      );
      this.#pending.set(id, request);
      this.#unsent.set(id, request);
      return () => {
        clearTimeout(timer);
        this.#pending.delete(id);
        this.#unsent.delete(id);
      };
    });
    // After `pending` holds the cleanup that settling runs: #pump may settle the request at once.
    this.#pump();
    return answer;
  }

  /** A connection is open with these limits: what waits for it is sent, within them. */
  open({ maxInFlight = GATEWAY_MAX_IN_FLIGHT, maxPublishRate = GATEWAY_MAX_PUBLISH_RATE, maxFrameBytes = Infinity }: SendLimits = {}): void {
    this.#open = true;
    this.#window = maxInFlight;
    this.#maxFrameBytes = maxFrameBytes;
    // The gateway's bucket of a new connection is full.
    this.#tokens = this.#rate = maxPublishRate;
    this.#refilledAt = Date.now();
    for (const request of this.#pending.values()) request.connected = true;
    this.#pump();
  }

  /** The connection dropped: resendable requests wait for the next one, the others fail. */
  lost(): void {
    this.#open = false;
    this.#onWire.clear();
    // Settling deletes from the map, which its iterator tolerates.
    for (const request of this.#pending.values()) if (!request.resend) request.settle(connectionLost);
    this.#unsent = new Map(this.#pending);
  }

  /** Settles the request a frame answers (none when it was answered after its timeout or abort). */
  settle(frame: ResultFrame | ErrorFrame): void {
    const id = frame.id as number;
    this.#onWire.delete(id);
    const request = this.#pending.get(id);
    if (frame.type === 'result') request?.settle(undefined, frame.result);
    else if (request && frame.code === 'E_EVENTFLOW_RATE_LIMITED') {
      // A refusal for the client's own pace (the gateway's bucket ran dry first, e.g. when answers
      // bunch up on the way): nothing was stored, so the write waits `retryAfterMs` and goes
      // again, in its place. The bucket goes into debt: the next token comes after retryAfterMs.
      this.#writeDelay();
      this.#tokens = Math.min(this.#tokens, 1 - (Number(frame.details?.retryAfterMs ?? 1000) * this.#rate) / 1000);
      // Back in its place: what is pending and not on the wire, in call order (the map's).
      this.#unsent = new Map([...this.#pending].filter(([id]) => !this.#onWire.has(id)));
    } else if (request?.write && frame.code === 'E_EVENTFLOW_STORE_FAILED' && frame.details?.retryable === true) {
      // Sent again with the same event id until its timeout (see the header).
      const stored = request.failed?.details?.stored === 'unknown' ? 'unknown' : frame.details.stored;
      const failures = (request.failures = (request.failures ?? 0) + 1);
      request.failed = new EventflowError(frame.code, frame.message, { details: { ...frame.details, stored, attempts: failures } });
      setTimeout(() => {
        if (this.#pending.get(id) !== request || this.#onWire.has(id) || this.#unsent.has(id)) return;
        this.#unsent.set(id, request);
        this.#pump();
      }, backoffDelay(failures - 1, { minDelay: DEFAULT_RETRY_MIN_DELAY, maxDelay: DEFAULT_RETRY_MAX_DELAY }));
    } else request?.settle(errorFromFrame(frame));
    this.#pump();
  }

  /** Sends waiting requests in call order while the window and the publish rate allow. */
  #pump(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const [id, request] of this.#unsent) {
      if (!this.#open || this.#onWire.size >= this.#window) return;
      const { frame, op } = request;
      const limit = this.#maxFrameBytes;
      // The gateway closes a connection whose frame is over its limit (1009); the request, sent again
      // on each new connection, closed every one until its timeout, dropping the client's
      // subscriptions and consumers each time. It is answered here instead, as the gateway would if it
      // could read it. A UTF-16 unit is at most 3 bytes of UTF-8 (which a Blob counts, as the WebSocket
      // sends it): counted only when the frame may be over.
      const bytes = frame.length * 3 > limit ? new Blob([frame]).size : 0;
      if (bytes > limit) {
        // Settling takes it out of #unsent (which a Map's iterator tolerates).
        request.settle(invalid(`${op}: ${bytes} bytes, over the gateway's frame limit of ${limit} (EVENTFLOW_MAX_FRAME_BYTES); send less data in one request`, { bytes, limit }));
        continue;
      }
      const wait = request.write ? this.#writeDelay() : 0;
      if (wait > 0) return void (this.#timer = setTimeout(() => this.#pump(), wait));
      if (!this.#send(frame)) return;
      if (request.write) this.#tokens--;
      this.#unsent.delete(id);
      this.#onWire.add(id);
    }
  }

  /** Ms until the next write may go (0: now). */
  #writeDelay(): number {
    const now = Date.now();
    if (!this.#rate) return 0;
    this.#tokens = Math.min(this.#rate, this.#tokens + ((now - this.#refilledAt) * this.#rate) / 1000);
    this.#refilledAt = now;
    return this.#tokens >= 1 ? 0 : Math.ceil(((1 - this.#tokens) * 1000) / this.#rate);
  }

  /**
   * Until the next connection opens, calls cannot succeed (a refused handshake, or a gateway never
   * reached): the calls waiting fail with `error` now, and new ones at once. Registrations and the
   * features' requests (settles, extends: not resendable) keep waiting for the connection.
   * `undefined`: calls can succeed again (a handshake did).
   */
  block(error: EventflowError | undefined): void {
    this.#blocked = error;
    if (error) for (const request of this.#pending.values()) if (request.resend) request.settle(blockedError(error, request.op));
  }

  failAll(error: EventflowError): void {
    this.#closed = error;
    for (const request of this.#pending.values()) request.settle(error);
  }
}

export function errorFromFrame({ code, message, details }: ErrorFrame | ConsumerEndedFrame): EventflowError {
  // A newer gateway may know codes this client does not list: they pass through as sent (the
  // list itself stays out of browser bundles). Anything else is kept in details for diagnostics.
  return isCodeShaped(code) ? new EventflowError(code, message, { details }) : new EventflowError('E_EVENTFLOW_INTERNAL', message, { details: { ...details, code } });
}

const blockedError = (error: EventflowError, op: string): EventflowError => new EventflowError(error.code, `${op}: ${error.message}`, { cause: error });

export const abortError = (what: string, signal: AbortSignal | undefined): EventflowError =>
  new EventflowError('E_EVENTFLOW_ABORTED', `${what} was aborted`, { cause: signal?.reason });
