/** Live: a domain's feed, opening with its recent history (a subscription from the last N), filtered by name and pid, with pause. */
import { useState, type ReactNode } from 'react';
import type { DomainSummary, StoredEvent } from '@eventflow/core';
import { useSubscription } from '@eventflow/browser/react';
import { Time } from '../components.js';
import { href } from '../routes.js';

const HISTORY = 50;
const KEEP = 500;

export function Live({ domain, domains }: { domain: string | undefined; domains: DomainSummary[] | undefined }): ReactNode {
  const subscribable = (domains ?? []).filter((d) => d.actions.includes('subscribe'));
  return (
    <section aria-labelledby="live-title">
      <h1 id="live-title">Live</h1>
      <nav aria-label="Domains to follow" className="toolbar">
        {subscribable.map((d) => (
          <a key={d.domain} href={href({ view: 'live', domain: d.domain })} aria-current={d.domain === domain ? 'page' : undefined} className="chip">
            {d.domain}
          </a>
        ))}
      </nav>
      {domain ? <Feed key={domain} domain={domain} /> : <p>Choose a domain to follow.</p>}
    </section>
  );
}

function Feed({ domain }: { domain: string }): ReactNode {
  const events = useSubscription(domain, '*', { limit: KEEP, last: HISTORY });
  const [paused, setPaused] = useState<StoredEvent[] | undefined>(undefined);
  const [name, setName] = useState('');
  const [pid, setPid] = useState('');
  const shown = (paused ?? events).filter((event) => (!name || event.name.includes(name)) && (!pid || event.pid.startsWith(pid)));
  const waiting = paused ? events.length - paused.length : 0;
  return (
    <>
      <form className="toolbar" onSubmit={(event) => event.preventDefault()} aria-label="Filter the feed">
        <label>
          Name contains <input value={name} onChange={(event) => setName(event.target.value)} data-testid="filter-name" spellCheck={false} />
        </label>
        <label>
          Pid starts with <input value={pid} onChange={(event) => setPid(event.target.value)} data-testid="filter-pid" spellCheck={false} />
        </label>
        <button type="button" aria-pressed={paused !== undefined} data-testid="pause" onClick={() => setPaused((current) => (current ? undefined : events))}>
          {paused ? `Resume${waiting > 0 ? ` (${waiting} new)` : ''}` : 'Pause'}
        </button>
      </form>
      <p className="muted" aria-live="polite">
        {paused ? 'Paused. ' : ''}
        {shown.length} event(s) shown; opens with the last {HISTORY}.
      </p>
      <ol className="feed" data-testid="live-feed" reversed aria-label={`Events of ${domain}, newest first`}>
        {[...shown].reverse().map((event) => (
          <li key={event.id} data-testid="feed-item" data-name={event.name} data-pid={event.pid} data-position={event.position}>
            <Time iso={event.timestamp} /> <span className="name">{event.name}</span>{' '}
            <a className="mono" href={href({ view: 'process', domain, pid: event.pid })}>
              {event.pid}
            </a>
            <code className="data">{JSON.stringify(event.data)}</code>
          </li>
        ))}
      </ol>
    </>
  );
}
