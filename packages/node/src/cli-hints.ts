/**
 * What the CLI adds to an error it prints (commands.ts): what to do about the token it sent, about a
 * gateway that answered but could not serve, and about a request the gateway did not answer in time.
 */
import { EventflowError } from '@eventflow/core';

/** A refusal by the gateway, with what to do about the token the CLI sent (or did not send). */
export function withTokenHint(error: unknown, token: string | undefined): unknown {
  if (!(error instanceof EventflowError)) return error;
  const mint = '"eventflow token" mints one with the gateway\'s EVENTFLOW_JWT_SECRET';
  let hint: string | undefined;
  if (error.code === 'E_EVENTFLOW_UNAUTHORIZED') {
    hint = token === undefined ? `the gateway needs a token: pass --token or set EVENTFLOW_TOKEN (${mint})` : `the token from --token or EVENTFLOW_TOKEN was refused (${mint})`;
  } else if (error.code === 'E_EVENTFLOW_FORBIDDEN') {
    const { action, domain } = (error.details ?? {}) as { action?: unknown; domain?: unknown };
    if (typeof action === 'string') hint = `use a token that grants it (${mint}, e.g. --allow '${typeof domain === 'string' ? domain : '*'}:${action}')`;
  }
  return hint === undefined ? error : new EventflowError(error.code, `${error.message}; ${hint}`, { cause: error, ...(error.details === undefined ? {} : { details: error.details }) });
}

/** What a command that changes something may have done when its answer did not come. */
const changes: Readonly<Record<string, (args: readonly string[], id?: string) => string>> = {
  publish: (_args, id) => `the event may still have been stored: publish it again with --id ${id ?? '<its id>'} (a retry of the same id is never stored twice)`,
  'group-delete': ([domain]) => `the group may still have been deleted: check with "eventflow groups ${domain}" before running it again`,
  'dead-letter-requeue': ([, domain]) => `the dead letter may still have been requeued: check with "eventflow dead-letters ${domain}" before running it again`,
  'dead-letter-discard': ([, domain]) => `the dead letter may still have been discarded: check with "eventflow dead-letters ${domain}" before running it again`,
};

/**
 * A request the gateway did not answer within --timeout, said with what to do: the bare message
 * ("requeueDeadLetter: no answer from the gateway within 10000 ms") left open whether the change was
 * made, and running it again then said "nothing was requeued" of a dead letter the first run had requeued.
 */
export function withTimeoutHint(error: unknown, name: string, args: readonly string[], timeout: number, id?: string): unknown {
  if (!(error instanceof EventflowError) || error.code !== 'E_EVENTFLOW_REQUEST_TIMEOUT') return error;
  const fate = changes[name]?.(args, id);
  const hint = `the gateway or its store is slow or stalled; ${fate === undefined ? '' : `${fate}; `}raise --timeout (now ${timeout} ms) to wait longer`;
  return new EventflowError(error.code, `${error.message}; ${hint}`, { cause: error, ...(error.details === undefined ? {} : { details: error.details }) });
}

/**
 * A handshake the gateway closed as one that will serve again: 1011 (its store did not answer) or 1001 (stopping). The
 * URL is right, so the command waits for it within --timeout, as a client rides out an outage, instead of ending at the
 * first attempt as it does for a port nobody listens on.
 */
export function gatewayBusy(error: unknown): boolean {
  const code = error instanceof EventflowError && error.code === 'E_EVENTFLOW_CONNECTION_FAILED' ? (error.details as { code?: unknown } | undefined)?.code : undefined;
  return code === 1011 || code === 1001;
}

/** Why the command could not connect, for "could not connect to <url>: …": the client's words, and what to check for a busy gateway. */
export function connectionFailure(error: unknown, url: URL, timeout: number): string {
  if (!(error instanceof Error)) return `no connection within ${timeout} ms`;
  // The client goes on trying; the command does not.
  const said = error.message.replace(/; reconnecting with backoff$/, '');
  if (!gatewayBusy(error)) return said;
  const readyz = new URL('/readyz', url.href.replace(/^ws/, 'http')).href;
  return ((error as EventflowError).details as { code?: unknown }).code === 1011
    ? `${said}: the gateway runs but its store did not answer for ${timeout} ms; ${readyz} says why (curl ${readyz}), or raise --timeout to wait longer`
    : `${said}: the gateway was stopping for ${timeout} ms; start it again, or raise --timeout to wait for it`;
}

/** The note a command prints when it starts waiting for a busy gateway (gatewayBusy). */
export function connectionWait(error: EventflowError, timeout: number): string {
  const closed = (error.details as { code?: unknown } | undefined)?.code === 1011 ? 'its store does not answer (close code 1011)' : 'it is stopping (close code 1001)';
  return `the gateway answers, but ${closed}; waiting for it up to --timeout (${timeout} ms)`;
}
