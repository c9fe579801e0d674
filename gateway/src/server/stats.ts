/**
 * The gateway's figures for the console (`gatewayStats`): totals the console turns into rates,
 * the store's p99 latency over about the last minute (from the Prometheus histogram's buckets),
 * the consumer backlog and readiness. Snapshots of the histogram are kept, at most one per
 * STATS_SAMPLE_MS, so that any number of consoles polling cost the same.
 */
import type { Result } from '@eventflow/core';
import type { PrometheusMetrics } from '../metrics.js';
import { checkReadiness } from '../readiness.js';
import type { Router } from '../router/router.js';
import type { EventStore } from '../store/store.js';

const STATS_SAMPLE_MS = 1_000;
const LATENCY_WINDOW_MS = 60_000;

export interface StatsSources {
  readonly id: string;
  readonly store: EventStore;
  readonly router: Router;
  readonly prometheus: PrometheusMetrics | undefined;
  readonly readyTimeoutMs: number;
  /** EVENTFLOW_TRACE_LINK, for the console. */
  readonly traceLink?: string | undefined;
  connections(): number;
  inFlight(): number;
  closing(): boolean;
}

type Buckets = Array<[number, number]>;

/** The upper bound (ms) under which 99% of the calls between two cumulative snapshots fell. */
export function p99(from: Buckets, to: Buckets): number | null {
  const before = new Map(from);
  const counts = to.map(([bound, count]): [number, number] => [bound, count - (before.get(bound) ?? 0)]);
  const total = counts.at(-1)?.[1] ?? 0;
  if (total <= 0) return null;
  const bucket = counts.find(([, count]) => count >= total * 0.99);
  if (!bucket) return null;
  // Above the top bucket: the top finite bound is the most that can be said.
  return Number.isFinite(bucket[0]) ? bucket[0] : (counts.at(-2)?.[0] ?? null);
}

export function createStats(sources: StatsSources): () => Promise<Result<'gatewayStats'>> {
  const started = Date.now();
  const samples: Array<{ at: number; buckets: Buckets }> = [];
  return async () => {
    const now = Date.now();
    const totals = await sources.prometheus?.totals();
    if (totals && (samples.length === 0 || now - (samples.at(-1)?.at ?? 0) >= STATS_SAMPLE_MS)) {
      samples.push({ at: now, buckets: totals.storeBuckets });
      while (samples.length > 2 && now - (samples[1]?.at ?? now) >= LATENCY_WINDOW_MS) samples.shift();
    }
    const oldest = samples[0];
    const latency = totals && oldest && oldest.at < now ? p99(oldest.buckets, totals.storeBuckets) : totals ? p99([], totals.storeBuckets) : null;
    const [backlog, readiness] = await Promise.all([sources.store.catalog.backlog(), sources.closing() ? { ready: false } : checkReadiness(sources.store, sources.router, sources.readyTimeoutMs)]);
    return {
      gateway: sources.id,
      at: new Date(now).toISOString(),
      uptimeMs: now - started,
      connections: sources.connections(),
      published: totals?.published ?? 0,
      delivered: totals?.delivered ?? 0,
      storeLatencyP99Ms: latency,
      backlog,
      inFlight: sources.inFlight(),
      ready: readiness.ready,
      ...(sources.traceLink === undefined ? {} : { traceLink: sources.traceLink }),
    };
  };
}
