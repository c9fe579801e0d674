/**
 * The operations on consumer groups and dead letters (the console's and the CLI's): list groups and
 * dead letters for the domains the connection may consume (its `consume` right on each, checked as
 * the answer is made: holding `read` or `subscribe` there is not enough, a dead letter carries the
 * handler's error text); delete a group, requeue or discard a dead letter behind the `manage` right
 * of the domain (auth.ts rules).
 */
import { EventflowError } from '@eventflow/core';
import type { Operation } from './operation.js';
import type { GroupKey } from '../store/ledger.js';
import { describeGroup } from '../delivery/consumers.js';

type ManageOperations = {
  groups: Operation<'groups'>;
  deleteGroup: Operation<'deleteGroup'>;
  deadLetters: Operation<'deadLetters'>;
  requeueDeadLetter: Operation<'requeueDeadLetter'>;
  discardDeadLetter: Operation<'discardDeadLetter'>;
};

const DEFAULT_PAGE = 100;

export const manageOperations: ManageOperations = {
  async groups(session, { domain }) {
    const { store, dispatcher } = session.context;
    if (domain !== undefined && !session.may('consume', domain)) return { groups: [] };
    // Only the groups the answer may hold are counted (every group's counts are scans of its ledger and events): a
    // domain named, its groups; else those of the domains the token may consume, selected in the store's query (as
    // deadLetters'), so that one tenant's listing does not count every tenant's groups.
    const patterns = domain === undefined ? session.patterns('consume') : undefined;
    if (patterns?.length === 0) return { groups: [] };
    const all = await store.ledger().groups(Date.now(), domain === undefined ? undefined : [domain], patterns);
    const visible = all.filter((group) => (domain === undefined || group.domain === domain) && session.may('consume', group.domain));
    return { groups: visible.map(({ oldestPendingAt, ...group }) => ({ ...group, members: dispatcher.members(group), ...(oldestPendingAt ? { oldestPendingAt } : {}) })) };
  },

  async deleteGroup(session, key) {
    const { store, dispatcher } = session.context;
    // Refused while members are registered here, so that the operator stops these workers rather than
    // cutting them off. Members on other gateways are not known here (the store keeps no members):
    // their gateway's next claim finds the group gone and ends them (E_EVENTFLOW_GROUP_DELETED, group-backlog.ts).
    const members = dispatcher.members(key);
    if (members > 0) {
      throw new EventflowError('E_EVENTFLOW_GROUP_IN_USE', `deleteGroup: ${describeGroup(key)} has ${members} member${members === 1 ? '' : 's'} registered on this gateway; stop its workers (or remove their consumers) first, then delete it`, {
        details: { ...key, members },
      });
    }
    const deleted = await store.ledger().deleteGroup(key);
    if (deleted) dispatcher.forgetGroup(key);
    return { deleted };
  },

  async deadLetters(session, { domain, limit, offset }) {
    if (domain !== undefined && !session.may('consume', domain)) return { deadLetters: [] };
    // Without a domain, the store reads only the domains the token may consume (its patterns, in SQL).
    const domains = domain === undefined ? session.patterns('consume') : undefined;
    if (domains?.length === 0) return { deadLetters: [] };
    const letters = await session.context.store.ledger().deadLetters({ domain, domains, limit: limit ?? DEFAULT_PAGE, offset: offset ?? 0 });
    return { deadLetters: letters.filter((letter) => session.may('consume', letter.domain)) };
  },

  async requeueDeadLetter(session, { eventId, ...key }) {
    const requeued = await session.context.store.ledger().requeue(groupKey(key), eventId);
    if (requeued) session.context.dispatcher.requeued(groupKey(key));
    return { requeued };
  },

  async discardDeadLetter(session, { eventId, ...key }) {
    return { discarded: await session.context.store.ledger().discard(groupKey(key), eventId) };
  },
};

const groupKey = (key: GroupKey): GroupKey => ({ domain: key.domain, name: key.name, group: key.group });
