import { useConnectionState, useEventlogState } from '@eventflow/browser/react';

/**
 * The composed state of one process. It shows the cached state at once (also offline), marked
 * stale until the gateway has confirmed it or sent what was missing.
 */
export function StatePanel({ domain, pid }: { domain: string; pid: string }) {
  const { state, position, stale, loading, error } = useEventlogState(domain, pid);
  const online = useConnectionState() === 'open';
  return (
    <section className="panel state" data-testid="state-panel" data-pid={pid} data-stale={stale} data-loading={loading} aria-label="process state">
      <h2>
        State <small className="pid">{pid}</small>
        {stale && !loading && (
          <span className="tag stale" data-testid="stale-marker" title="From the local cache: the gateway has not confirmed it yet.">
            {online ? 'stale · catching up' : 'stale · offline'}
          </span>
        )}
      </h2>
      {error ? <p className="error">{error instanceof Error ? error.message : String(error)}</p> : null}
      {loading ? (
        <p className="empty">{online ? 'Loading…' : 'Offline, and this process is not in the local cache yet.'}</p>
      ) : (
        <>
          <pre data-testid="state-json">{JSON.stringify(state, null, 2)}</pre>
          <p className="meta">{position === 0 ? 'No events.' : `Up to position ${position}.`}</p>
        </>
      )}
    </section>
  );
}
