/**
 * What the gateway does for each request operation of the protocol. An operation reads and writes
 * the store and registers through its connection's methods (the Connection of operation.ts, which
 * the Session implements); it never changes the connection's state.
 */
import { DEFAULT_CONSUME_CONCURRENCY, EventflowError, generateEventId, isEventflowError, type EventInput, type StoredEvent } from '@eventflow/core';
import type { RequestScope } from './context.js';
import type { Params } from './frames.js';
import type { Connection, Operations } from './operation.js';
import type { NewEvent } from '../store/store.js';
import { referenceNotFound } from './visibility.js';
import { writeFailed } from '../store/write-health.js';
import { readEventlogState, snapshotsOf } from '../store/snapshots.js';
import { configDefaults } from '../defaults.js';
import { retryPolicy } from '../delivery/retry-policy.js';
import { manageOperations } from './manage-operations.js';
import { catalogOperations } from './catalog-operations.js';

function toNewEvent(event: EventInput): NewEvent {
  // The clients always send an id; a hand-written frame may not.
  const made: NewEvent = { id: event.id ?? generateEventId(), domain: event.domain, name: event.name, pid: event.pid, data: event.data ?? {}, rid: event.rid };
  if (event.traceparent !== undefined) {
    made.traceparent = event.traceparent;
    if (event.tracestate !== undefined) made.tracestate = event.tracestate;
  }
  return made;
}

function appended(event: StoredEvent): { id: string; position: number; timestamp: string } {
  return { id: event.id, position: event.position, timestamp: event.timestamp };
}

/**
 * The event to append, refused as the store refuses an unknown `rid` when `rid` names an event the
 * connection may not know of. Checked only where the store would check `rid`: an id already stored
 * is answered by the store (a retry, or E_EVENTFLOW_DUPLICATE_ID) before any `rid` is looked at,
 * so the order of the checks cannot tell a foreign `rid` from an unknown one either.
 */
function appendable(session: Connection, input: EventInput, action: 'publish' | 'schedule'): NewEvent | Promise<NewEvent> {
  const event = toNewEvent(input);
  // Without authentication every connection may know of every event: no lookup (nor promise) on the publish path.
  const { rid } = event;
  if (rid === undefined || session.context.auth.mode === 'none') return event;
  return withKnownRid(session, event, rid, action);
}

async function withKnownRid(session: Connection, event: NewEvent, rid: string, action: 'publish' | 'schedule'): Promise<NewEvent> {
  const { store } = session.context;
  const referenced = await store.read(rid);
  if (referenced === undefined || session.knows(action, referenced.domain)) return event;
  if ((await store.read(event.id)) === undefined) throw referenceNotFound(event.id, rid);
  return event;
}

/** One settle: recorded, or E_EVENTFLOW_UNKNOWN_DELIVERY; a store failure rejects with its own code (the delivery stays open). */
async function settleOne(session: Connection, { delivery, outcome, error, delayMs }: Params<'settle'>, request: RequestScope): Promise<void> {
  if (error) request.log.debug('consumer reported a failure', { delivery, outcome, reason: error });
  const message = error?.message;
  const settlement = outcome === 'retry' ? { outcome, delayMs: delayMs ?? 0, error: message } : outcome === 'release' ? { outcome } : { outcome, error: message };
  if (!(await session.context.dispatcher.settle(session, delivery, settlement))) throw unknownDelivery(delivery);
}

/**
 * Whether a consumer group takes a request()'s event. The store failing to tell fails the publish as a write that
 * stored nothing (retryable, same id: the client sends it again within its timeout), as the append would have: it
 * was a final E_EVENTFLOW_STORE_FAILED, so a request() failed on a moment's outage (a killed connection, a table
 * renamed back) that a publish rode out.
 */
async function consumedOrRetryable(session: Connection, event: Params<'publish'>['event']): Promise<boolean> {
  try {
    return await session.context.store.ledger().consumed(event.domain, event.name);
  } catch (error) {
    if (event.id === undefined || !isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED') || error.details?.retryable !== undefined) throw error;
    throw writeFailed(error.cause ?? error, 'the store could not tell whether a consumer group takes the event', event.id, false);
  }
}

/** Registers a wait: the head it starts from, and what it matches (afterId resolved to its position first). */
async function registerWait(session: Connection, { wait, domain, pid, names, afterId, afterPosition, request }: Params<'wait'>): Promise<{ head: number }> {
  if (afterId === undefined && afterPosition === undefined) {
    // Registered in the turn the frame is read (the head asked for first): a request()'s publish
    // may come right behind it (request-waits.ts), and its outcome must find the wait.
    const head = session.context.store.head();
    const registered = session.wait(wait, domain, pid, names, undefined, request);
    const [position] = await Promise.all([head, registered]);
    return { head: position };
  }
  const head = session.context.store.head();
  // Handed over while it is read, in this turn: a cancelWait sent right behind must find the wait registering.
  const start = afterPosition ?? (afterId === undefined ? 0 : session.eventFor('wait', 'subscribe', afterId).then((event) => event.position));
  const after = inReadTurn(session, start);
  const [position] = await Promise.all([head, session.wait(wait, domain, pid, names, after, request)]);
  return { head: position };
}

/**
 * `after` once the connection's read turn has come (read-turns.ts). A wait with a start looks through the events of
 * its process stored after it for an outcome (up to all of them); a handle re-registered replaces its wait and counts
 * nothing more, so 250 such waits sent at once, each read in the turn it arrived, held the gateway ~0.5 s per 20,000
 * events of the process, over and over. On SQLite the look follows in the same turn (its read is synchronous).
 */
async function inReadTurn(session: Connection, after: number | Promise<number>): Promise<number> {
  // Refused meanwhile (an afterId of no event), it is awaited below: not an unhandled rejection.
  if (typeof after === 'object') after.catch(() => undefined);
  const done = await session.context.readTurns.take(session);
  done();
  return after;
}

/**
 * Where "the last N" of a subscription start: a read of up to N (10,000) index entries, which waits for a read turn
 * (read-turns.ts). Re-subscribing counts nothing against the limits, so 250 of them sent at once, each read in the
 * turn it arrived, held the gateway for 2.3 s (a domain of 20,000 events), and a client sending them again and again
 * held it for good.
 */
async function positionBeforeLast(session: Connection, domain: string, name: string, last: number): Promise<number> {
  const done = await session.context.readTurns.take(session);
  try {
    return await session.context.store.catalog.positionBeforeLast(domain, name, last);
  } finally {
    done();
  }
}

/**
 * A registration (a wait, a subscription) the store could not make (its head, the event of `afterId`, the start of
 * "the last N" or an outcome already stored could not be read) is refused as retryable: nothing of it is registered,
 * the same registration again may succeed, and the clients send it again (a wait within its timeout). A request()
 * rides out a moment's outage (a pool that cannot open a connection, a statement stopped by max_statement_time) as
 * its publish does, and a subscription made again on a new connection during one is not left unregistered.
 */
function registrationRetryable(error: unknown): unknown {
  if (!isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED') || error.details?.retryable !== undefined) return error;
  return new EventflowError('E_EVENTFLOW_STORE_FAILED', `${error.message} (nothing was registered; the clients send it again)`, {
    cause: error.cause ?? error,
    details: { ...error.details, retryable: true },
  });
}

/** Settled, recalled (its consumer or connection went away), revoked (lease expired), or another connection's. */
/** A settle of settleMany the store could not record (its log has the cause). */
const STORE_REFUSED_SETTLE = 'the store could not record this settle (see the gateway log); the delivery stays open: send the settle again within its lease (the clients do so)';

const unknownDelivery = (delivery: string): EventflowError =>
  new EventflowError('E_EVENTFLOW_UNKNOWN_DELIVERY', `delivery "${delivery}" is not open on this connection`, { details: { delivery } });

export type { Operation, Operations } from './operation.js';

export const operations: Operations = {
  async publish(session, { event, expectedVersion, requireConsumer }, request) {
    const { store, router, gatewayId } = session.context;
    const linked = event.id === undefined ? undefined : session.requestWait(event.id);
    if (linked) await linked;
    if (requireConsumer && router.outsideConsumers !== true && !(await consumedOrRetryable(session, event))) {
      throw new EventflowError('E_EVENTFLOW_NO_CONSUMER', `no consumer group takes ${event.domain} › ${event.name}; register a consumer first, or pass requireConsumer: false`, {
        details: { domain: event.domain, name: event.name },
      });
    }
    const routedBy = router.claimsOnAppend;
    const { trace } = request;
    const ready = appendable(session, event, 'publish');
    trace?.step('store');
    const { event: stored, created } = await store.append(ready instanceof Promise ? await ready : ready, { publisher: gatewayId, expectedVersion, routedBy });
    // Also on an idempotent retry: routing claims are guarded, so an event is never routed twice,
    // and a publish that stored but failed to route before a crash gets routed now.
    const routed = trace?.step('route');
    void router.publish(stored, created && routedBy !== undefined).then(routed && (() => routed()), (error: unknown) => {
      routed?.(error);
      session.note('routing failed', 'error', 'routing failed', { request: request.id, event: stored.id, error });
    });
    return appended(stored);
  },

  async persist(session, { event, expectedVersion }, request) {
    request.trace?.step('store');
    return appended((await session.context.store.append(await appendable(session, event, 'publish'), { expectedVersion })).event);
  },

  async schedule(session, { at, event }, request) {
    const { store, gatewayId } = session.context;
    const due = new Date(at);
    request.trace?.step('store');
    const { event: stored } = await store.append(await appendable(session, event, 'schedule'), { publisher: gatewayId, scheduledAt: due });
    session.context.scheduled(due);
    return appended(stored);
  },

  async subscribe(session, { domain, name, after, last }) {
    // "The last N": replayed from just before the Nth newest published event of the subscription;
    // handed over while it is read, in this turn, so that an unsubscribe sent right behind waits for it.
    const from = after ?? (last === undefined ? undefined : positionBeforeLast(session, domain, name, last));
    try {
      const head = await session.subscribe(domain, name, from);
      const start = await from;
      return start === undefined ? { head } : { head, after: start };
    } catch (error) {
      throw registrationRetryable(error);
    }
  },

  async subscribePattern(session, { subscription, pattern, names, pid, after }) {
    try {
      return { head: await session.subscribePattern(subscription, { pattern, names, pid }, after) };
    } catch (error) {
      throw registrationRetryable(error);
    }
  },

  async unsubscribePattern(session, { subscription }) {
    await session.unsubscribePattern(subscription);
    return {};
  },

  async unsubscribe(session, { domain, name }) {
    await session.unsubscribe(domain, name);
    return {};
  },

  // `after` is accepted from older clients and not needed: the group's ledger says what is pending.
  async consume(session, { consumer, domain, name, group, concurrency, ordered, retry }) {
    const options = { group: group ?? '', concurrency: concurrency ?? DEFAULT_CONSUME_CONCURRENCY, ordered, retry: retry && retryPolicy(retry) };
    return { head: await session.consume(consumer, domain, name, options) };
  },

  async removeConsumer(session, { consumer }) {
    await session.removeConsumer(consumer);
    return {};
  },

  async settle(session, params, request) {
    await settleOne(session, params, request);
    return {};
  },

  // Each settle is recorded (or refused) on its own; their ledger writes go to the store together.
  async settleMany(session, { settles }, request) {
    const refused: Array<{ index: number; code: string; message: string }> = [];
    await Promise.all(
      settles.map((params, index) =>
        settleOne(session, params, request).catch((error: unknown) => {
          const coded = isEventflowError(error) ? error : undefined;
          if (!coded) request.log.error('a settle of settleMany failed', { delivery: params.delivery, error });
          // Uncoded: the store's own failure (a full disk), as `settle` alone answers it (Session). The
          // delivery stays open, and the client sends a settle so refused again within the lease: refused
          // as E_EVENTFLOW_INTERNAL, it gave up, and the event ran again once its lease ran out.
          refused.push({ index, code: coded?.code ?? 'E_EVENTFLOW_STORE_FAILED', message: coded?.message ?? STORE_REFUSED_SETTLE });
        }),
      ),
    );
    return { refused: refused.sort((a, b) => a.index - b.index) };
  },

  async extend(session, { delivery, ms }) {
    const granted = await session.context.dispatcher.extend(session, delivery, ms);
    if (granted === undefined) throw unknownDelivery(delivery);
    return { ms: granted };
  },

  async wait(session, params) {
    try {
      return await registerWait(session, params);
    } catch (error) {
      // Refused: nothing of it stays registered (it counted against the connection's limit, and an outcome would have
      // answered a wait its client no longer has).
      await session.cancelWait(params.wait);
      throw registrationRetryable(error);
    }
  },

  async cancelWait(session, { wait }) {
    await session.cancelWait(wait);
    return {};
  },

  async delete(session, { id }) {
    const { store, dispatcher } = session.context;
    let event: StoredEvent;
    try {
      // Checked before anything is deleted.
      event = await session.eventFor('delete', 'delete', id);
    } catch (error) {
      // An id that does not exist deletes nothing; an event the connection may not know of is answered the same way.
      if (isEventflowError(error, 'E_EVENTFLOW_EVENT_NOT_FOUND')) return { deleted: false };
      throw error;
    }
    const deleted = await store.delete(id);
    if (deleted) dispatcher.deleted(event.domain, event.pid, id);
    return { deleted };
  },

  async deleteEventlog(session, { domain, pid }) {
    const deleted = await session.context.store.deleteEventlog(domain, pid);
    if (deleted) session.context.dispatcher.deleted(domain, pid);
    return { deleted };
  },

  async read(session, { id }) {
    return { event: await session.eventFor('read', 'read', id) };
  },

  async readEventlog(session, { domain, pid, after }) {
    const { store } = session.context;
    // SQLite answers both from one consistent snapshot only inside a transaction; a delete in
    // between makes the count look short, which a cache treats as "refetch": safe either way.
    const [events, count] = await Promise.all([store.readEventlog(domain, pid, after), store.countEventlog(domain, pid)]);
    return { events, count };
  },

  async readEventlogState(session, { domain, pid }, request) {
    const { store, snapshotEvery = configDefaults.EVENTFLOW_SNAPSHOT_EVERY } = session.context;
    const onWriteError = (error: unknown) => request.log.warn('could not store a state snapshot', { domain, pid, error });
    return readEventlogState(snapshotsOf(store), domain, pid, { every: snapshotEvery, onWriteError });
  },

  async readEventlogByTimestamp(session, { domain, pid, from, to }) {
    return { events: await session.context.store.readEventlogByTimestamp(domain, pid, new Date(from), new Date(to)) };
  },

  async readEventlogFilteredByNames(session, { domain, pid, names }) {
    return { events: await session.context.store.readEventlogFilteredByNames(domain, pid, names) };
  },

  async readEventlogByChildProcess(session, { domain, cpid }) {
    return { events: await session.context.store.readEventlogByChildProcess(domain, cpid) };
  },

  async readEventlogByEid(session, { eid }) {
    return { events: await session.context.store.readEventlogByEid(eid) };
  },

  async readEventlogByDomainAndEid(session, { domain, eid }) {
    return { events: await session.context.store.readEventlogByDomainAndEid(domain, eid) };
  },

  async readDistinctPidByDomain(session, { domain }) {
    return { pids: await session.context.store.readDistinctPidByDomain(domain) };
  },

  async persistEntityAssociation(session, { eventId, eid }) {
    await session.eventFor('persistEntityAssociation', 'publish', eventId);
    await session.context.store.persistEntityAssociation(eventId, eid);
    return {};
  },

  async persistChildProcessAssociation(session, { eventId, domain, cpid }) {
    await session.eventFor('persistChildProcessAssociation', 'publish', eventId);
    await session.context.store.persistChildProcessAssociation(eventId, domain, cpid);
    return {};
  },

  async authenticate(session, { token }) {
    await session.authenticate(token);
    return {};
  },

  async ping() {
    return {};
  },

  ...manageOperations,
  ...catalogOperations,
};
