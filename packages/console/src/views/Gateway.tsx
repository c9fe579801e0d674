/** Gateway: its figures polled every second, as small live charts (no chart library). */
import { useEffect, useState, type ReactNode } from 'react';
import type { GatewayStats } from '@eventflow/core';
import { useEventflowClient } from '@eventflow/browser/react';
import { ErrorNote, Sparkline } from '../components.js';
import { gatewayStats } from '@eventflow/core';

const POLL_MS = 1_000;
const KEEP = 60;

interface Sample {
  stats: GatewayStats;
  publishedPerSecond: number;
  deliveredPerSecond: number;
}

export function Gateway(): ReactNode {
  const client = useEventflowClient();
  const [samples, setSamples] = useState<Sample[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    let stopped = false;
    const poll = async (): Promise<void> => {
      try {
        const stats = await gatewayStats(client, { timeout: 5_000 });
        if (stopped) return;
        setError(undefined);
        setSamples((list) => {
          const previous = list.at(-1)?.stats;
          const seconds = previous ? Math.max(0.001, (Date.parse(stats.at) - Date.parse(previous.at)) / 1000) : 1;
          const rate = (now: number, before: number | undefined): number => (before === undefined ? 0 : Math.max(0, (now - before) / seconds));
          const sample = { stats, publishedPerSecond: rate(stats.published, previous?.published), deliveredPerSecond: rate(stats.delivered, previous?.delivered) };
          return [...list, sample].slice(-KEEP);
        });
      } catch (failure) {
        if (!stopped) setError(failure);
      }
    };
    void poll();
    const timer = setInterval(() => void poll(), POLL_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [client]);
  const latest = samples.at(-1);
  const series = (pick: (sample: Sample) => number): number[] => samples.map(pick);
  const cards: Array<{ id: string; label: string; value: string; values: number[] }> = latest
    ? [
        { id: 'connections', label: 'Connections', value: String(latest.stats.connections), values: series((s) => s.stats.connections) },
        { id: 'published', label: 'Published events/s', value: latest.publishedPerSecond.toFixed(1), values: series((s) => s.publishedPerSecond) },
        { id: 'delivered', label: 'Delivered events/s', value: latest.deliveredPerSecond.toFixed(1), values: series((s) => s.deliveredPerSecond) },
        {
          id: 'latency',
          label: 'Store latency p99 (last minute)',
          value: latest.stats.storeLatencyP99Ms === null ? 'n/a' : `≤ ${latest.stats.storeLatencyP99Ms} ms`,
          values: series((s) => s.stats.storeLatencyP99Ms ?? 0),
        },
        { id: 'backlog', label: 'Consumer backlog (claimed, unsettled)', value: String(latest.stats.backlog), values: series((s) => s.stats.backlog) },
        { id: 'in-flight', label: 'Deliveries in flight here', value: String(latest.stats.inFlight), values: series((s) => s.stats.inFlight) },
      ]
    : [];
  return (
    <section aria-labelledby="gateway-title">
      <h1 id="gateway-title">Gateway</h1>
      <ErrorNote error={error} />
      {latest && (
        <p data-testid="readiness" data-ready={latest.stats.ready}>
          <span className={`badge badge-${latest.stats.ready ? 'completed' : 'failed'}`}>{latest.stats.ready ? 'ready' : 'not ready'}</span> gateway{' '}
          <span className="mono">{latest.stats.gateway}</span>, up {Math.round(latest.stats.uptimeMs / 1000)} s
        </p>
      )}
      <div className="cards">
        {cards.map((card) => (
          <figure key={card.id} className="card" data-testid={`stat-${card.id}`}>
            <figcaption>{card.label}</figcaption>
            <p className="stat-value">{card.value}</p>
            <Sparkline values={card.values} label={`${card.label}, last ${card.values.length} seconds`} />
          </figure>
        ))}
      </div>
    </section>
  );
}
