/** The processes of a domain, the most recently active first: status, first and last event, event count; search by pid prefix; cursor pages. */
import { useEffect, useState, type ReactNode } from 'react';
import { ErrorNote, Loading, Stale, StatusBadge, Time } from '../components.js';
import { useQuery } from '../query.js';
import { href } from '../routes.js';
import { listProcesses } from '@eventflow/core';

const PAGE = 50;

export function Processes({ domain }: { domain: string }): ReactNode {
  const [search, setSearch] = useState('');
  const [prefix, setPrefix] = useState('');
  /** The cursors of the pages shown so far: the last one is the current page's. */
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const after = cursors.at(-1);
  useEffect(() => {
    const timer = setTimeout(() => {
      setPrefix(search.trim());
      setCursors([undefined]);
    }, 200);
    return () => clearTimeout(timer);
  }, [search]);
  useEffect(() => setCursors([undefined]), [domain]);
  const page = useQuery(`processes ${domain} ${prefix} ${after ?? ''}`, (client) =>
    listProcesses(client, domain, { order: 'recent', limit: PAGE, ...(prefix ? { prefix } : {}), ...(after ? { cursor: after } : {}) }),
  );
  const processes = page.data?.processes;
  return (
    <section aria-labelledby="processes-title">
      <h1 id="processes-title">
        Processes of <span className="mono">{domain}</span>
      </h1>
      <form role="search" className="toolbar" onSubmit={(event) => event.preventDefault()}>
        <label htmlFor="pid-search">Search by pid prefix</label>
        <input id="pid-search" type="search" value={search} onChange={(event) => setSearch(event.target.value)} maxLength={64} autoComplete="off" spellCheck={false} />
      </form>
      <Stale stale={page.stale} at={page.at} hasData={processes !== undefined} />
      <ErrorNote error={page.error} />
      {processes === undefined ? (
        <Loading what="processes" />
      ) : processes.length === 0 ? (
        <p>{prefix ? `No process of ${domain} starts with “${prefix}”.` : `No process in ${domain}.`}</p>
      ) : (
        <table className="grid" data-testid="process-list">
          <caption className="visually-hidden">Processes of {domain}, the most recently active first, page {cursors.length}</caption>
          <thead>
            <tr>
              <th scope="col">Pid</th>
              <th scope="col">Status</th>
              <th scope="col" className="num">
                Events
              </th>
              <th scope="col">First event</th>
              <th scope="col" aria-sort="descending">
                Last event
              </th>
            </tr>
          </thead>
          <tbody>
            {processes.map((process) => (
              <tr key={process.pid} data-testid="process-row" data-pid={process.pid} data-status={process.status}>
                <th scope="row" data-label="Pid">
                  <a className="mono" href={href({ view: 'process', domain, pid: process.pid })}>
                    {process.pid}
                  </a>
                </th>
                <td data-label="Status">
                  <StatusBadge status={process.status} />
                </td>
                <td className="num" data-label="Events">
                  {process.events.toLocaleString()}
                </td>
                <td data-label="First event">
                  <Time iso={process.firstEvent} withDate />
                </td>
                <td data-label="Last event">
                  <Time iso={process.lastEvent} withDate />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <nav className="pager" aria-label="Pages of processes">
        <button type="button" disabled={cursors.length <= 1} onClick={() => setCursors((list) => list.slice(0, -1))}>
          Previous page
        </button>
        <span aria-live="polite">Page {cursors.length}</span>
        <button type="button" data-testid="next-page" disabled={!page.data?.cursor} onClick={() => setCursors((list) => [...list, page.data?.cursor])}>
          Next page
        </button>
      </nav>
    </section>
  );
}
