/**
 * The CLI's consumer-group and dead-letter commands (commands.ts runs them): list groups, delete a
 * group, list dead letters, requeue or discard one. Deleting, requeueing and discarding need the
 * token's `manage` right on the domain.
 */
import type { EventflowClient } from '@eventflow/core';
import { deleteGroup, discardDeadLetter, listDeadLetters, listGroups, requeueDeadLetter } from '@eventflow/core';

export const manageUsage = `  groups [domain]                            Print the consumer groups (members, pending, in flight, dead letters) as JSON lines
  group-delete <domain> <name> [group]       Delete a consumer group (no group: the default group of <domain> <name>)
  dead-letters [domain]                      Print dead letters as JSON lines, newest first (--limit, --offset)
  dead-letter-requeue <event-id> <domain> <name> [group]  Deliver a dead letter again, with a new attempt cycle
  dead-letter-discard <event-id> <domain> <name> [group]  Drop a dead letter from the list
`;

export const manageCommands = {
  groups: { args: ['domain'], min: 0, max: 1 },
  'group-delete': { args: ['domain', 'name', 'group'], min: 2, max: 3 },
  'dead-letters': { args: ['domain'], min: 0, max: 1 },
  'dead-letter-requeue': { args: ['event-id', 'domain', 'name', 'group'], min: 3, max: 4 },
  'dead-letter-discard': { args: ['event-id', 'domain', 'name', 'group'], min: 3, max: 4 },
} as const;

type Line = (value: unknown) => void;

/** What runs a manage command on a connected client; `page` is --limit/--offset. */
export function prepareManage(name: string, args: readonly string[], page: { limit?: number; offset?: number }, line: Line): ((client: EventflowClient) => Promise<void>) | undefined {
  const [first, second, third, fourth] = args;
  switch (name) {
    case 'groups':
      return async (client) => {
        for (const group of await listGroups(client, first)) line(group);
      };
    case 'group-delete':
      return async (client) => line({ deleted: await deleteGroup(client, first as string, second as string, third ?? '') });
    case 'dead-letters':
      return async (client) => {
        for (const letter of await listDeadLetters(client, { ...(first === undefined ? {} : { domain: first }), ...page })) line(letter);
      };
    case 'dead-letter-requeue':
    case 'dead-letter-discard': {
      const key = { eventId: first as string, domain: second as string, name: third as string, group: fourth ?? '' };
      return async (client) =>
        line(name === 'dead-letter-requeue' ? { requeued: await requeueDeadLetter(client, key) } : { discarded: await discardDeadLetter(client, key) });
    }
    default:
      return undefined;
  }
}
