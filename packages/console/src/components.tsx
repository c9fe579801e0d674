/** Small pieces every view uses: the stale marker, status badges, times, errors, sparklines. */
import type { ReactNode } from 'react';
import { isEventflowError } from '@eventflow/core';

export function Stale({ stale, at, hasData }: { stale: boolean; at: number | undefined; hasData: boolean }): ReactNode {
  if (!stale || !hasData) return null;
  return (
    <p className="stale" data-testid="stale-marker" role="status">
      Stale: the gateway has not confirmed this{at ? ` since ${new Date(at).toLocaleTimeString()}` : ''}.
    </p>
  );
}

export function ErrorNote({ error }: { error: unknown }): ReactNode {
  if (error === undefined) return null;
  const text = isEventflowError(error) ? `${error.code}: ${error.message}` : String(error);
  return (
    <p className="error" role="alert">
      {text}
    </p>
  );
}

export function StatusBadge({ status }: { status: string }): ReactNode {
  return (
    <span className={`badge badge-${status.replace(/ /g, '-')}`} data-testid="status">
      {status}
    </span>
  );
}

/** A timestamp as local time, the ISO value in the title and for screen readers' datetime. */
export function Time({ iso, withDate = false }: { iso: string | undefined; withDate?: boolean }): ReactNode {
  if (!iso) return <span aria-label="none">—</span>;
  const date = new Date(iso);
  const text = withDate ? date.toLocaleString() : date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return (
    <time dateTime={iso} title={iso}>
      {text}
    </time>
  );
}

export function Loading({ what }: { what: string }): ReactNode {
  return (
    <p className="muted" role="status">
      Loading {what}…
    </p>
  );
}

/** A line chart of `values` (oldest first), scaled to its maximum; no chart library needed. */
export function Sparkline({ values, label }: { values: readonly number[]; label: string }): ReactNode {
  const width = 240;
  const height = 48;
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const points = values.map((value, i) => `${(i * step).toFixed(1)},${(height - (value / max) * (height - 4) - 2).toFixed(1)}`).join(' ');
  return (
    <svg className="sparkline" viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none" role="img" aria-label={label}>
      <polyline points={points} fill="none" stroke="currentColor" strokeWidth="2" vectorEffect="non-scaling-stroke" />
    </svg>
  );
}
