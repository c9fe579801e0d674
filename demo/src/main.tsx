/** Entry: one browser client for the page, the React tree, and the service worker for offline loads. */
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { createBrowserClient } from '@eventflow/browser';
import { createOutbox } from '@eventflow/browser/outbox';
import { EventflowProvider } from '@eventflow/browser/react';
import { App } from './App.js';
import { readSettings } from './settings.js';
import './styles.css';

const settings = readSettings(window.location);

const client = createBrowserClient(settings.gatewayUrl, {
  clientName: 'demo-dashboard',
  // One cache per gateway: processes of different gateways never mix.
  cache: { name: `eventflow-demo ${settings.gatewayUrl}` },
  // Come back within a few seconds of the gateway returning, not after the default 10 s ceiling.
  reconnect: { maxDelay: 3_000 },
  // Actions (notes, cancellations) are queued in IndexedDB and sent when the gateway is reachable.
  outbox: createOutbox(),
});

const container = document.getElementById('root');
if (!container) throw new Error('index.html has no #root');
createRoot(container).render(
  <StrictMode>
    <EventflowProvider client={client}>
      <App gatewayUrl={settings.gatewayUrl} initialDomain={settings.domain} initialPid={settings.pid} />
    </EventflowProvider>
  </StrictMode>,
);

// The app shell comes from the service worker's cache when the gateway is down (production builds only).
if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  navigator.serviceWorker.register(`${import.meta.env.BASE_URL}sw.js`).catch((error: unknown) => {
    console.warn('[demo] service worker not registered; the dashboard will not open offline:', error);
  });
}
