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
  /** A monotonic clock in ms (default: performance.now()). */
  now?(): number;
}

/**
 * A signal this soon after the one that started the shutdown is that signal delivered twice, not a
 * second one: Ctrl-C reaches every process of the terminal's foreground group, and a runner (npm,
 * a process manager) forwards the one it got to its child, so a worker under `npm run` that `exec`s
 * gets it twice within microseconds.
 */
export const REPEAT_MS = 1_000;

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
  /** When the shutdown began (host.now). */
  since: number;
}

const hosts = new WeakMap<SignalHost, HostState>();

/**
 * Closes `client` and then exits 0 when one of `signals` arrives (a failed close exits 1). A second
 * signal during the shutdown exits 1 at once (one within REPEAT_MS of the first is the same). Returns a function that unregisters the client,
 * restoring the default signal behaviour once no client is registered.
 */
export function closeOnSignals(client: Closable, signals: readonly NodeJS.Signals[] = defaultSignals, host: SignalHost = process): () => void {
  let state = hosts.get(host);
  if (!state) hosts.set(host, (state = { clients: new Map(), listeners: new Map(), shuttingDown: false, since: 0 }));
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
  const now = host.now?.() ?? performance.now();
  if (state.shuttingDown) {
    if (now - state.since >= REPEAT_MS) host.exit(1);
    return;
  }
  state.shuttingDown = true;
  state.since = now;
  const clients = [...state.clients.keys()];
  void Promise.allSettled(clients.map((client) => client.close())).then((results) => {
    state.shuttingDown = false;
    state.clients.clear();
    sync(host, state);
    host.exit(results.every((result) => result.status === 'fulfilled') ? 0 : 1);
  });
}
