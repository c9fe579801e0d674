/** The dashboard: connection badge and domain picker on top; live feed, processes and the selected process's state below. */
import { useCallback, useState } from 'react';
import { ConnectionBadge } from './components/ConnectionBadge.js';
import { DomainPicker } from './components/DomainPicker.js';
import { EventFeed } from './components/EventFeed.js';
import { ProcessList } from './components/ProcessList.js';
import { StatePanel } from './components/StatePanel.js';
import { consoleUrlFor, writeSelection } from './settings.js';

export interface AppProps {
  gatewayUrl: string;
  initialDomain: string;
  initialPid: string | undefined;
}

export function App({ gatewayUrl, initialDomain, initialPid }: AppProps) {
  const [domain, setDomain] = useState(initialDomain);
  const [pid, setPid] = useState(initialPid);

  const selectDomain = useCallback((next: string) => {
    setDomain(next);
    setPid(undefined);
    writeSelection(next, undefined);
  }, []);
  const selectPid = useCallback(
    (next: string) => {
      setPid(next);
      writeSelection(domain, next);
    },
    [domain],
  );

  return (
    <div className="app">
      <header className="top">
        <h1>eventflow</h1>
        <DomainPicker domain={domain} onChange={selectDomain} />
        <span className="gateway" title="gateway">
          {gatewayUrl}
        </span>
        <ConnectionBadge />
        <a className="console-link" href={consoleUrlFor(gatewayUrl)} data-testid="console-link">
          Operator console
        </a>
      </header>
      <main className="panels">
        <EventFeed key={`feed:${domain}`} domain={domain} selectedPid={pid} onSelect={selectPid} />
        <ProcessList key={`processes:${domain}`} domain={domain} selectedPid={pid} onSelect={selectPid} />
        {pid === undefined ? (
          <section className="panel state" data-testid="state-panel" data-pid="">
            <h2>State</h2>
            <p className="empty">Select a process to see its composed state.</p>
          </section>
        ) : (
          <StatePanel key={`state:${domain}/${pid}`} domain={domain} pid={pid} />
        )}
      </main>
    </div>
  );
}
