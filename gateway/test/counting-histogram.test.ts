/**
 * counting-histogram.ts against prom-client's Histogram: the same observations give the same
 * /metrics text and the same `get()` values, series in the order of their first observation; a
 * value that is not a finite number is dropped (prom-client's throws, on a hot path).
 */
import { describe, expect, it } from 'vitest';
import { Histogram, Registry } from 'prom-client';
import { CountingHistogram } from '../src/counting-histogram.js';

const buckets = [0.00005, 0.001, 0.0025, 0.1, 1, 5];
const labelNames = ['domain', 'name', 'group'];

function pair(): { ours: CountingHistogram; theirs: Histogram<string>; oursRegistry: Registry; theirsRegistry: Registry } {
  const oursRegistry = new Registry();
  const theirsRegistry = new Registry();
  const options = { name: 'eventflow_test_seconds', help: 'A test histogram.', labelNames, buckets };
  return { ours: new CountingHistogram({ ...options, registers: [oursRegistry] }), theirs: new Histogram({ ...options, registers: [theirsRegistry] }), oursRegistry, theirsRegistry };
}

describe('CountingHistogram', () => {
  it("exports what prom-client's Histogram exports for the same observations", async () => {
    const { ours, theirs, oursRegistry, theirsRegistry } = pair();
    const sets = [
      { domain: '', name: '', group: '' },
      { domain: 'orders', name: 'created', group: 'billing' },
      { domain: 'quote"back\\slash', name: 'new\nline', group: '' },
    ];
    const values = [0, 0.00005, 0.00005000001, 0.001, 0.002, 0.0025, 0.05, 1, 4.99, 5, 7, 300, 1e-9];
    // Each label set first observed at a different time: the export keeps that order.
    for (const [i, value] of values.entries()) {
      for (const labels of sets.slice(0, 1 + (i % sets.length))) {
        ours.labels(labels).observe(value);
        theirs.labels(labels).observe(value);
      }
    }
    expect(await oursRegistry.metrics()).toBe(await theirsRegistry.metrics());
    // get() (what metrics.ts totals() reads): the same samples; prom-client adds an exemplar field, null here.
    const theirsGot = await theirs.get();
    expect(ours.get()).toEqual({ ...theirsGot, values: theirsGot.values.map(({ labels, value, metricName }) => ({ labels, value, metricName })) });
    expect((await oursRegistry.metrics()).split('\n').filter((line) => line.startsWith('eventflow_test_seconds_count')).length).toBe(3);
  });

  it('exports nothing for a label set asked for but never observed, and drops values that are not finite numbers', async () => {
    const { ours, theirs, oursRegistry, theirsRegistry } = pair();
    const idle = ours.labels({ domain: 'idle' });
    theirs.labels({ domain: 'idle', name: '', group: '' });
    expect(await oursRegistry.metrics()).toBe(await theirsRegistry.metrics());
    for (const bad of [Number.NaN, Infinity, -Infinity]) idle.observe(bad);
    expect(idle.count).toBe(0);
    expect(await oursRegistry.metrics()).toBe(await theirsRegistry.metrics());
    // One series per label set, however many times it is asked for.
    ours.labels({ domain: 'idle' }).observe(0.5);
    expect(idle.count).toBe(1);
  });
});
