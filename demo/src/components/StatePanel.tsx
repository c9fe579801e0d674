import { useState, type FormEvent } from 'react';
import { useConnectionState, useEventflowClient, useEventlogState, useOutbox } from '@eventflow/browser/react';

/**
 * The composed state of one process. It shows the cached state at once (also offline), marked
 * stale until the gateway has confirmed it or sent what was missing.
 */
export function StatePanel({ domain, pid }: { domain: string; pid: string }) {
  const { state, position, stale, loading, error, pending } = useEventlogState(domain, pid);
  const online = useConnectionState() === 'open';
  return (
    <section className="panel state" data-testid="state-panel" data-pid={pid} data-stale={stale} data-loading={loading} data-pending={pending.length} aria-label="process state">
      <h2>
        State <small className="pid">{pid}</small>
        {stale && !loading && (
          <span className="tag stale" data-testid="stale-marker" title="From the local cache: the gateway has not confirmed it yet.">
            {online ? 'stale · catching up' : 'stale · offline'}
          </span>
        )}
        {pending.length > 0 && (
          <span className="tag pending" data-testid="pending-marker" title="Queued in the outbox: shown, not yet stored by the gateway.">
            {pending.length} pending
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
          <Actions domain={domain} pid={pid} />
        </>
      )}
    </section>
  );
}

/**
 * The panel's actions: they publish through the outbox, so they work offline (queued in IndexedDB,
 * shown pending in the state above) and are sent once the gateway is reachable.
 */
function Actions({ domain, pid }: { domain: string; pid: string }) {
  const client = useEventflowClient();
  const { rejections } = useOutbox();
  const [note, setNote] = useState('');
  const [failure, setFailure] = useState<string>();
  const publish = (name: string, data: Record<string, string>): void => {
    setFailure(undefined);
    client.publish({ domain, name, pid, data }).catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  };
  const addNote = (event: FormEvent): void => {
    event.preventDefault();
    if (!note.trim()) return;
    publish('note-added', { note: note.trim() });
    setNote('');
  };
  const refused = rejections.filter(({ entry }) => entry.event.domain === domain && entry.event.pid === pid);
  return (
    <div className="actions">
      <form onSubmit={addNote}>
        <input data-testid="note-input" value={note} onChange={(event) => setNote(event.target.value)} placeholder="note" aria-label="note" />
        <button type="submit" data-testid="add-note">
          Add note
        </button>
        <button type="button" data-testid="cancel-order" onClick={() => publish('order-cancelled', { status: 'cancelled' })}>
          Cancel order
        </button>
      </form>
      {failure && <p className="error">{failure}</p>}
      {refused.map(({ entry, error }) => (
        <p key={entry.id} className="error" data-testid="rejection">
          {entry.event.name} refused: {error.message}{' '}
          <button type="button" onClick={() => client.outbox?.dismiss(entry.id)}>
            dismiss
          </button>
        </p>
      ))}
    </div>
  );
}
