/**
 * The operations on consumer groups and dead letters (the console's and the CLI's): list groups and
 * dead letters for the domains the connection may consume; delete a group, requeue or discard a
 * dead letter behind the `manage` right of the domain (auth.ts rules).
 */
import type { Operation } from './operation.js';
import type { GroupKey } from '../store/ledger.js';

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
    const all = await store.ledger().groups(Date.now());
    const visible = all.filter((group) => (domain === undefined || group.domain === domain) && session.knows('consume', group.domain));
    return { groups: visible.map(({ oldestPendingAt, ...group }) => ({ ...group, members: dispatcher.members(group), ...(oldestPendingAt ? { oldestPendingAt } : {}) })) };
  },

  async deleteGroup(session, key) {
    const { store, dispatcher } = session.context;
    const deleted = await store.ledger().deleteGroup(key);
    if (deleted) dispatcher.forgetGroup(key);
    return { deleted };
  },

  async deadLetters(session, { domain, limit, offset }) {
    const letters = await session.context.store.ledger().deadLetters({ domain, limit: limit ?? DEFAULT_PAGE, offset: offset ?? 0 });
    return { deadLetters: letters.filter((letter) => session.knows('consume', letter.domain)) };
  },

  async requeueDeadLetter(session, { eventId, ...key }) {
    const requeued = await session.context.store.ledger().requeue(groupKey(key), eventId);
    if (requeued) await session.context.dispatcher.requeued(groupKey(key), eventId);
    return { requeued };
  },

  async discardDeadLetter(session, { eventId, ...key }) {
    return { discarded: await session.context.store.ledger().discard(groupKey(key), eventId) };
  },
};

const groupKey = (key: GroupKey): GroupKey => ({ domain: key.domain, name: key.name, group: key.group });
