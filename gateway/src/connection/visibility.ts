/**
 * What a token may learn about events (EVENTFLOW_AUTH=jwt; with `none` every rule here allows
 * everything). Two rules, each written once:
 *
 * - Content: an event leaves for the client only when the connection's rights, as they are at
 *   send time, allow it on the event's own domain: `read` for request results (`keepReadable`),
 *   the registration's action for pushes (Session's outbound rule).
 * - Existence: an event of a domain the token may not act on or receive is answered exactly as an
 *   id that names no event (`eventFor`), so a token cannot probe other tenants' ids.
 * - A consumer's failure (a request()'s `waitFailed`, which carries the handler's error text) goes
 *   only to a token that may publish or consume the request's event in its own domain (`hearsFailure`).
 */
import { EventflowError, type OperationName, type StoredEvent } from '@eventflow/core';
import { allows, denied, refusalOf, rules, type Action, type Authorization } from './auth.js';
import type { Connection } from './operation.js';

/** The actions by which a connection is handed a domain's events: holding one, it may know they exist. */
const receiving: readonly Action[] = ['read', 'subscribe', 'consume'];

/** Whether `auth` may know that an event of `domain` exists, for an operation that needs `action` there. */
export function knows(auth: Authorization, action: Action, domain: string): boolean {
  return allows(auth, action, domain) || receiving.some((receive) => allows(auth, receive, domain));
}

/** The store's answer for an id that names no event (store.ts), which a foreign id gets too. */
export function eventNotFound(id: string): EventflowError {
  return new EventflowError('E_EVENTFLOW_EVENT_NOT_FOUND', `no event has id "${id}"`, { details: { id } });
}

/** The store's answer for a `rid` that names no event, which a foreign `rid` gets too. */
export function referenceNotFound(id: string, rid: string): EventflowError {
  return new EventflowError('E_EVENTFLOW_REFERENCE_NOT_FOUND', `event "${id}" refers (rid) to event "${rid}", which does not exist`, { details: { id, rid } });
}

/**
 * The event `stored` for `op`, which needs `action` on the event's domain: E_EVENTFLOW_EVENT_NOT_FOUND
 * when there is none or the token may not know of it (the same error, message and details), and
 * E_EVENTFLOW_FORBIDDEN when the token knows of the domain's events but may not do `action` there.
 */
export function eventFor(auth: Authorization, op: OperationName, action: Action, id: string, stored: StoredEvent | undefined): StoredEvent {
  if (stored === undefined || !knows(auth, action, stored.domain)) throw eventNotFound(id);
  if (!allows(auth, action, stored.domain)) throw denied(auth, op, action, stored.domain);
  return stored;
}

/**
 * A read's result as it may leave now: the read's own check made again under the rights as they are
 * when it is answered (`authenticate` may have narrowed them while it waited for its turn or the
 * store), throwing the refusal a request sent now would get, then keepReadable. Only reads: a
 * write or a registration was done under the rights it was checked with, and is answered as done.
 */
export function readableAnswer<R extends object>(result: R, auth: Authorization, op: OperationName, params: unknown, mayRead: (domain: string) => boolean): R | undefined {
  const rule = rules[op];
  if (rule.kind === 'domain' && rule.action === 'read') {
    const refusal = refusalOf(auth, op, params);
    if (refusal) throw refusal;
  }
  return keepReadable(result, mayRead);
}

/**
 * A request's result as it may leave: events (`events`, `event`) only of domains `mayRead` allows.
 * Undefined when the result is one event that may not leave (the request is answered as not found).
 */
export function keepReadable<R extends object>(result: R, mayRead: (domain: string) => boolean): R | undefined {
  if ('event' in result && isEvent(result.event) && !mayRead(result.event.domain)) return undefined;
  if (!('events' in result) || !Array.isArray(result.events)) return result;
  const events = result.events as unknown[];
  const kept = events.filter((event) => !isEvent(event) || mayRead(event.domain));
  return kept.length === events.length ? result : { ...result, events: kept };
}

function isEvent(value: unknown): value is StoredEvent {
  return value !== null && typeof value === 'object' && typeof (value as { domain?: unknown }).domain === 'string';
}

/**
 * Whether a wait for the request() of event `id` may hear that its consumer failed, with the handler's error
 * text: only when the connection may `publish` (request() publishes it) or `consume` in the event's own
 * domain. A wait names its request by id and is checked on its own domain only, so without this a token
 * could wait "for" another tenant's event and hear its handler's error text. Not heard: the wait runs to
 * its timeout, as a wait on another gateway does (delivery/waits.ts).
 */
export async function hearsFailure(session: Connection, id: string): Promise<boolean> {
  if (session.context.auth.mode === 'none') return true;
  try {
    const stored = await session.context.store.read(id);
    return stored !== undefined && (session.may('publish', stored.domain) || session.may('consume', stored.domain));
  } catch (error) {
    session.note('request failure unread', 'warn', 'a request’s failure was not sent: its event could not be read', { event: id, error });
    return false;
  }
}
