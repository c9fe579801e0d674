/**
 * Prometheus metrics of one gateway (served at /metrics, see README "Observability").
 *
 * Each gateway has its own registry: tests and embedders run many gateways in one process, and
 * prom-client's global registry would make their metric names collide. Process metrics (CPU,
 * memory, event loop, GC) describe the process, not a gateway: they live in one shared registry,
 * created on first use, and every gateway's /metrics appends them.
 *
 * Hot paths only bump plain numbers (one call, one increment); prom-client sees them when it is
 * scraped (`collect`), and the histograms are counting-histogram.ts's (a bucket search, no label
 * hashing per observation). Labels are bounded: operations, frame kinds, outcomes, error codes, store
 * methods, router kinds. Never a domain, pid, event or connection id.
 *
 * Store and router latency come from decorators around the EventStore and Router objects, so the
 * store and router code stays as it is.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { OperationName, ServerFrame } from '@eventflow/core';
import type { Router } from './router/router.js';
import type { EventStore } from './store/store.js';
import type { DeliveryLedger, GroupKey } from './store/ledger.js';
import { METRICS_GROUP_SERIES } from './defaults.js';
import { CountingHistogram, type HistogramSeries } from './counting-histogram.js';

export type WriteOperation = 'publish' | 'persist' | 'schedule';
export type ConsumeOutcome = 'success' | 'failed' | 'released' | 'retried' | 'revoked' | 'dead_lettered';

/** The hooks the session and dispatcher call. Each is O(1) and allocation-free. */
export interface GatewayMetrics {
  /** A request was answered with a result. */
  handled(op: OperationName): void;
  /** An error frame was sent (a refusal, bad input, a failure), by its code. */
  errorSent(code: string): void;
  /** A frame went to a client. */
  sent(type: ServerFrame['type'], attempt: number): void;
  /** A frame was not sent because the client was too slow (and is being disconnected). */
  dropped(type: ServerFrame['type']): void;
  /** A published event nobody here subscribed to, waited for or consumed (marked orphan). */
  orphaned(count: number): void;
  /** How a delivery to a consumer ended. */
  consumed(outcome: ConsumeOutcome): void;
  /** A delivery of the group started: `seconds` since its event was stored (queue time). */
  deliveryStarted(group: GroupKey, seconds: number): void;
  /** A consumer's settle of the group's delivery was recorded: `seconds` since the delivery started (handler time). */
  deliverySettled(group: GroupKey, seconds: number): void;
  /** A request()'s wait in `domain` was answered (its outcome, or the consume's failure), `seconds` after it was registered. */
  requestAnswered(domain: string, seconds: number): void;
}

const nothing = (): void => undefined;

/** EVENTFLOW_METRICS=off: the hooks do nothing. */
export const noMetrics: GatewayMetrics = {
  handled: nothing,
  errorSent: nothing,
  sent: nothing,
  dropped: nothing,
  orphaned: nothing,
  consumed: nothing,
  deliveryStarted: nothing,
  deliverySettled: nothing,
  requestAnswered: nothing,
};

/** What the gauges read when scraped. */
export interface MetricSources {
  connections(): number;
  registrations(): { subscriptions: number; consumers: number; waits: number; reportsWaiting?: number };
}

/** Queue, handler and request times: a millisecond to five minutes. */
const waitBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** Store calls take tens of µs (SQLite) to tens of ms (a loaded MySQL): buckets from 50 µs to 5 s. */
const latencyBuckets = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

const GROUP_LABELS = ['domain', 'name', 'group'] as const;

const deliveredKinds = { event: 'subscription', delivery: 'consumer', waited: 'wait' } as const;
type DeliveredKind = (typeof deliveredKinds)[keyof typeof deliveredKinds];
type DropReason = 'slow_client' | 'no_recipient';

let processRegistry: Registry | undefined;
/** Default process metrics, collected once per process however many gateways run in it. */
function sharedProcessRegistry(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class PrometheusMetrics implements GatewayMetrics {
  readonly registry = new Registry();
  readonly #requests = new Map<string, number>();
  readonly #errors = new Map<string, number>();
  readonly #published: Record<WriteOperation, number> = { publish: 0, persist: 0, schedule: 0 };
  readonly #delivered: Record<DeliveredKind, number> = { subscription: 0, consumer: 0, wait: 0 };
  readonly #dropped: Record<DropReason, number> = { slow_client: 0, no_recipient: 0 };
  readonly #outcomes: Record<ConsumeOutcome, number> = { success: 0, failed: 0, released: 0, retried: 0, revoked: 0, dead_lettered: 0 };
  #redeliveries = 0;
  readonly #storeErrors = new Map<string, number>();
  readonly #storeLatency: CountingHistogram;
  readonly #routerLatency: CountingHistogram;
  readonly #queueTime: LabelledHistogram;
  readonly #handlerTime: LabelledHistogram;
  readonly #requestTime: LabelledHistogram;

  /** `groupLabels`: EVENTFLOW_METRICS_GROUP_LABELS=on (domain, name and group in the time histograms' labels, bounded). */
  constructor(sources: MetricSources, { groupLabels = false }: { groupLabels?: boolean } = {}) {
    const registers = [this.registry];
    const counts = <L extends string>(name: string, help: string, label: L, read: () => Iterable<[string, number]>): void => {
      new Counter({
        name,
        help,
        labelNames: [label],
        registers,
        collect() {
          this.reset();
          for (const [value, count] of read()) this.inc({ [label]: value } as Record<L, string>, count);
        },
      });
    };
    counts('eventflow_requests_total', 'Requests answered with a result, by operation.', 'operation', () => this.#requests);
    counts('eventflow_errors_total', 'Error frames sent to clients (refusals, bad input, failures), by error code.', 'code', () => this.#errors);
    counts('eventflow_events_published_total', 'Events written by clients (idempotent retries included), by operation.', 'operation', () => Object.entries(this.#published));
    counts('eventflow_events_delivered_total', 'Events sent to clients: to subscriptions (replays included), consumers (redeliveries included) and waits.', 'kind', () =>
      Object.entries(this.#delivered),
    );
    counts('eventflow_events_dropped_total', 'Events not sent: the client was too slow (it resumes), or nobody here took a published event (orphan).', 'reason', () =>
      Object.entries(this.#dropped),
    );
    counts('eventflow_consume_outcomes_total', 'How deliveries to consumers ended.', 'outcome', () => Object.entries(this.#outcomes));
    counts('eventflow_store_errors_total', 'Store calls that failed, by store method.', 'operation', () => this.#storeErrors);
    const redeliveries = (): number => this.#redeliveries;
    new Counter({
      name: 'eventflow_redeliveries_total',
      help: 'Deliveries with attempt > 1 (after a lease expired, a release, or a consumer left).',
      registers,
      collect() {
        this.reset();
        this.inc(redeliveries());
      },
    });
    new Gauge({
      name: 'eventflow_connections',
      help: 'Open client connections.',
      registers,
      collect() {
        this.set(sources.connections());
      },
    });
    for (const kind of ['subscriptions', 'consumers', 'waits'] as const) {
      new Gauge({
        name: `eventflow_${kind}`,
        help: `${kind[0]?.toUpperCase()}${kind.slice(1)} held by the open connections.`,
        registers,
        collect() {
          this.set(sources.registrations()[kind]);
        },
      });
    }
    new Gauge({
      name: 'eventflow_consume_reports_waiting',
      help: "Consumers' settles the store could not record yet: the gateway writes them again, with backoff, until it does (the deliveries stay open).",
      registers,
      collect() {
        this.set(sources.registrations().reportsWaiting ?? 0);
      },
    });
    this.#storeLatency = new CountingHistogram({
      name: 'eventflow_store_operation_seconds',
      help: 'Store call latency, by store method.',
      labelNames: ['operation'],
      buckets: latencyBuckets,
      registers,
    });
    this.#routerLatency = new CountingHistogram({
      name: 'eventflow_router_publish_seconds',
      help: 'Time from handing a stored event to the router until it is routed to this gateway\'s connections, by router kind.',
      labelNames: ['router'],
      buckets: latencyBuckets,
      registers,
    });
    const groupHistogram = (name: string, help: string): LabelledHistogram =>
      new LabelledHistogram(new CountingHistogram({ name, help, labelNames: GROUP_LABELS, buckets: waitBuckets, registers }), groupLabels, GROUP_LABELS);
    this.#queueTime = groupHistogram('eventflow_consume_queue_seconds', 'Consumer groups\' queue time: from an event\'s store to the start of each delivery of it here.');
    this.#handlerTime = groupHistogram('eventflow_consume_handler_seconds', 'Consumer groups\' handler time: from a delivery\'s start here to its consumer\'s settle, recorded.');
    this.#requestTime = new LabelledHistogram(
      new CountingHistogram({ name: 'eventflow_request_seconds', help: 'request() round trips at the gateway: from the wait\'s registration to its answer (the outcome event, or the consume\'s failure).', labelNames: ['domain'], buckets: waitBuckets, registers }),
      groupLabels,
      ['domain'],
    );
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The text exposition: this gateway's metrics, then the process's. */
  async text(): Promise<string> {
    return (await this.registry.metrics()) + (await sharedProcessRegistry().metrics());
  }

  /** Totals since start and the store latency histogram's cumulative bucket counts (ms upper bound, count), for the console (server/stats.ts). */
  async totals(): Promise<{ published: number; delivered: number; storeBuckets: Array<[number, number]> }> {
    const byBound = new Map<number, number>();
    for (const { labels, value, metricName } of (await this.#storeLatency.get()).values) {
      if (!metricName?.endsWith('_bucket')) continue;
      const le = (labels as Record<string, string | number | undefined>)['le'];
      const bound = le === '+Inf' ? Infinity : Number(le) * 1000;
      byBound.set(bound, (byBound.get(bound) ?? 0) + value);
    }
    const sum = (counts: Record<string, number>): number => Object.values(counts).reduce((a, b) => a + b, 0);
    return { published: sum(this.#published), delivered: sum(this.#delivered), storeBuckets: [...byBound].sort((a, b) => a[0] - b[0]) };
  }

  /** Reports the hub router's ready connections (EVENTFLOW_ROUTER=hubs). */
  watchHubs(connected: () => number): void {
    this.#watch('eventflow_hub_connections', 'Hubs this gateway holds a ready connection to (EVENTFLOW_ROUTER=hubs).', connected);
  }

  /** Reports whether the router is degraded (EVENTFLOW_ROUTER=nats without a NATS connection). */
  watchRouterDegraded(degraded: () => boolean): void {
    this.#watch(
      'eventflow_router_degraded',
      '1 while the router reaches no other gateway and this one serves only its own clients (EVENTFLOW_ROUTER=nats without NATS), else 0.',
      () => (degraded() ? 1 : 0),
    );
  }

  /** A gauge read from `value` at each scrape. */
  #watch(name: string, help: string, value: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(value());
      },
    });
  }

  // ── hooks ──

  handled(op: OperationName): void {
    this.#requests.set(op, (this.#requests.get(op) ?? 0) + 1);
    if (op === 'publish' || op === 'persist' || op === 'schedule') this.#published[op]++;
  }

  errorSent(code: string): void {
    this.#errors.set(code, (this.#errors.get(code) ?? 0) + 1);
  }

  sent(type: ServerFrame['type'], attempt: number): void {
    if (type === 'event' || type === 'waited') this.#delivered[deliveredKinds[type]]++;
    else if (type === 'delivery') {
      this.#delivered.consumer++;
      if (attempt > 1) this.#redeliveries++;
    }
  }

  dropped(type: ServerFrame['type']): void {
    if (type === 'event' || type === 'delivery' || type === 'waited') this.#dropped.slow_client++;
  }

  orphaned(count: number): void {
    this.#dropped.no_recipient += count;
  }

  consumed(outcome: ConsumeOutcome): void {
    this.#outcomes[outcome]++;
  }

  deliveryStarted(group: GroupKey, seconds: number): void {
    this.#queueTime.observe(group, Math.max(0, seconds));
  }

  deliverySettled(group: GroupKey, seconds: number): void {
    this.#handlerTime.observe(group, Math.max(0, seconds));
  }

  requestAnswered(domain: string, seconds: number): void {
    this.#requestTime.observe({ domain }, Math.max(0, seconds));
  }

  // ── decorators ──

  /** The store, with every method call timed into eventflow_store_operation_seconds{operation}. */
  measureStore(store: EventStore): EventStore {
    const children = new Map<string, HistogramSeries>();
    const observe = (operation: string, started: number, failed: boolean): void => {
      let child = children.get(operation);
      if (!child) children.set(operation, (child = this.#storeLatency.labels({ operation })));
      child.observe((performance.now() - started) / 1000);
      if (failed) this.#storeErrors.set(operation, (this.#storeErrors.get(operation) ?? 0) + 1);
    };
    const measured = decorate(store, (name) => name !== 'ledger', observe);
    // The delivery ledger's calls too, as `ledger.<method>` (made once the store is open).
    let ledger: DeliveryLedger | undefined;
    measured.ledger = () => (ledger ??= decorate(store.ledger(), () => true, (operation, started, failed) => observe(`ledger.${operation}`, started, failed)));
    return measured;
  }

  /** The router, with `publish` timed into eventflow_router_publish_seconds{router}. */
  measureRouter(router: Router): Router {
    const child = this.#routerLatency.labels({ router: router.kind });
    return decorate(router, (name) => name === 'publish', (_operation, started) => child.observe((performance.now() - started) / 1000));
  }
}

/**
 * A histogram by group (or domain). /metrics answers whoever reaches the port and domain and group
 * names are tenants' names (group-metrics.ts): without EVENTFLOW_METRICS_GROUP_LABELS=on it is one
 * series, labels empty; with it, the first METRICS_GROUP_SERIES label sets seen get a series each
 * and later ones share the empty labels, so that the scrape stays small.
 */
class LabelledHistogram {
  readonly #histogram: CountingHistogram;
  readonly #labelled: boolean;
  readonly #children = new Map<string, HistogramSeries>();
  readonly #others: HistogramSeries;

  constructor(histogram: CountingHistogram, labelled: boolean, labelNames: readonly string[]) {
    this.#histogram = histogram;
    this.#labelled = labelled;
    this.#others = histogram.labels(Object.fromEntries(labelNames.map((name) => [name, ''])));
  }

  observe(labels: { domain: string; name?: string; group?: string }, seconds: number): void {
    if (!this.#labelled) return this.#others.observe(seconds);
    const key = `${labels.domain}\u0000${labels.name ?? ''}\u0000${labels.group ?? ''}`;
    let child = this.#children.get(key);
    if (!child) {
      if (this.#children.size >= METRICS_GROUP_SERIES) return this.#others.observe(seconds);
      const { domain, name, group } = labels;
      child = this.#histogram.labels(name === undefined ? { domain } : { domain, name, group: group ?? '' });
      this.#children.set(key, child);
    }
    child.observe(seconds);
  }
}

type Method = (...args: unknown[]) => unknown;

/**
 * An object with the target's methods and properties (own and inherited), the methods chosen by
 * `timed` reporting their duration (to the settlement of a returned promise) to `observe`. Built
 * once, so a call costs one extra function call, not a Proxy trap. Methods are looked up on the
 * target at each call (a test may replace one) and run with the target as `this`, so classes with
 * private fields work.
 */
function decorate<T extends object>(target: T, timed: (name: string) => boolean, observe: (name: string, started: number, failed: boolean) => void): T {
  const wrapper: Record<string, unknown> = {};
  const source = target as Record<string, unknown>;
  const seen = new Set<string>();
  for (let layer: object | null = target; layer && layer !== Object.prototype; layer = Object.getPrototypeOf(layer) as object | null) {
    for (const name of Object.getOwnPropertyNames(layer)) {
      if (name === 'constructor' || seen.has(name)) continue;
      seen.add(name);
      const descriptor = Object.getOwnPropertyDescriptor(layer, name);
      const value: unknown = descriptor && 'value' in descriptor ? descriptor.value : undefined;
      if (typeof value !== 'function') {
        // Properties and getters (`kind`, `connected`) are read from the target each time.
        Object.defineProperty(wrapper, name, { get: () => source[name], enumerable: true });
        continue;
      }
      const call = (args: unknown[]): unknown => (source[name] as Method).apply(target, args);
      wrapper[name] = timed(name)
        ? (...args: unknown[]): unknown => {
            const started = performance.now();
            let result: unknown;
            try {
              result = call(args);
            } catch (error) {
              observe(name, started, true);
              throw error;
            }
            if (!(result instanceof Promise)) {
              observe(name, started, false);
              return result;
            }
            return result.then(
              (resolved: unknown) => {
                observe(name, started, false);
                return resolved;
              },
              (error: unknown) => {
                observe(name, started, true);
                throw error;
              },
            );
          }
        : (...args: unknown[]): unknown => call(args);
    }
  }
  return wrapper as T;
}
