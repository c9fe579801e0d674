/**
 * Latency: where the time of one kind of event goes (readLatency). For (domain, name) over a chosen
 * window: p50, p99 and the maximum of queue time (stored → its delivery's start), handler time
 * (start → settle) and end to end (stored → settled), and the slowest processes, each one click from
 * its timeline.
 */
import { useState, type FormEvent, type ReactNode } from 'react';
import { readLatency, type DomainSummary, type LatencySummary } from '@eventflow/core';
import { ErrorNote, Loading, Stale, Time } from '../components.js';
import { useQuery } from '../query.js';
import { href } from '../routes.js';
import { durationText } from '../timings.js';

export const WINDOWS: ReadonlyArray<readonly [label: string, ms: number]> = [
  ['5 minutes', 300_000],
  ['1 hour', 3_600_000],
  ['24 hours', 86_400_000],
  ['7 days', 604_800_000],
];

const figures = (summary: LatencySummary): Array<[string, LatencySummary['queue']]> => [
  ['Queue (stored → delivered)', summary.queue],
  ['Handler (delivered → settled)', summary.handler],
  ['End to end (stored → settled)', summary.total],
];

export function Latency({ domains, domain, name, windowMs }: { domains: DomainSummary[] | undefined; domain?: string | undefined; name?: string | undefined; windowMs?: number | undefined }): ReactNode {
  const [draft, setDraft] = useState({ domain: domain ?? '', name: name ?? '', windowMs: windowMs ?? 3_600_000 });
  const submit = (form: FormEvent): void => {
    form.preventDefault();
    window.location.hash = href({ view: 'latency', domain: draft.domain, name: draft.name, windowMs: draft.windowMs });
  };
  return (
    <section aria-labelledby="latency-title">
      <h1 id="latency-title">Latency</h1>
      <form className="latency-form" onSubmit={submit} data-testid="latency-form">
        <label>
          Domain
          <input list="latency-domains" value={draft.domain} onChange={(e) => setDraft({ ...draft, domain: e.target.value })} required data-testid="latency-domain" />
          <datalist id="latency-domains">
            {(domains ?? []).map((d) => (
              <option key={d.domain} value={d.domain} />
            ))}
          </datalist>
        </label>
        <label>
          Event name
          <input value={draft.name} onChange={(e) => setDraft({ ...draft, name: e.target.value })} required data-testid="latency-name" />
        </label>
        <label>
          Window
          <select value={draft.windowMs} onChange={(e) => setDraft({ ...draft, windowMs: Number(e.target.value) })} data-testid="latency-window">
            {WINDOWS.map(([label, ms]) => (
              <option key={ms} value={ms}>
                last {label}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Show</button>
      </form>
      {domain && name ? <Figures domain={domain} name={name} windowMs={windowMs ?? 3_600_000} /> : <p className="muted">Choose a domain and an event name (the consumed kind, such as a command).</p>}
    </section>
  );
}

function Figures({ domain, name, windowMs }: { domain: string; name: string; windowMs: number }): ReactNode {
  const query = useQuery(`latency\u001f${domain}\u001f${name}\u001f${windowMs}`, (client) => readLatency(client, domain, name, { windowMs, slowest: 20 }), { refreshMs: 10_000 });
  const summary = query.data;
  return (
    <>
      <Stale stale={query.stale} at={query.at} hasData={summary !== undefined} />
      {!query.stale || summary === undefined ? <ErrorNote error={query.error} /> : null}
      {summary === undefined ? (
        query.error ? null : <Loading what="the latency figures" />
      ) : summary.count === 0 ? (
        <p data-testid="latency-empty">
          No delivery of {domain} › {name} was settled in this window.
        </p>
      ) : (
        <>
          <p className="muted" data-testid="latency-count">
            {summary.count.toLocaleString()} settled deliveries from <Time iso={summary.from} withDate /> to <Time iso={summary.to} withDate />
            {summary.truncated ? ' (the newest only: the window holds more than one read takes)' : ''}.
          </p>
          <table className="grid latency-figures" data-testid="latency-figures">
            <caption className="visually-hidden">Percentiles of {domain} › {name}</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">p50</th>
                <th scope="col">p99</th>
                <th scope="col">max</th>
              </tr>
            </thead>
            <tbody>
              {figures(summary).map(([label, value]) => (
                <tr key={label} data-testid="latency-row" data-p50={value?.p50} data-p99={value?.p99}>
                  <th scope="row">{label}</th>
                  <td data-label="p50">{value ? durationText(value.p50) : '—'}</td>
                  <td data-label="p99">{value ? durationText(value.p99) : '—'}</td>
                  <td data-label="max">{value ? durationText(value.max) : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <h2>Slowest processes</h2>
          <table className="grid" data-testid="latency-slowest">
            <caption className="visually-hidden">The slowest deliveries end to end, slowest first</caption>
            <thead>
              <tr>
                <th scope="col">Process</th>
                <th scope="col">Group</th>
                <th scope="col">Queue</th>
                <th scope="col">Handler</th>
                <th scope="col">End to end</th>
                <th scope="col">Outcome</th>
                <th scope="col">Settled</th>
              </tr>
            </thead>
            <tbody>
              {summary.slowest.map((sample) => (
                <tr key={`${sample.eventId}\u001f${sample.group}`} data-testid="latency-slow" data-pid={sample.pid} data-total-ms={sample.totalMs}>
                  <th scope="row" data-label="Process">
                    <a className="mono" href={href({ view: 'process', domain, pid: sample.pid })}>
                      {sample.pid}
                    </a>
                  </th>
                  <td data-label="Group">{sample.group === '' ? 'default' : sample.group}</td>
                  <td data-label="Queue">{durationText(sample.queueMs)}</td>
                  <td data-label="Handler">{durationText(sample.handlerMs)}</td>
                  <td data-label="End to end">{durationText(sample.totalMs)}</td>
                  <td data-label="Outcome">{sample.outcome}</td>
                  <td data-label="Settled">
                    <Time iso={sample.settledAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
