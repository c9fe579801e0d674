/**
 * Entry: which gateway to connect to (its own, or `?gateway=` once the operator confirmed it), then
 * one browser client for it, made anew when the token changes; leaving an identity (signing out,
 * or another one's token) deletes what the console cached for it.
 */
import { StrictMode, useState, type ReactNode } from 'react';
import { createRoot } from 'react-dom/client';
import { EventflowProvider } from '@eventflow/browser/react';
import { App } from './App.js';
import { cacheScope, connect, forget, isTrusted, ownGateway, requestedGateway, saveToken, storedToken, trust } from './connection.js';
import { CacheScope } from './query.js';
import { ChooseGateway } from './views/ChooseGateway.js';
import './styles.css';

function Root(): ReactNode {
  const [gateway, setGateway] = useState(() => {
    const requested = requestedGateway();
    return requested.own || (!requested.problem && isTrusted(requested.url)) ? requested.url : undefined;
  });
  if (gateway === undefined) {
    return (
      <ChooseGateway
        requested={requestedGateway()}
        own={ownGateway()}
        onChoose={(url, confirmed) => {
          if (confirmed) trust(url);
          // The console's own gateway: the link's target is dropped from the address, so a reload does not ask again.
          else history.replaceState(null, '', `${location.pathname}${location.hash}`);
          setGateway(url);
        }}
      />
    );
  }
  return <Connected key={gateway} gateway={gateway} />;
}

function Connected({ gateway }: { gateway: string }): ReactNode {
  const [token, setToken] = useState(() => storedToken(gateway));
  const [client] = useState(() => ({ current: connect(gateway, token) }));
  const [, setGeneration] = useState(0);
  const scope = cacheScope(gateway, token);
  // The client lives as long as the page (StrictMode's trial unmount must not close it).
  const onToken = (next: string | undefined): void => {
    const left = client.current;
    saveToken(gateway, next);
    setToken(next);
    client.current = connect(gateway, next);
    void (cacheScope(gateway, next) === scope ? left.close() : forget(scope, left));
    setGeneration((n) => n + 1);
  };
  return (
    <CacheScope.Provider value={scope}>
      <EventflowProvider client={client.current}>
        <App key={scope} signedIn={token !== undefined} onToken={onToken} gateway={gateway === ownGateway() ? undefined : gateway} />
      </EventflowProvider>
    </CacheScope.Provider>
  );
}

const container = document.getElementById('root');
if (!container) throw new Error('index.html has no #root');
createRoot(container).render(
  <StrictMode>
    <Root />
  </StrictMode>,
);
