/**
 * The operator's operations (PROTOCOL.md: the console's reads, consumer groups and dead letters) as
 * functions of a client rather than methods: a dashboard that never calls them ships none of them
 * (a class's methods are not tree-shaken), which keeps the browser client within its size budget.
 * Each is `client.call(op, params)` with the arguments laid out for the caller.
 */
import type { EventflowClient } from './client.js';
import type { OperationName, Params, Position, Result } from './protocol.js';
import type { RequestOptions } from './requests.js';

type Caller = Pick<EventflowClient, 'call'>;

const field = async <O extends OperationName, K extends keyof Result<O>>(client: Caller, op: O, params: Params<O>, key: K, options?: RequestOptions): Promise<Result<O>[K]> =>
  (await client.call(op, params, options))[key];

/** The domains with events the client may read, with event counts, last activity and the actions it may take there; `actions`: those it may take somewhere. */
export const listDomains = (client: Caller, options?: RequestOptions): Promise<Result<'listDomains'>> => client.call('listDomains', {}, options);

/**
 * A page of a domain's processes (status, first and last event, count): in pid order (pass `next`
 * as `after` for the following page), or with `order: 'recent'` the newest activity first (pass
 * `cursor` as `cursor`).
 */
export const listProcesses = (client: Caller, domain: string, query: Omit<Params<'listProcesses'>, 'domain'> = {}, options?: RequestOptions): Promise<Result<'listProcesses'>> =>
  client.call('listProcesses', { ...query, domain }, options);

/** A page of a process's events with what became of each (consumer, outcome, orphan, dead letter) and its associations. */
export const readTimeline = (client: Caller, domain: string, pid: string, query: { after?: Position; limit?: number } = {}, options?: RequestOptions): Promise<Result<'readTimeline'>> =>
  client.call('readTimeline', { domain, pid, ...query }, options);

/** Scheduled events that have not fired, soonest first (of `domain`, or of every readable domain). */
/** Queue, handler and end-to-end times of (domain, name) over a window, and the slowest processes (PROTOCOL.md › readLatency). */
export const readLatency = (client: Caller, domain: string, name: string, query: Omit<Params<'readLatency'>, 'domain' | 'name'> = {}, options?: RequestOptions): Promise<Result<'readLatency'>> =>
  client.call('readLatency', { domain, name, ...query }, options);

export const listScheduled = (client: Caller, query: Params<'listScheduled'> = {}, options?: RequestOptions): Promise<Result<'listScheduled'>> =>
  client.call('listScheduled', query, options);

/** Deletes a scheduled event before it fires (needs `schedule`); false when it already fired or is gone. */
export const cancelScheduled = (client: Caller, eventId: string, options?: RequestOptions): Promise<boolean> => field(client, 'cancelScheduled', { id: eventId }, 'cancelled', options);

/** The gateway's figures: connections, totals published and delivered, store p99, backlog, readiness. */
export const gatewayStats = (client: Caller, options?: RequestOptions): Promise<Result<'gatewayStats'>> => client.call('gatewayStats', {}, options);

/** The consumer groups of the store (of `domain`, if given) with their counts, for the domains the client may consume. */
export const listGroups = (client: Caller, domain?: string, options?: RequestOptions): Promise<Result<'groups'>['groups']> =>
  field(client, 'groups', domain === undefined ? {} : { domain }, 'groups', options);

/** Removes a consumer group ('' = the default group) and its ledger; needs the `manage` right. */
export const deleteGroup = (client: Caller, domain: string, name: string, group: string, options?: RequestOptions): Promise<boolean> =>
  field(client, 'deleteGroup', { domain, name, group }, 'deleted', options);

/** Dead letters, newest first (`limit` default 100, at most 1000). */
export const listDeadLetters = (client: Caller, query: Params<'deadLetters'> = {}, options?: RequestOptions): Promise<Result<'deadLetters'>['deadLetters']> =>
  field(client, 'deadLetters', query, 'deadLetters', options);

/** Puts a dead letter back into its group's backlog with a new attempt cycle; needs `manage`. */
export const requeueDeadLetter = (client: Caller, key: Params<'requeueDeadLetter'>, options?: RequestOptions): Promise<boolean> => field(client, 'requeueDeadLetter', key, 'requeued', options);

/** Drops a dead letter from the list (the event stays failed); needs `manage`. */
export const discardDeadLetter = (client: Caller, key: Params<'discardDeadLetter'>, options?: RequestOptions): Promise<boolean> => field(client, 'discardDeadLetter', key, 'discarded', options);
