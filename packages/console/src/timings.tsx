/**
 * Where an event's time went, as the gateway's ledger recorded it (the fate's deliveries:
 * `claimedAt`, `settledAt`) and where its trace is: stored → delivered (queue time) → settled
 * (handler time), and the trace id of its `traceparent`, linked to the operator's tracing UI when
 * the gateway has EVENTFLOW_TRACE_LINK (gatewayStats' `traceLink`).
 */
import type { ReactNode } from 'react';
import { gatewayStats, parseTraceparent, type EventDelivery, type EventFate, type StoredEvent } from '@eventflow/core';
import { useQuery } from './query.js';

/** A duration for people: ms below ten seconds, then seconds, minutes, hours. */
export function durationText(ms: number): string {
  if (ms < 10_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export interface Timing {
  group: string;
  /** Stored → the delivery's start. */
  queueMs: number;
  /** The delivery's start → its end; undefined while it is open. */
  handlerMs: number | undefined;
  claimedAt: string;
  settledAt: string | undefined;
}

export function timingOf(event: StoredEvent, delivery: EventDelivery): Timing | undefined {
  if (!delivery.claimedAt) return undefined;
  const claimed = Date.parse(delivery.claimedAt);
  return {
    group: delivery.group,
    queueMs: Math.max(0, claimed - Date.parse(event.timestamp)),
    handlerMs: delivery.settledAt ? Math.max(0, Date.parse(delivery.settledAt) - claimed) : undefined,
    claimedAt: delivery.claimedAt,
    settledAt: delivery.settledAt,
  };
}

/** The timing a timeline row shows: the delivery that ended last (else the one that began last). */
export function rowTiming(event: StoredEvent, fate: EventFate | undefined): Timing | undefined {
  const timings = (fate?.deliveries ?? []).map((delivery) => timingOf(event, delivery)).filter((timing): timing is Timing => timing !== undefined);
  return timings.sort((a, b) => (b.settledAt ?? b.claimedAt).localeCompare(a.settledAt ?? a.claimedAt))[0];
}

/** `queue → handler` for a timeline row. */
export function RowTiming({ event, fate }: { event: StoredEvent; fate: EventFate | undefined }): ReactNode {
  const timing = rowTiming(event, fate);
  if (!timing) return <span className="timing" data-testid="row-timing" />;
  const handler = timing.handlerMs === undefined ? 'running' : durationText(timing.handlerMs);
  return (
    <span
      className="timing mono"
      data-testid="row-timing"
      data-queue-ms={timing.queueMs}
      data-handler-ms={timing.handlerMs ?? ''}
      title={`waited ${durationText(timing.queueMs)} for a consumer, then ${timing.handlerMs === undefined ? 'still running' : `handled in ${handler}`}`}
    >
      {durationText(timing.queueMs)} → {handler}
    </span>
  );
}

/** The operator's tracing UI link template (EVENTFLOW_TRACE_LINK), read once per console. */
export function useTraceLink(): string | undefined {
  return useQuery('trace-link', async (client) => (await gatewayStats(client)).traceLink ?? '').data || undefined;
}

/** The link for a trace id, or undefined: the template's `{traceId}` replaced, an http(s) URL only. */
export function traceHref(template: string | undefined, traceId: string): string | undefined {
  if (!template) return undefined;
  const url = template.replaceAll('{traceId}', traceId);
  return /^https?:\/\//.test(url) ? url : undefined;
}

/** The selected event's facts: its trace and, per group, stored → delivered → settled with the durations. */
export function TimingFacts({ event, fate, traceLink }: { event: StoredEvent; fate: EventFate | undefined; traceLink: string | undefined }): ReactNode {
  const trace = parseTraceparent(event.traceparent);
  const link = trace && traceHref(traceLink, trace.traceId);
  const timings = (fate?.deliveries ?? []).map((delivery) => timingOf(event, delivery)).filter((timing): timing is Timing => timing !== undefined);
  return (
    <>
      <dt>Trace</dt>
      <dd className="mono" data-testid="event-trace">
        {!trace ? (
          <span className="muted">none (published without a trace context)</span>
        ) : link ? (
          <a href={link} target="_blank" rel="noreferrer noopener" data-testid="trace-link">
            {trace.traceId}
          </a>
        ) : (
          <span title="set EVENTFLOW_TRACE_LINK on the gateway to link it">{trace.traceId}</span>
        )}
      </dd>
      {timings.length > 0 && (
        <>
          <dt>Timing</dt>
          <dd>
            <ul className="delivery-list" data-testid="event-timings">
              {timings.map((timing) => (
                <li key={timing.group} data-group={timing.group} data-queue-ms={timing.queueMs} data-handler-ms={timing.handlerMs ?? ''}>
                  <span className="mono">{timing.group === '' ? 'default group' : timing.group}</span>: stored → delivered <strong>{durationText(timing.queueMs)}</strong> →{' '}
                  {timing.handlerMs === undefined ? (
                    <span>running</span>
                  ) : (
                    <>
                      settled <strong>{durationText(timing.handlerMs)}</strong> <span className="muted">({durationText(timing.queueMs + timing.handlerMs)} in all)</span>
                    </>
                  )}
                </li>
              ))}
            </ul>
          </dd>
        </>
      )}
    </>
  );
}
