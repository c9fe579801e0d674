/** Entry: one browser client for the gateway that served the page, made anew when the token changes. */
import { StrictMode, useState, type ReactNode } from 'react';
import { createRoot } from 'react-dom/client';
import { EventflowProvider } from '@eventflow/browser/react';
import { App } from './App.js';
import { connect, gatewayUrl, saveToken, storedToken } from './connection.js';
import './styles.css';

function Root(): ReactNode {
  const [token, setToken] = useState(storedToken);
  const [client] = useState(() => ({ current: connect(gatewayUrl(), token) }));
  const [, setGeneration] = useState(0);
  // The client lives as long as the page (StrictMode's trial unmount must not close it).
  const onToken = (next: string | undefined): void => {
    saveToken(next);
    setToken(next);
    void client.current.close();
    client.current = connect(gatewayUrl(), next);
    setGeneration((n) => n + 1);
  };
  return (
    <EventflowProvider client={client.current}>
      <App signedIn={token !== undefined} onToken={onToken} />
    </EventflowProvider>
  );
}

const container = document.getElementById('root');
if (!container) throw new Error('index.html has no #root');
createRoot(container).render(
  <StrictMode>
    <Root />
  </StrictMode>,
);
