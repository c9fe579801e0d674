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

interface Pending {
  readonly op: OperationName;
  readonly frame: string;
  readonly resend: boolean;
  sent: boolean;
  resolve(result: unknown): void;
  reject(error: unknown): void;
}

/** Marks a failure caused only by a dropped connection, which the owner retries by itself. */
export const connectionLost = Symbol('connection lost');

export class RequestManager {
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();
  readonly #send: (frame: string) => boolean;
  readonly #defaultTimeout: number;

  constructor(send: (frame: string) => boolean, defaultTimeout: number) {
    this.#send = send;
    this.#defaultTimeout = defaultTimeout;
  }

  request<O extends OperationName>(op: O, params: Params<O>, options: RequestOptions = {}, resend = true): Promise<Result<O>> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(abortError(op, signal));
    const id = this.#nextId++;
    const frame = JSON.stringify({ type: 'request', id, op, params });
    return new Promise<Result<O>>((resolve, reject) => {
      const timeout = options.timeout ?? this.#defaultTimeout;
      const timer = setTimeout(() => {
        finish();
        reject(new EventflowError('E_EVENTFLOW_REQUEST_TIMEOUT', `${op} got no answer from the gateway within ${timeout} ms`, { details: { op, timeout } }));
      }, timeout);
      const onAbort = (): void => {
        finish();
        reject(abortError(op, signal));
      };
      const finish = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#pending.delete(id);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const pending: Pending = {
        op,
        frame,
        resend,
        sent: false,
        resolve: (result) => {
          finish();
          // Results are shaped by the gateway from protocol.ts; re-validating them would cost every
          // browser bundle the whole schema set.
          resolve(result as Result<O>);
        },
        reject: (error) => {
          finish();
          reject(error);
        },
      };
      this.#pending.set(id, pending);
      pending.sent = this.#send(frame);
    });
  }

  /** Sends what is waiting for a connection. */
  flush(): void {
    for (const pending of this.#pending.values()) {
      if (!pending.sent) pending.sent = this.#send(pending.frame);
    }
  }

  /** The connection dropped: resendable requests wait for the next one, the others fail. */
  lost(): void {
    for (const pending of [...this.#pending.values()]) {
      if (pending.resend) pending.sent = false;
      else if (pending.sent) pending.reject(connectionLost);
    }
  }

  settle(frame: ResultFrame | ErrorFrame): void {
    if (frame.id === undefined) return;
    const pending = this.#pending.get(frame.id);
    if (!pending) return; // answered after its timeout or abort
    if (frame.type === 'result') pending.resolve(frame.result);
    else pending.reject(errorFromFrame(frame));
  }

  failAll(error: unknown): void {
    for (const pending of [...this.#pending.values()]) pending.reject(error);
  }

  get size(): number {
    return this.#pending.size;
  }
}

export function errorFromFrame(frame: ErrorFrame): EventflowError {
  if (isErrorCode(frame.code)) {
    return new EventflowError(frame.code, frame.message, frame.details === undefined ? {} : { details: frame.details });
  }
  // A newer gateway may know codes this client does not; keep the original for diagnostics.
  return new EventflowError('E_EVENTFLOW_INTERNAL', frame.message, { details: { ...frame.details, code: frame.code } });
}

function abortError(op: string, signal: AbortSignal | undefined): EventflowError {
  return new EventflowError('E_EVENTFLOW_ABORTED', `${op} was aborted`, { cause: signal?.reason });
}
