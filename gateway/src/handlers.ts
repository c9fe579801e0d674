/** What the gateway does for each request operation of the protocol. */
import { EventflowError, generateEventId, type EventInput, type StoredEvent } from '@eventflow/core';
import type { Handlers, Session } from './session.js';
import type { NewEvent } from './store/store.js';

function toNewEvent(event: EventInput): NewEvent {
  // The clients always send an id; a hand-written frame may not.
  return { id: event.id ?? generateEventId(), domain: event.domain, name: event.name, pid: event.pid, data: event.data ?? {}, rid: event.rid };
}

function appended(event: StoredEvent): { id: string; position: number; timestamp: string } {
  return { id: event.id, position: event.position, timestamp: event.timestamp };
}

async function mustExist(session: Session, id: string): Promise<StoredEvent> {
  const event = await session.context.store.read(id);
  if (!event) throw new EventflowError('E_EVENTFLOW_EVENT_NOT_FOUND', `no event has id "${id}"`, { details: { id } });
  return event;
}

/** Settled, handed back, revoked (lease expired), or another connection's. */
const unknownDelivery = (delivery: string): EventflowError =>
  new EventflowError('E_EVENTFLOW_UNKNOWN_DELIVERY', `delivery "${delivery}" is not open on this connection`, { details: { delivery } });

export const handlers: Handlers = {
  async publish(session, { event, expectedVersion }, request) {
    const { store, router, gatewayId } = session.context;
    const routedBy = router.claimsOnAppend;
    const { event: stored, created } = await store.append(toNewEvent(event), { publisher: gatewayId, expectedVersion, routedBy });
    // Also on an idempotent retry: routing claims are guarded, so an event is never routed twice,
    // and a publish that stored but failed to route before a crash gets routed now.
    void router
      .publish(stored, created && routedBy !== undefined)
      .catch((error: unknown) => session.note('routing failed', 'error', 'routing failed', { request: request.id, event: stored.id, error }));
    return appended(stored);
  },

  async persist(session, { event, expectedVersion }) {
    return appended((await session.context.store.append(toNewEvent(event), { expectedVersion })).event);
  },

  async schedule(session, { at, event }) {
    const { store, gatewayId } = session.context;
    const due = new Date(at);
    const { event: stored } = await store.append(toNewEvent(event), { publisher: gatewayId, scheduledAt: due });
    session.context.scheduled(due);
    return appended(stored);
  },

  async subscribe(session, { domain, name, after }) {
    return { head: await session.subscribe(domain, name, after) };
  },

  async unsubscribe(session, { domain, name }) {
    session.unsubscribe(domain, name);
    return {};
  },

  async consume(session, { consumer, domain, name, after }) {
    const existing = session.consumers.get(consumer);
    if (existing !== undefined && existing !== `${domain}\u001f${name}`) {
      throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `params.consumer: handle "${consumer}" already names another consumer on this connection; use a new handle`);
    }
    session.consumers.set(consumer, `${domain}\u001f${name}`);
    const head = await session.context.store.head();
    session.context.dispatcher.addConsumer(session, consumer, domain, name);
    if (after !== undefined) void session.context.dispatcher.catchUp(session, consumer, after);
    return { head };
  },

  async removeConsumer(session, { consumer }) {
    session.consumers.delete(consumer);
    await session.context.dispatcher.removeConsumer(session, consumer);
    return {};
  },

  async settle(session, { delivery, outcome, error }, request) {
    if (error) request.log.debug('consumer reported a failure', { delivery, outcome, reason: error });
    if (!(await session.context.dispatcher.settle(session, delivery, outcome))) {
      throw unknownDelivery(delivery);
    }
    return {};
  },

  async extend(session, { delivery, ms }) {
    const granted = session.context.dispatcher.extend(session, delivery, ms);
    if (granted === undefined) throw unknownDelivery(delivery);
    return { ms: granted };
  },

  async wait(session, { wait, domain, pid, names, afterId, afterPosition }) {
    const { store, dispatcher } = session.context;
    const head = await store.head();
    let after = afterPosition;
    if (after === undefined && afterId !== undefined) {
      const reference = await mustExist(session, afterId);
      session.authorize('wait', 'subscribe', reference.domain);
      after = reference.position;
    }
    // Counted against EVENTFLOW_MAX_SUBSCRIPTIONS until it is waited (Session.sendWaited) or cancelled.
    session.waits.add(wait);
    await dispatcher.addWait(session, wait, domain, pid, names, after);
    return { head };
  },

  async cancelWait(session, { wait }) {
    session.waits.delete(wait);
    session.context.dispatcher.cancelWait(session, wait);
    return {};
  },

  async delete(session, { id }) {
    const { store, dispatcher } = session.context;
    const event = await store.read(id);
    // Checked before anything is deleted; an id that does not exist deletes nothing.
    if (event) session.authorize('delete', 'delete', event.domain);
    const deleted = await store.delete(id);
    if (deleted && event) dispatcher.deleted(event.domain, event.pid, id);
    return { deleted };
  },

  async deleteEventlog(session, { domain, pid }) {
    const deleted = await session.context.store.deleteEventlog(domain, pid);
    if (deleted) session.context.dispatcher.deleted(domain, pid);
    return { deleted };
  },

  async read(session, { id }) {
    const event = await mustExist(session, id);
    // Never returned unless the connection may read its domain.
    session.authorize('read', 'read', event.domain);
    return { event };
  },

  async readEventlog(session, { domain, pid, after }) {
    const { store } = session.context;
    // SQLite answers both from one consistent snapshot only inside a transaction; a delete in
    // between makes the count look short, which a cache treats as "refetch": safe either way.
    const [events, count] = await Promise.all([store.readEventlog(domain, pid, after), store.countEventlog(domain, pid)]);
    return { events, count };
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
    const event = await session.context.store.read(eventId);
    if (event) session.authorize('persistEntityAssociation', 'publish', event.domain);
    await session.context.store.persistEntityAssociation(eventId, eid);
    return {};
  },

  async persistChildProcessAssociation(session, { eventId, domain, cpid }) {
    const event = await session.context.store.read(eventId);
    if (event) session.authorize('persistChildProcessAssociation', 'publish', event.domain);
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
};
