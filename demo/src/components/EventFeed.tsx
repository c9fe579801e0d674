import { useConnectionState, useSubscription } from '@eventflow/browser/react';
import { clockTime, nameClass, preview } from './format.js';

const limit = 50;

/** Every event of the domain as it is routed, newest on top; clicking one selects its process. */
export function EventFeed({ domain, selectedPid, onSelect }: { domain: string; selectedPid: string | undefined; onSelect: (pid: string) => void }) {
  const events = useSubscription(domain, '*', { limit });
  const online = useConnectionState() === 'open';
  const newestFirst = [...events].reverse();
  return (
    <section className="panel feed" data-testid="event-feed" aria-label="live events">
      <h2>
        Live events <small>{domain}</small>
      </h2>
      {newestFirst.length === 0 ? (
        <p className="empty">{online ? `Waiting for events in “${domain}”…` : 'Offline: events appear here when the gateway is back.'}</p>
      ) : (
        <ol className="events">
          {newestFirst.map((event) => (
            <li
              key={event.id}
              data-testid="event-feed-item"
              data-position={event.position}
              data-name={event.name}
              data-pid={event.pid}
              className={event.pid === selectedPid ? 'selected' : undefined}
            >
              <button type="button" onClick={() => onSelect(event.pid)} title={`select ${event.pid}`}>
                <time dateTime={event.timestamp}>{clockTime(event.timestamp)}</time>
                <span className={`name ${nameClass(event.name)}`}>{event.name}</span>
                <span className="pid">{event.pid}</span>
                <code className="data">{preview(event.data)}</code>
              </button>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
