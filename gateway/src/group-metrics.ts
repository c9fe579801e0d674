/**
 * The consumer groups' gauges, read from the store's delivery ledger when /metrics is scraped (one
 * read for all of them): pending, in flight, redelivered, dead letters and the age of the oldest
 * pending event, and how many groups there are. /readyz does not read them.
 *
 * /metrics answers whoever reaches the port, and domain and group names are tenants' names: by
 * default each gauge is one series over all groups (sums; the oldest age is the maximum), naming
 * nothing. EVENTFLOW_METRICS_GROUP_LABELS=on labels them `domain`, `name`, `group` ('' = the
 * default group) for the METRICS_GROUP_SERIES groups with the most pending events, and sums the
 * rest under empty labels, so that a store with thousands of groups still answers a small scrape.
 *
 * A scrape waits for the read at most `timeoutMs` (EVENTFLOW_READY_TIMEOUT_MS, as /readyz): a store
 * that does not answer (a link that stopped passing bytes) held every scrape until Prometheus gave
 * up, so every other metric went missing with it, and a read that failed showed 0 pending. The
 * gauges show the last reading the store answered instead, and `eventflow_group_reading_age_seconds`
 * how old it is; one read at a time, however many scrapes wait.
 */
import { Gauge, type Registry } from 'prom-client';
import { METRICS_GROUP_SERIES } from './defaults.js';
import type { GroupSummary } from './store/ledger.js';

type Reading = { at: number; done: Promise<unknown> };

/** One gauge: its name, help, a group's value, and how values of several groups add up. */
type GroupGauge = readonly [name: string, help: string, value: (group: GroupSummary, now: number) => number, combine: 'sum' | 'max'];

const gauges: readonly GroupGauge[] = [
  ['eventflow_group_pending', 'Events of consumer groups\' backlogs with no outcome and no lease (a retry delay included).', (group) => group.pending, 'sum'],
  ['eventflow_group_in_flight', 'Events of consumer groups under a lease that has not expired.', (group) => group.inFlight, 'sum'],
  ['eventflow_group_redelivered', 'Events of consumer groups delivered more than once.', (group) => group.redelivered, 'sum'],
  ['eventflow_group_dead_letters', 'Dead letters of consumer groups.', (group) => group.deadLetters, 'sum'],
  [
    'eventflow_group_oldest_pending_age_seconds',
    'Age of the oldest event of consumer groups with no outcome (0 when there is none).',
    (group, now) => (group.oldestPendingAt === undefined ? 0 : Math.max(0, (now - Date.parse(group.oldestPendingAt)) / 1000)),
    'max',
  ],
];

export interface GroupMetricsOptions {
  /** EVENTFLOW_METRICS_GROUP_LABELS=on: series per group (bounded); otherwise one series per gauge. */
  labelled: boolean;
  /** Groups with a series of their own when labelled (default METRICS_GROUP_SERIES). */
  series?: number;
  /** How long a scrape waits for the store's read (EVENTFLOW_READY_TIMEOUT_MS). */
  timeoutMs: number;
}

const OTHERS = { domain: '', name: '', group: '' };

export function watchGroups(registry: Registry, read: () => Promise<GroupSummary[]>, { labelled, series = METRICS_GROUP_SERIES, timeoutMs }: GroupMetricsOptions): void {
  // One ledger read per scrape, shared by the gauges; none started while one is still unanswered.
  let reading: Reading | undefined;
  let inFlight: Promise<void> | undefined;
  let last: { at: number; groups: GroupSummary[] } | undefined;
  const current = async (): Promise<GroupSummary[]> => {
    const now = Date.now();
    if (!reading || now - reading.at > 500) {
      inFlight ??= read()
        .then(
          (groups) => void (last = { at: Date.now(), groups }),
          () => undefined,
        )
        .finally(() => (inFlight = undefined));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      reading = { at: now, done: Promise.race([inFlight, waited]).finally(() => clearTimeout(timer)) };
    }
    await reading.done;
    return last?.groups ?? [];
  };
  new Gauge({
    name: 'eventflow_group_reading_age_seconds',
    help: 'Seconds since the consumer groups\' gauges were read from the store: about 0 when this scrape read them; they show an older reading while the store does not answer (+Inf: never read).',
    registers: [registry],
    async collect() {
      await current();
      this.set(last === undefined ? Number.POSITIVE_INFINITY : (Date.now() - last.at) / 1000);
    },
  });
  new Gauge({
    name: 'eventflow_groups',
    help: 'Consumer groups in the store.',
    registers: [registry],
    async collect() {
      this.set((await current()).length);
    },
  });
  for (const [name, help, value, combine] of gauges) {
    const add = combine === 'sum' ? (a: number, b: number) => a + b : Math.max;
    if (!labelled) {
      new Gauge({
        name,
        help,
        registers: [registry],
        async collect() {
          const now = Date.now();
          this.set((await current()).reduce((total, group) => add(total, value(group, now)), 0));
        },
      });
      continue;
    }
    new Gauge({
      name,
      help: `${help} Labelled for the ${series} groups with the most pending events; the others are summed under empty labels.`,
      labelNames: ['domain', 'name', 'group'],
      registers: [registry],
      async collect() {
        const groups = await current();
        const now = Date.now();
        this.reset();
        const { named, others } = rank(groups, series);
        for (const group of named) this.set({ domain: group.domain, name: group.name, group: group.group }, value(group, now));
        if (others.length > 0) this.set(OTHERS, others.reduce((total, group) => add(total, value(group, now)), 0));
      },
    });
  }
}

/** The `series` groups with the most pending events (then dead letters), and the rest. */
function rank(groups: readonly GroupSummary[], series: number): { named: GroupSummary[]; others: GroupSummary[] } {
  if (groups.length <= series) return { named: [...groups], others: [] };
  const sorted = [...groups].sort((a, b) => b.pending - a.pending || b.deadLetters - a.deadLetters);
  return { named: sorted.slice(0, series), others: sorted.slice(series) };
}
