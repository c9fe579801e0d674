/**
 * The CLI's consumer-group and dead-letter commands (commands.ts runs them): list groups, delete a
 * group, list dead letters, requeue or discard one. Deleting, requeueing and discarding need the
 * token's `manage` right on the domain.
 */
import type { EventflowClient } from '@eventflow/core';
import { deleteGroup, discardDeadLetter, listDeadLetters, listGroups, requeueDeadLetter } from '@eventflow/core';
import { NotFound } from './cli-not-found.js';

export const manageUsage = `  groups [domain]                            Print the consumer groups (members, pending, in flight, dead letters) as JSON lines
  group-delete <domain> <name> [group]       Delete a consumer group (no group: the default group of <domain> <name>)
  dead-letters [domain]                      Print dead letters as JSON lines, newest first (--limit, --offset)
  dead-letter-requeue <event-id> <domain> <name> [group]  Deliver a dead letter again, with a new attempt cycle
  dead-letter-discard <event-id> <domain> <name> [group]  Drop a dead letter from the list
                                             (<name>: the dead letter's "consumes", the name its group consumes)
`;

export const manageCommands = {
  groups: { args: ['domain'], min: 0, max: 1 },
  'group-delete': { args: ['domain', 'name', 'group'], min: 2, max: 3 },
  'dead-letters': { args: ['domain'], min: 0, max: 1 },
  'dead-letter-requeue': { args: ['event-id', 'domain', 'name', 'group'], min: 3, max: 4 },
  'dead-letter-discard': { args: ['event-id', 'domain', 'name', 'group'], min: 3, max: 4 },
} as const;

type Line = (value: unknown) => void;

/** <name> as the commands take it, said where a wrong one is the likely cause. */
const consumedName = '<name> is the consumed name: the event name, or * for a group of every name';

// An operation that found nothing to act on prints its JSON (`{"requeued":false}`) and ends with NotFound.
const groupLabel = (domain: string, name: string, group: string): string => `${domain} › ${name} (${group === '' ? 'the default group' : `group ${JSON.stringify(group)}`})`;

/**
 * An empty list, said on stderr (stdout stays what scripts parse): the gateway lists only what the
 * token may consume, so "none" and "none you may see" look alike, and a person took one for the other.
 */
const none = (what: string, domain: string | undefined): string => `no ${what}${domain === undefined ? '' : ` in ${domain}`} (the gateway lists those of the domains the token may consume only)\n`;

/** What runs a manage command on a connected client; `page` is --limit/--offset; `note` writes to stderr. */
export function prepareManage(name: string, args: readonly string[], page: { limit?: number; offset?: number }, line: Line, note: (text: string) => void): ((client: EventflowClient) => Promise<void>) | undefined {
  const [first, second, third, fourth] = args;
  switch (name) {
    case 'groups':
      return async (client) => {
        const groups = await listGroups(client, first);
        if (groups.length === 0) note(none('consumer groups', first));
        for (const group of groups) line(group);
      };
    case 'group-delete':
      return async (client) => {
        const deleted = await deleteGroup(client, first as string, second as string, third ?? '');
        line({ deleted });
        if (!deleted) {
          throw new NotFound('E_EVENTFLOW_GROUP_NOT_FOUND', `no consumer group ${groupLabel(first as string, second as string, third ?? '')}, so nothing was deleted; "eventflow groups ${first as string}" lists them (${consumedName})`);
        }
      };
    case 'dead-letters':
      return async (client) => {
        const letters = await listDeadLetters(client, { ...(first === undefined ? {} : { domain: first }), ...page });
        if (letters.length === 0 && (page.offset ?? 0) === 0) note(none('dead letters', first));
        for (const letter of letters) line(letter);
      };
    case 'dead-letter-requeue':
    case 'dead-letter-discard': {
      const key = { eventId: first as string, domain: second as string, name: third as string, group: fourth ?? '' };
      return async (client) => {
        const requeue = name === 'dead-letter-requeue';
        const done = requeue ? await requeueDeadLetter(client, key) : await discardDeadLetter(client, key);
        line(requeue ? { requeued: done } : { discarded: done });
        if (!done) {
          throw new NotFound(
            'E_EVENTFLOW_DEAD_LETTER_NOT_FOUND',
            `no dead letter ${JSON.stringify(key.eventId)} in ${groupLabel(key.domain, key.name, key.group)} (none ever, or requeued or discarded already), so nothing was ${requeue ? 'requeued' : 'discarded'}; ` +
              `"eventflow dead-letters ${key.domain}" lists them (${consumedName})`,
          );
        }
      };
    }
    default:
      return undefined;
  }
}
