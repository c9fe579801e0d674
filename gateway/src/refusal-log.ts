/**
 * Logging of the error frames a connection is sent. Authorization failures and limit refusals are
 * worth an operator's attention, but a client stuck in a loop can cause thousands a second: each
 * connection logs the first of each such code at `info`, and the rest at `debug`. Other errors
 * (bad input, unknown deliveries, …) are the client's business: `debug`.
 */
import type { Logger } from './log.js';

const noteworthy: ReadonlyMap<string, string> = new Map([
  ['E_EVENTFLOW_UNAUTHORIZED', 'request refused: not authenticated'],
  ['E_EVENTFLOW_FORBIDDEN', 'request refused: not authorized'],
  ['E_EVENTFLOW_LIMIT_EXCEEDED', 'request refused: connection limit reached'],
  ['E_EVENTFLOW_RATE_LIMITED', 'request refused: publish rate limit reached'],
]);

/** Connection logger → the noteworthy codes it has logged at info. */
const logged = new WeakMap<Logger, Set<string>>();

/** `log` is the connection's logger; `request` the request id, absent for frame-level errors. */
export function logRefusal(log: Logger, request: number | undefined, code: string, message: string): void {
  const summary = noteworthy.get(code);
  // Without a request id it is a frame-level error (bad JSON, a refused hello, logged where it happens).
  if (summary === undefined || request === undefined) {
    log.debug('error sent', { request, code, reason: message });
    return;
  }
  let codes = logged.get(log);
  if (!codes) logged.set(log, (codes = new Set()));
  const first = !codes.has(code);
  codes.add(code);
  (first ? log.info : log.debug)(summary, { request, code, reason: message, ...(first ? { note: 'later refusals of this code on this connection are logged at debug' } : {}) });
}
