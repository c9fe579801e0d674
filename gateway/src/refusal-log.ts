/**
 * Logging of the error frames a connection is sent. Authorization failures and limit refusals are
 * worth an operator's attention, but a client stuck in a loop can cause thousands a second: each
 * connection logs the first of each such code at `info` and counts the rest (condition-log.ts).
 * Other errors (bad input, unknown deliveries, …) are the client's business: `debug`, counted the
 * same way.
 */
import type { ConditionLog } from './condition-log.js';

const noteworthy: ReadonlyMap<string, string> = new Map([
  ['E_EVENTFLOW_UNAUTHORIZED', 'request refused: not authenticated'],
  ['E_EVENTFLOW_FORBIDDEN', 'request refused: not authorized'],
  ['E_EVENTFLOW_LIMIT_EXCEEDED', 'request refused: connection limit reached'],
  ['E_EVENTFLOW_RATE_LIMITED', 'request refused: publish rate limit reached'],
]);

/** `conditions` is the connection's; `request` the request id, absent for frame-level errors. */
export function logRefusal(conditions: ConditionLog, request: number | undefined, code: string, message: string): void {
  const summary = noteworthy.get(code);
  // Without a request id it is a frame-level error (bad JSON, a refused hello, logged where it happens).
  if (summary === undefined || request === undefined) {
    conditions.note(`error sent: ${code}`, 'debug', 'error sent', { request, code, reason: message });
    return;
  }
  conditions.note(`refused: ${code}`, 'info', summary, { request, code, reason: message });
}
