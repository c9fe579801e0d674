import { useProcesses } from './useProcesses.js';

const shown = 200;

/** The domain's processes, newest first; clicking one selects it. */
export function ProcessList({ domain, selectedPid, onSelect }: { domain: string; selectedPid: string | undefined; onSelect: (pid: string) => void }) {
  const { pids, stale, error } = useProcesses(domain);
  return (
    <section className="panel processes" data-testid="process-list" data-stale={stale} aria-label="processes">
      <h2>
        Processes <small>{pids.length}</small>
        {stale && pids.length > 0 && <span className="tag stale">last known</span>}
      </h2>
      {error && <p className="error">{error}</p>}
      {pids.length === 0 ? (
        <p className="empty">{stale ? 'Loading processes…' : `No processes in “${domain}” yet.`}</p>
      ) : (
        <ul className="pids">
          {pids.slice(0, shown).map((pid) => (
            <li key={pid} data-testid="process-item" data-pid={pid} className={pid === selectedPid ? 'selected' : undefined}>
              <button type="button" onClick={() => onSelect(pid)} aria-pressed={pid === selectedPid}>
                {pid}
              </button>
            </li>
          ))}
        </ul>
      )}
      {pids.length > shown && <p className="more">and {pids.length - shown} older</p>}
    </section>
  );
}
