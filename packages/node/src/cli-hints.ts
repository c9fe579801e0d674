/**
 * What the CLI adds to an error it prints (commands.ts): what to do about the token it sent, and
 * about a request the gateway did not answer in time.
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
