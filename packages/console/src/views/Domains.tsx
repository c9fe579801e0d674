/** Domains: those the token may read, with event counts, last activity and where to go next. */
import type { ReactNode } from 'react';
import type { DomainSummary } from '@eventflow/core';
import { ErrorNote, Loading, Stale, Time } from '../components.js';
import type { QueryView } from '../query.js';
import { href } from '../routes.js';

export function Domains({ domains }: { domains: QueryView<DomainSummary[]> }): ReactNode {
  const list = domains.data;
  return (
    <section aria-labelledby="domains-title">
      <h1 id="domains-title">Domains</h1>
      <Stale stale={domains.stale} at={domains.at} hasData={list !== undefined} />
      <ErrorNote error={domains.error} />
      {list === undefined ? (
        <Loading what="domains" />
      ) : list.length === 0 ? (
        <p>No domain with events that this token may read.</p>
      ) : (
        <table className="grid" data-testid="domain-list">
          <caption className="visually-hidden">Domains, their event counts and last activity</caption>
          <thead>
            <tr>
              <th scope="col">Domain</th>
              <th scope="col" className="num">
                Events
              </th>
              <th scope="col">Last activity</th>
              <th scope="col">Open</th>
            </tr>
          </thead>
          <tbody>
            {list.map((domain) => (
              <tr key={domain.domain} data-testid="domain-row" data-domain={domain.domain}>
                <th scope="row" data-label="Domain">
                  <a href={href({ view: 'processes', domain: domain.domain })}>{domain.domain}</a>
                </th>
                <td className="num" data-label="Events">
                  {domain.events.toLocaleString()}
                </td>
                <td data-label="Last activity">
                  <Time iso={domain.lastEvent} withDate />
                </td>
                <td data-label="Open" className="links">
                  <a href={href({ view: 'processes', domain: domain.domain })} aria-label={`Processes of ${domain.domain}`}>
                    processes
                  </a>
                  {domain.actions.includes('subscribe') && (
                    <a href={href({ view: 'live', domain: domain.domain })} aria-label={`Live feed of ${domain.domain}`}>
                      live
                    </a>
                  )}
                  {domain.actions.includes('publish') && (
                    <a href={href({ view: 'publish', domain: domain.domain })} aria-label={`Publish to ${domain.domain}`}>
                      publish
                    </a>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
