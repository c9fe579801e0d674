/**
 * The console's operations (protocol-catalog.ts of @eventflow/core): reads over the store's
 * Catalog, each answer limited to what the connection's rights let it know of, and the
 * cancellation of a scheduled event.
 */
import { isEventflowError } from '@eventflow/core';
import { LATENCY_SCAN_ROWS, LIST_SCAN_ROWS } from '../defaults.js';
import { latencySummary } from './latency.js';
import { actions } from './auth.js';
import { sharedDomains } from './shared-domains.js';
import type { Connection, Operations } from './operation.js';
import type { EventFate, ScheduledSummary } from '../store/catalog.js';

type CatalogOperations = Pick<Operations, 'listDomains' | 'listProcesses' | 'readTimeline' | 'readLatency' | 'listScheduled' | 'cancelScheduled' | 'gatewayStats'>;

const DEFAULT_PROCESS_PAGE = 100;
const DEFAULT_TIMELINE_PAGE = 1000;
const DEFAULT_SCHEDULED_PAGE = 100;
const DEFAULT_LATENCY_WINDOW_MS = 3_600_000;
const DEFAULT_SLOWEST = 10;

/** What a dead letter's reason says to a token that may read the domain but not consume there. */
export const HIDDEN_REASON = 'not shown: the handler\'s error text needs the "consume" right on this domain';

/**
 * The fates as a token that may read the domain but not consume there may see them: the handlers' error
 * texts (a delivery's lastError, a dead letter's reason) need `consume`, as deadLetters' do (they carry
 * what a worker wrote, often the event's data); that the event was delivered, retried or dead-lettered stays.
 */
function withoutErrorTexts(fates: EventFate[]): EventFate[] {
  return fates.map((fate) => {
    if (!fate.deadLetter && !fate.deliveries?.some((delivery) => delivery.lastError !== undefined)) return fate;
    const shown: EventFate = { ...fate };
    if (fate.deadLetter) shown.deadLetter = { ...fate.deadLetter, reason: HIDDEN_REASON };
    if (fate.deliveries) shown.deliveries = fate.deliveries.map(({ lastError: _lastError, ...delivery }) => delivery);
    return shown;
  });
}

/** Whether the connection may read the events of `domain` (their existence included). */
const readable = (session: Connection, domain: string): boolean => session.may('read', domain);

export const catalogOperations: CatalogOperations = {
  async listDomains(session) {
    // Reading the domains counts every event of the store: a connection that may read none of them
    // (an anonymous one, before its token) is answered without that work.
    const actionsAnywhere = actions.filter((action) => session.may(action));
    if (!session.may('read')) return { domains: [], actions: actionsAnywhere };
    // Counted once for every asker while counting is slow (shared-domains.ts).
    const domains = await sharedDomains(session.context.store.catalog);
    return {
      domains: domains
        .filter(({ domain }) => readable(session, domain))
        .map((summary) => ({ ...summary, actions: actions.filter((action) => session.may(action, summary.domain)) })),
      actions: actionsAnywhere,
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
    const shown = session.may('consume', domain) ? fates : withoutErrorTexts(fates);
    return { events, fates: shown, count, ...associations, ...(next === undefined ? {} : { next }) };
  },

  async readLatency(session, { domain, name, group, windowMs = DEFAULT_LATENCY_WINDOW_MS, slowest = DEFAULT_SLOWEST }) {
    const to = Date.now();
    const from = to - windowMs;
    // One more than the budget: whether the window held more than one request reads.
    const rows = await session.context.store.catalog.settledDeliveries({ domain, name, group, from, to: to + 1, limit: LATENCY_SCAN_ROWS + 1 });
    return latencySummary(rows.slice(0, LATENCY_SCAN_ROWS), { from, to, truncated: rows.length > LATENCY_SCAN_ROWS, slowest });
  },

  async listScheduled(session, { domain, after, limit = DEFAULT_SCHEDULED_PAGE }) {
    const { catalog } = session.context.store;
    if (domain !== undefined) session.recheck('listScheduled', 'read', domain);
    // Without a domain, the store reads only the domains the token may read (its patterns, in SQL).
    const domains = domain === undefined ? session.patterns('read') : undefined;
    if (domains?.length === 0) return { scheduled: [] };
    // Every row is checked again here (the outbound rule); pages are read until `limit` readable
    // ones are found, at most LIST_SCAN_ROWS rows per request: past it, the answer ends early with
    // the cursor of the last row read, so a client pages on and no request reads without bound.
    const found: ScheduledSummary[] = [];
    let cursor = after;
    let read = 0;
    for (;;) {
      const page = await catalog.scheduled({ domain, domains, after: cursor, limit: limit + 1 });
      read += page.length;
      found.push(...page.filter((row) => readable(session, row.domain)));
      const last = page.at(-1);
      if (found.length > limit || page.length <= limit || last === undefined) break;
      cursor = { due: last.due, id: last.id };
      if (read >= LIST_SCAN_ROWS) return { scheduled: found, next: cursor };
    }
    const scheduled = found.slice(0, limit);
    const lastShown = scheduled.at(-1);
    const next = found.length > limit && lastShown ? { due: lastShown.due, id: lastShown.id } : undefined;
    return next === undefined ? { scheduled } : { scheduled, next };
  },

  async cancelScheduled(session, { id }) {
    // Forbidden is answered as `delete` answers it (visibility.ts); an id that names nothing cancels nothing.
    let domain: string;
    try {
      ({ domain } = await session.eventFor('cancelScheduled', 'schedule', id));
    } catch (error) {
      if (isEventflowError(error, 'E_EVENTFLOW_EVENT_NOT_FOUND')) return { cancelled: false };
      throw error;
    }
    // The store deletes only a row of the domain the right was checked on, in the deleting statement.
    return { cancelled: await session.context.store.catalog.cancelScheduled(id, domain) };
  },

  async gatewayStats(session) {
    return session.context.stats();
  },
};
