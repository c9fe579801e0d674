/**
 * The console's frame: the header (navigation from routes.ts `sections`, the connection, sign in)
 * and the view of the current route. Domains are read once here: every view uses them for what
 * the token may do (publish, schedule, subscribe).
 */
import { useEffect, useState, type ReactNode } from 'react';
import { gatewayStats, isEventflowError, listDomains } from '@eventflow/core';
import { useConnectionState, useEventflowClient } from '@eventflow/browser/react';
import { useQuery } from './query.js';
import { href, parseRoute, sections, useHash, type Route } from './routes.js';
import { Domains } from './views/Domains.js';
import { Gateway } from './views/Gateway.js';
import { Latency } from './views/Latency.js';
import { Live } from './views/Live.js';
import { Login } from './views/Login.js';
import { Process } from './views/Process.js';
import { Processes } from './views/Processes.js';
import { Publish } from './views/Publish.js';
import { Scheduled } from './views/Scheduled.js';
import { Work } from './views/Work.js';

/** The section a route belongs to, for aria-current. */
const sectionOf = (route: Route): Route['view'] => (route.view === 'processes' || route.view === 'process' ? 'domains' : route.view);

/** `gateway`: the gateway connected to when it is not the one that served the console (shown in the header). */
export function App({ signedIn, onToken, gateway }: { signedIn: boolean; onToken: (token: string | undefined) => void; gateway?: string | undefined }): ReactNode {
  const client = useEventflowClient();
  const connection = useConnectionState();
  const route = parseRoute(useHash());
  // Every view uses the domains for what the token may do; the Domains view shows them, other views read theirs first.
  const domains = useQuery('domains', (c) => listDomains(c), { refreshMs: 10_000, delayMs: route.view === 'domains' ? 0 : 300 });
  const [login, setLogin] = useState<string | undefined>(undefined);
  const [showLogin, setShowLogin] = useState(false);

  // Without a token the gateway answers what needs rights with UNAUTHORIZED: ask for one.
  useEffect(() => {
    if (connection !== 'open') return undefined;
    // After the view's own reads: a gateway without authentication answers this with figures.
    const timer = setTimeout(() => {
      gatewayStats(client).then(
        () => setLogin(undefined),
        (error: unknown) => {
          if (isEventflowError(error, 'E_EVENTFLOW_UNAUTHORIZED')) setLogin(signedIn ? 'The gateway did not accept the token; paste a valid one.' : 'This gateway needs a token.');
        },
      );
    }, 300);
    return () => clearTimeout(timer);
  }, [client, connection, signedIn]);
  useEffect(() => {
    const unauthorized = (event: unknown): boolean => isEventflowError(event, 'E_EVENTFLOW_UNAUTHORIZED');
    if (unauthorized(domains.error)) setLogin('The gateway did not accept the token; paste a valid one.');
  }, [domains.error]);

  const actions = domains.data?.actions ?? [];
  const list = domains.data?.domains;
  const visible = sections.filter((section) => !section.needs || actions.includes(section.needs) || domains.data === undefined);
  const current = sectionOf(route);

  let view: ReactNode;
  if (login !== undefined || showLogin) view = (
      <Login
        reason={login}
        signedIn={signedIn}
        onToken={(token) => {
          // A new token closes the form that the header's button opened.
          setShowLogin(false);
          onToken(token);
        }}
      />
    );
  else {
    switch (route.view) {
      case 'domains':
        view = <Domains domains={{ ...domains, data: list }} />;
        break;
      case 'processes':
        view = <Processes domain={route.domain} />;
        break;
      case 'process':
        view = <Process key={`${route.domain}\u001f${route.pid}`} domain={route.domain} pid={route.pid} />;
        break;
      case 'live':
        view = <Live domain={route.domain} domains={list} />;
        break;
      case 'scheduled':
        view = <Scheduled domains={list} />;
        break;
      case 'work':
        view = <Work domains={list} />;
        break;
      case 'gateway':
        view = <Gateway />;
        break;
      case 'latency':
        view = <Latency key={`${route.domain}\u001f${route.name}\u001f${route.windowMs}`} domains={list} domain={route.domain} name={route.name} windowMs={route.windowMs} />;
        break;
      case 'publish':
        view = actions.includes('publish') || domains.data === undefined ? <Publish domains={list} actions={actions} initialDomain={route.domain} initialPid={route.pid} /> : <p>This token may not publish.</p>;
        break;
    }
  }

  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <a className="brand" href={href({ view: 'domains' })}>
          eventflow console
        </a>
        <nav aria-label="Console sections">
          <ul>
            {visible.map((section) => (
              <li key={section.view}>
                <a href={`#/${section.view === 'domains' ? '' : section.view}`} aria-current={section.view === current ? 'page' : undefined} data-testid={`nav-${section.view}`}>
                  {section.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span className={`connection connection-${connection}`} data-testid="connection-state" data-state={connection} role="status">
          {connection}
          {gateway && (
            <span className="mono" data-testid="gateway-url">
              {' '}
              {gateway}
            </span>
          )}
        </span>
        <button type="button" className="link" onClick={() => setShowLogin((shown) => !shown)} aria-expanded={showLogin}>
          {signedIn ? 'Token' : 'Sign in'}
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {view}
      </main>
    </>
  );
}
