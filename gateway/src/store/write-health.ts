/**
 * What a store's failed writes tell: their answer to the client, and the store's readiness.
 *
 * A write the store could not make because of its own state (no space, an I/O error, the
 * database unreachable; not a value of the event) is answered E_EVENTFLOW_STORE_FAILED with
 * `details.retryable: true`, the event's `details.id`, and `details.stored`: `false` when nothing was stored, `'unknown'`
 * when the store cannot tell (a MySQL COMMIT sent, and the connection lost before its answer).
 * Either way the same request again, with the same event id, is the fix: the store's same-id
 * idempotency answers it with the stored event when the first one did commit. The clients
 * (packages/core requests.ts) do that within the request's timeout; an application that made a
 * new id instead would store the event twice.
 *
 * Such a failure also makes the store's writes "failing" (`WriteHealth`) until a write succeeds:
 * /readyz answers 503 meanwhile (readiness.ts) and, to find out when they work again without
 * waiting for a publish, runs the store's write check.
 */
import { EventflowError } from '@eventflow/core';
import { ownDriverCode } from './driver-code.js';

/** E_EVENTFLOW_STORE_FAILED for a write that failed with the store, not with the event (see the header). */
export function writeFailed(cause: unknown, what: string, id: string, stored: false | 'unknown'): EventflowError {
  const code = driverCode(cause);
  const reason = `${what}${code ? ` (${code})` : ''}`;
  const message =
    stored === 'unknown'
      ? `${reason}, and whether the event was stored is unknown; send it again with the same id (the client does so within its timeout), never with a new one`
      : `${reason}; nothing was stored: send it again with the same id once the store is back (the client does so within its timeout)`;
  return new EventflowError('E_EVENTFLOW_STORE_FAILED', message, { cause, details: { id, stored, retryable: true } });
}

/** The driver's code of an error (or of the error it wraps): SQLITE_FULL, ECONNREFUSED, ER_… */
function driverCode(error: unknown): string | undefined {
  const own = ownDriverCode(error);
  if (own !== undefined && !own.startsWith('E_EVENTFLOW_')) return own;
  return error instanceof Error ? ownDriverCode(error.cause) : undefined;
}

/** Whether the store's writes work, as its writes found out; see the header. */
export class WriteHealth {
  #failing = false;
  #checking: Promise<void> | undefined;

  failed(): void {
    this.#failing = true;
  }

  succeeded(): void {
    this.#failing = false;
  }

  /**
   * Resolves when writes work: at once unless the last write failed; then once `probe` (a write
   * that stores nothing) succeeds, which also ends the failing state. Rejects with the probe's
   * error, coded. One probe at a time, shared by concurrent callers.
   */
  check(probe: () => Promise<void>): Promise<void> {
    if (!this.#failing) return Promise.resolve();
    this.#checking ??= probe()
      .then(
        () => this.succeeded(),
        (error: unknown) => {
          this.failed();
          throw error instanceof EventflowError ? error : new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the store cannot write', { cause: error });
        },
      )
      .finally(() => (this.#checking = undefined));
    return this.#checking;
  }
}
