/**
 * The consumer groups' gauges, read from the store's delivery ledger when /metrics is scraped (one
 * read for all five): pending, in flight, redelivered, dead letters and the age of the oldest
 * pending event, labelled domain, name and group ('' = the default group). /readyz does not read them.
 */
import { Gauge, type Registry } from 'prom-client';
import type { GroupSummary } from './store/ledger.js';

type Reading = { at: number; groups: Promise<GroupSummary[]> };

const gauges: ReadonlyArray<readonly [name: string, help: string, value: (group: GroupSummary, now: number) => number | undefined]> = [
  ['eventflow_group_pending', 'Events of a consumer group\'s backlog with no outcome and no lease (a retry delay included).', (group) => group.pending],
  ['eventflow_group_in_flight', 'Events of a consumer group under a lease that has not expired.', (group) => group.inFlight],
  ['eventflow_group_redelivered', 'Events of a consumer group delivered more than once.', (group) => group.redelivered],
  ['eventflow_group_dead_letters', 'Dead letters of a consumer group.', (group) => group.deadLetters],
  [
    'eventflow_group_oldest_pending_age_seconds',
    'Age of the oldest event of a consumer group with no outcome (0 when there is none).',
    (group, now) => (group.oldestPendingAt === undefined ? 0 : Math.max(0, (now - Date.parse(group.oldestPendingAt)) / 1000)),
  ],
];

export function watchGroups(registry: Registry, read: () => Promise<GroupSummary[]>): void {
  // One ledger read per scrape, shared by the five gauges.
  let reading: Reading | undefined;
  const current = (): Promise<GroupSummary[]> => {
    const now = Date.now();
    if (!reading || now - reading.at > 500) reading = { at: now, groups: read().catch(() => []) };
    return reading.groups;
  };
  for (const [name, help, value] of gauges) {
    new Gauge({
      name,
      help,
      labelNames: ['domain', 'name', 'group'],
      registers: [registry],
      async collect() {
        const groups = await current();
        const now = Date.now();
        this.reset();
        for (const group of groups) this.set({ domain: group.domain, name: group.name, group: group.group }, value(group, now) ?? 0);
      },
    });
  }
}
