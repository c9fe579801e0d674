/** The latency view's figures (readLatency): percentiles and the slowest of a page of settled deliveries. */
import type { LatencySample, LatencySummary } from '@eventflow/core';
import type { SettledDelivery } from '../store/catalog.js';

/** Nearest-rank percentiles of `values` (sorted here), or undefined when there are none. */
function percentiles(values: number[]): LatencySummary['queue'] {
  if (values.length === 0) return undefined;
  values.sort((a, b) => a - b);
  const rank = (p: number): number => values[Math.min(values.length - 1, Math.max(0, Math.ceil((p / 100) * values.length) - 1))] as number;
  return { p50: rank(50), p99: rank(99), max: values[values.length - 1] as number };
}

const iso = (ms: number): string => new Date(ms).toISOString();

function sample(row: SettledDelivery): LatencySample {
  // Clocks of gateways sharing a store differ a little: a negative duration reads as 0.
  const queueMs = Math.max(0, row.claimedAt - row.storedAt);
  const handlerMs = Math.max(0, row.settledAt - row.claimedAt);
  return {
    eventId: row.eventId,
    pid: row.pid,
    group: row.group,
    outcome: row.outcome,
    attempts: row.attempts,
    storedAt: iso(row.storedAt),
    claimedAt: iso(row.claimedAt),
    settledAt: iso(row.settledAt),
    queueMs,
    handlerMs,
    totalMs: Math.max(0, row.settledAt - row.storedAt),
  };
}

export function latencySummary(rows: readonly SettledDelivery[], { from, to, truncated, slowest }: { from: number; to: number; truncated: boolean; slowest: number }): LatencySummary {
  const samples = rows.map(sample);
  const summary: LatencySummary = { from: iso(from), to: iso(to), count: samples.length, truncated, slowest: [...samples].sort((a, b) => b.totalMs - a.totalMs).slice(0, slowest) };
  const queue = percentiles(samples.map((s) => s.queueMs));
  if (queue) {
    summary.queue = queue;
    summary.handler = percentiles(samples.map((s) => s.handlerMs));
    summary.total = percentiles(samples.map((s) => s.totalMs));
  }
  return summary;
}
