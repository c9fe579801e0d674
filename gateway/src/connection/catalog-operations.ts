/**
 * The console's operations (protocol-catalog.ts of @eventflow/core): reads over the store's
 * Catalog, each answer limited to what the connection's rights let it know of, and the
 * cancellation of a scheduled event.
 */
import { isEventflowError } from '@eventflow/core';
import { actions } from './auth.js';
import type { Operations } from './operations.js';
import type { Session } from './session.js';
import type { ScheduledSummary } from '../store/catalog.js';

type CatalogOperations = Pick<Operations, 'listDomains' | 'listProcesses' | 'readTimeline' | 'listScheduled' | 'cancelScheduled' | 'gatewayStats'>;

const DEFAULT_PROCESS_PAGE = 100;
const DEFAULT_TIMELINE_PAGE = 1000;
const DEFAULT_SCHEDULED_PAGE = 100;

/** Whether the connection may read the events of `domain` (their existence included). */
const readable = (session: Session, domain: string): boolean => session.may('read', domain);

export const catalogOperations: CatalogOperations = {
  async listDomains(session) {
    const domains = await session.context.store.catalog.domains();
    return {
      domains: domains
        .filter(({ domain }) => readable(session, domain))
        .map((summary) => ({ ...summary, actions: actions.filter((action) => session.may(action, summary.domain)) })),
      actions: actions.filter((action) => session.may(action)),
    };
  },

  async listProcesses(session, { domain, prefix, order, after, cursor, limit = DEFAULT_PROCESS_PAGE }) {
    // One more than asked: whether there is a next page, without a second query.
    const rows = await session.context.store.catalog.processes(domain, { prefix, order, after, cursor, limit: limit + 1 });
    const processes = rows.slice(0, limit).map(({ cursor: _cursor, ...process }) => process);
    const last = rows.length > limit ? rows[limit - 1] : undefined;
    if (!last) return { processes };
    return order === 'recent' ? { processes, cursor: last.cursor } : { processes, next: last.pid };
  },

  async readTimeline(session, { domain, pid, after, limit = DEFAULT_TIMELINE_PAGE }) {
    const { store } = session.context;
    // One more than asked: whether there is a next page.
    const [read, count] = await Promise.all([store.catalog.eventlogPage(domain, pid, after ?? 0, limit + 1), store.countEventlog(domain, pid)]);
    const events = read.slice(0, limit);
    const [fates, associations] = await Promise.all([
      store.catalog.fates(domain, pid, events.map((event) => event.id)),
      after === undefined ? store.catalog.associations(domain, pid) : { children: [], entities: [] },
    ]);
    const next = read.length > limit ? events.at(-1)?.position : undefined;
    return { events, fates, count, ...associations, ...(next === undefined ? {} : { next }) };
  },

  async listScheduled(session, { domain, after, limit = DEFAULT_SCHEDULED_PAGE }) {
    const { catalog } = session.context.store;
    if (domain !== undefined) session.recheck('listScheduled', 'read', domain);
    // Without a domain the store lists every domain's: pages are read until `limit` readable ones are found.
    const found: ScheduledSummary[] = [];
    let cursor = after;
    for (;;) {
      const page = await catalog.scheduled({ domain, after: cursor, limit: limit + 1 });
      found.push(...page.filter((row) => readable(session, row.domain)));
      const last = page.at(-1);
      if (found.length > limit || page.length <= limit || last === undefined) break;
      cursor = { due: last.due, id: last.id };
    }
    const scheduled = found.slice(0, limit);
    const lastShown = scheduled.at(-1);
    const next = found.length > limit && lastShown ? { due: lastShown.due, id: lastShown.id } : undefined;
    return next === undefined ? { scheduled } : { scheduled, next };
  },

  async cancelScheduled(session, { id }) {
    // Forbidden is answered as `delete` answers it (visibility.ts); an id that names nothing cancels nothing.
    try {
      await session.eventFor('cancelScheduled', 'schedule', id);
    } catch (error) {
      if (isEventflowError(error, 'E_EVENTFLOW_EVENT_NOT_FOUND')) return { cancelled: false };
      throw error;
    }
    return { cancelled: await session.context.store.catalog.cancelScheduled(id) };
  },

  async gatewayStats(session) {
    return session.context.stats();
  },
};
