/**
 * Pending requests by id: correlation, timeouts, AbortSignal, and what happens to them when the
 * connection drops. Requests marked `resend` are sent again on the next connection: publishes
 * carry a client-generated id, so the gateway stores them once; reads and deletes are safe to
 * repeat. Registrations are not resent: they fail with `connectionLost` and their owner
 * re-registers them with the state it keeps.
 */
import { EventflowError, isErrorCode } from './errors.js';
import type { ErrorFrame, OperationName, Params, Result, ResultFrame } from './protocol.js';

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
export function pending<T>(what: string, signal: AbortSignal | undefined, start: (settle: Settle<T>) => (error: unknown) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let cleanup: ((error: unknown) => void) | undefined;
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
    signal?.addEventListener('abort', onAbort, { once: true });
    cleanup = start(settle);
  });
}

interface Pending {
  readonly frame: string;
  readonly resend: boolean;
  sent?: boolean;
  settle: Settle;
}

export class RequestManager {
  #nextId = 1;
  readonly #pending = new Map<unknown, Pending>();
  readonly #send: (frame: string) => boolean;
  readonly #defaultTimeout: number;

  constructor(send: (frame: string) => boolean, defaultTimeout: number) {
    this.#send = send;
    this.#defaultTimeout = defaultTimeout;
  }

  request<O extends OperationName>(op: O, params: Params<O>, { signal, timeout = this.#defaultTimeout }: RequestOptions = {}, resend = true): Promise<Result<O>> {
    // Results are shaped by the gateway from protocol.ts; re-validating them would cost every
    // browser bundle the whole schema set.
    return pending<Result<O>>(op, signal, (settle) => {
      const id = this.#nextId++;
      const frame = JSON.stringify({ type: 'request', id, op, params });
      const timer = setTimeout(() => settle(new EventflowError('E_EVENTFLOW_REQUEST_TIMEOUT', `${op}: no answer from the gateway within ${timeout} ms`, { details: { op, timeout } })), timeout);
      const request: Pending = { frame, resend, settle: settle as Settle };
      this.#pending.set(id, request);
      request.sent = this.#send(frame);
      return () => {
        clearTimeout(timer);
        this.#pending.delete(id);
      };
    });
  }

  /** Sends what is waiting for a connection. */
  flush(): void {
    for (const pending of this.#pending.values()) pending.sent ||= this.#send(pending.frame);
  }

  /** The connection dropped: resendable requests wait for the next one, the others fail. */
  lost(): void {
    // Settling deletes from the map, which its iterator tolerates.
    for (const pending of this.#pending.values()) {
      if (pending.resend) pending.sent = false;
      else if (pending.sent) pending.settle(connectionLost);
    }
  }

  /** Settles the request a frame answers (none when it was answered after its timeout or abort). */
  settle(frame: ResultFrame | ErrorFrame): void {
    const pending = this.#pending.get(frame.id);
    if (frame.type === 'result') pending?.settle(undefined, frame.result);
    else pending?.settle(errorFromFrame(frame));
  }

  failAll(error: unknown): void {
    for (const pending of this.#pending.values()) pending.settle(error);
  }

  get size(): number {
    return this.#pending.size;
  }
}

export function errorFromFrame({ code, message, details }: ErrorFrame): EventflowError {
  // A newer gateway may know codes this client does not; keep the original for diagnostics.
  return isErrorCode(code) ? new EventflowError(code, message, { details }) : new EventflowError('E_EVENTFLOW_INTERNAL', message, { details: { ...details, code } });
}

export const abortError = (what: string, signal: AbortSignal | undefined): EventflowError =>
  new EventflowError('E_EVENTFLOW_ABORTED', `${what} was aborted`, { cause: signal?.reason });
