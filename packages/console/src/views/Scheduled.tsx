/** Scheduled: events due later, soonest first, each cancellable where the token may schedule. */
import { useState, type ReactNode } from 'react';
import type { DomainSummary } from '@eventflow/core';
import { useEventflowClient } from '@eventflow/browser/react';
import { ErrorNote, Loading, Stale, Time } from '../components.js';
import { useQuery } from '../query.js';
import { href } from '../routes.js';
import { cancelScheduled, listScheduled } from '@eventflow/core';

export function Scheduled({ domains }: { domains: DomainSummary[] | undefined }): ReactNode {
  const client = useEventflowClient();
  const list = useQuery('scheduled', (c) => listScheduled(c, { limit: 200 }), { refreshMs: 5_000 });
  const [message, setMessage] = useState<string>('');
  const [failure, setFailure] = useState<unknown>(undefined);
  const mayCancel = (domain: string): boolean => domains?.find((d) => d.domain === domain)?.actions.includes('schedule') ?? false;
  const cancel = async (id: string, label: string): Promise<void> => {
    setFailure(undefined);
    try {
      const cancelled = await cancelScheduled(client, id);
      setMessage(cancelled ? `Cancelled ${label}.` : `${label} had already fired or was gone.`);
      list.reload();
    } catch (error) {
      setFailure(error);
    }
  };
  const rows = list.data?.scheduled;
  return (
    <section aria-labelledby="scheduled-title">
      <h1 id="scheduled-title">Scheduled</h1>
      <p role="status" aria-live="polite" data-testid="scheduled-message">
        {message}
      </p>
      <ErrorNote error={failure} />
      <Stale stale={list.stale} at={list.at} hasData={rows !== undefined} />
      {rows === undefined ? (
        <Loading what="scheduled events" />
      ) : rows.length === 0 ? (
        <p>Nothing is scheduled.</p>
      ) : (
        <table className="grid" data-testid="scheduled-list">
          <caption className="visually-hidden">Scheduled events, soonest first</caption>
          <thead>
            <tr>
              <th scope="col">Due</th>
              <th scope="col">Event</th>
              <th scope="col">Process</th>
              <th scope="col">Scheduled at</th>
              <th scope="col">Action</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => {
              const label = `${row.name} of ${row.domain} › ${row.pid}`;
              return (
                <tr key={row.id} data-testid="scheduled-row" data-id={row.id}>
                  <td data-label="Due">
                    <Time iso={row.due} withDate />
                  </td>
                  <th scope="row" data-label="Event">
                    {row.name}
                  </th>
                  <td data-label="Process">
                    <a href={href({ view: 'process', domain: row.domain, pid: row.pid })}>
                      {row.domain} › <span className="mono">{row.pid}</span>
                    </a>
                  </td>
                  <td data-label="Scheduled at">
                    <Time iso={row.timestamp} withDate />
                  </td>
                  <td data-label="Action">
                    {mayCancel(row.domain) ? (
                      <button type="button" className="danger" aria-label={`Cancel ${label}`} data-testid="cancel" onClick={() => void cancel(row.id, label)}>
                        Cancel
                      </button>
                    ) : (
                      <span className="muted">—</span>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <ErrorNote error={list.error} />
    </section>
  );
}
