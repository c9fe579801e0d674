/**
 * Graceful shutdown on process signals: every client registered here is closed (which lets its
 * in-flight consume handlers finish and settle) before the process exits. One listener per signal
 * is shared by all clients, so the first client to finish closing cannot exit the process while
 * another is still draining.
 */

/** The part of `process` used here; replaceable in tests. */
export interface SignalHost {
  on(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
  off(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
  exit(code: number): void;
}

export interface Closable {
  close(): Promise<void>;
}

export const defaultSignals: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

interface HostState {
  /** Each client with the signals it asked for. */
  readonly clients: Map<Closable, readonly NodeJS.Signals[]>;
  /** Installed listeners by signal. */
  readonly listeners: Map<NodeJS.Signals, (signal: NodeJS.Signals) => void>;
  shuttingDown: boolean;
}

const hosts = new WeakMap<SignalHost, HostState>();

/**
 * Closes `client` and then exits 0 when one of `signals` arrives (a failed close exits 1). A second
 * signal during the shutdown exits 1 at once. Returns a function that unregisters the client,
 * restoring the default signal behaviour once no client is registered.
 */
export function closeOnSignals(client: Closable, signals: readonly NodeJS.Signals[] = defaultSignals, host: SignalHost = process): () => void {
  let state = hosts.get(host);
  if (!state) hosts.set(host, (state = { clients: new Map(), listeners: new Map(), shuttingDown: false }));
  const current = state;
  current.clients.set(client, [...new Set(signals)]);
  sync(host, current);
  return () => {
    if (!current.clients.delete(client)) return;
    // While shutting down, the listeners stay so that a second signal still forces the exit.
    if (!current.shuttingDown) sync(host, current);
  };
}

/** Installs a listener for every signal some client asked for and removes the others. */
function sync(host: SignalHost, state: HostState): void {
  const wanted = new Set<NodeJS.Signals>();
  for (const signals of state.clients.values()) for (const signal of signals) wanted.add(signal);
  for (const [signal, listener] of state.listeners) {
    if (wanted.has(signal)) continue;
    host.off(signal, listener);
    state.listeners.delete(signal);
  }
  for (const signal of wanted) {
    if (state.listeners.has(signal)) continue;
    const listener = (): void => shutdown(host, state);
    host.on(signal, listener);
    state.listeners.set(signal, listener);
  }
}

function shutdown(host: SignalHost, state: HostState): void {
  if (state.shuttingDown) {
    host.exit(1);
    return;
  }
  state.shuttingDown = true;
  const clients = [...state.clients.keys()];
  void Promise.allSettled(clients.map((client) => client.close())).then((results) => {
    state.shuttingDown = false;
    state.clients.clear();
    sync(host, state);
    host.exit(results.every((result) => result.status === 'fulfilled') ? 0 : 1);
  });
}
