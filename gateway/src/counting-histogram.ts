/**
 * A Prometheus histogram whose `observe` is a bucket search and three additions, for the per-job
 * hot paths (metrics.ts: store calls, queue, handler and request times; about five observations a
 * job). prom-client's validates and hashes the label set at every call, which came to ~3.5% of the
 * gateway's CPU in a drain of queued jobs. Registered in a prom-client registry as a metric of its
 * own and exported in prom-client's exact format (the same label order, series in the order they
 * were first observed, cumulative buckets, then `+Inf`, `_sum`, `_count`), so /metrics reads the
 * same.
 */
import type { Registry } from 'prom-client';

/** One label set's counts. `observe` ignores a value that is not a finite number (a metric never throws on a hot path). */
export class HistogramSeries {
  readonly labels: Readonly<Record<string, string>>;
  /** Per bucket, not cumulative; the last is above every bound (+Inf only). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  readonly #bounds: readonly number[];
  readonly #firstObserved: (series: HistogramSeries) => void;

  constructor(labels: Readonly<Record<string, string>>, bounds: readonly number[], firstObserved: (series: HistogramSeries) => void) {
    this.labels = labels;
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
    this.#firstObserved = firstObserved;
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.#bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket += 1;
    if (this.count === 0) this.#firstObserved(this);
    this.counts[bucket] = (this.counts[bucket] as number) + 1;
    this.sum += value;
    this.count += 1;
  }
}

/** A sample as prom-client's registry formats it: `labels` first (`le`), then `sharedLabels` (the series'). */
interface Sample {
  labels: Record<string, string | number>;
  sharedLabels: Readonly<Record<string, string>>;
  value: number;
  metricName: string;
}

export interface CountingHistogramOptions {
  name: string;
  help: string;
  labelNames: readonly string[];
  /** Upper bounds, ascending. */
  buckets: readonly number[];
  registers: readonly Registry[];
}

export class CountingHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #labelNames: readonly string[];
  readonly #bounds: readonly number[];
  /** Every label set asked for, by its values. */
  readonly #series = new Map<string, HistogramSeries>();
  /** Those observed at least once, in the order of their first observation (what is exported). */
  readonly #observed: HistogramSeries[] = [];

  constructor({ name, help, labelNames, buckets, registers }: CountingHistogramOptions) {
    this.name = name;
    this.help = help;
    this.#labelNames = labelNames;
    this.#bounds = [...buckets];
    // prom-client's Registry takes any object with its metrics' shape; its typings name only its own classes.
    for (const registry of registers) registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The series of a label set: every label name given a value (a missing one is ''). Keep it: looking it up costs a key built from the values. */
  labels(values: Readonly<Record<string, string>>): HistogramSeries {
    const key = this.#labelNames.map((name) => values[name] ?? '').join('\u0000');
    let series = this.#series.get(key);
    if (!series) {
      series = new HistogramSeries({ ...values }, this.#bounds, (first) => this.#observed.push(first));
      this.#series.set(key, series);
    }
    return series;
  }

  /** What prom-client's registry formats for /metrics. */
  getForPromString(): { name: string; help: string; type: string; aggregator: string; values: Sample[] } {
    const values: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const series of this.#observed) {
      let cumulative = 0;
      this.#bounds.forEach((bound, index) => {
        cumulative += series.counts[index] as number;
        values.push({ labels: { le: bound }, sharedLabels: series.labels, value: cumulative, metricName: bucket });
      });
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: series.labels, value: series.count, metricName: bucket },
        { labels: {}, sharedLabels: series.labels, value: series.sum, metricName: `${this.name}_sum` },
        { labels: {}, sharedLabels: series.labels, value: series.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** As prom-client's `get()`: each sample's labels with the series' merged in. */
  get(): { name: string; help: string; type: string; aggregator: string; values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> } {
    const data = this.getForPromString();
    return { ...data, values: data.values.map(({ labels, sharedLabels, value, metricName }) => ({ labels: { ...labels, ...sharedLabels }, value, metricName })) };
  }
}
