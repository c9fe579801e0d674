/**
 * One logical connection to a gateway across many transports: opens, does the hello/welcome
 * handshake, keeps it alive with a heartbeat, reconnects with exponential backoff and jitter, and
 * reports its state: 'connecting' until the first handshake or failure, 'open', 'offline' while
 * an outage (or a first connect that failed) lasts, 'closed' after close().
 */
import { DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_HEARTBEAT_INTERVAL } from './defaults.js';
import { backoffDelay, type BackoffOptions } from './backoff.js';
import { EventflowError, isEventflowError } from './errors.js';
import type { ServerFrame, WelcomeFrame } from './protocol.js';
import { PROTOCOL_VERSION } from './protocol-version.js';
import type { Connector, Transport } from './transport.js';

export type ConnectionState = 'connecting' | 'open' | 'offline' | 'closed';

export interface ConnectionHandlers {
  /** A new transport completed the handshake; `recovered`: it ends an outage that was reported. */
  open(welcome: WelcomeFrame, recovered: boolean): void;
  frame(frame: ServerFrame): void;
  /** The open transport went away; a new one is being sought. */
  lost(): void;
  error(error: unknown): void;
  /**
   * Calls cannot succeed until a connection opens: the gateway refused the handshake (its error,
   * e.g. E_EVENTFLOW_UNAUTHORIZED), or the client has never reached the gateway and an attempt
   * failed (E_EVENTFLOW_OFFLINE naming the cause). The connection keeps retrying with backoff.
   * Undefined: a handshake succeeded, calls go through again (told before the state listeners,
   * which may make calls at once).
   */
  blocked(error: EventflowError | undefined): void;
  /** Sends a ping that fails with E_EVENTFLOW_REQUEST_TIMEOUT after `timeout` ms without an answer. */
  ping(timeout: number): Promise<unknown>;
}

/** The ClientOptions the connection reads, with the same defaults. */
export interface ConnectionOptions {
  handshakeTimeout?: number | undefined;
  heartbeatInterval?: number | undefined;
  reconnect?: BackoffOptions | undefined;
  clientName?: string | undefined;
  token?: string | (() => string | Promise<string>) | undefined;
}

export interface Connection {
  readonly state: ConnectionState;
  onStateChange(listener: (state: ConnectionState) => void): () => void;
  /** Sends on the open transport; false when there is none (the caller queues). */
  send(frame: string): boolean;
  close(): void;
}

/** Calls each listener with `value`; what one throws goes to `onError` and does not stop the others. */
export const notify = <T>(listeners: Iterable<(value: T) => void>, value: T, onError: (error: unknown) => void): void => {
  for (const listener of [...listeners]) {
    try {
      listener(value);
    } catch (error) {
      onError(error);
    }
  }
};

export function createConnection(
  connector: Connector,
  { handshakeTimeout = DEFAULT_HANDSHAKE_TIMEOUT, heartbeatInterval = DEFAULT_HEARTBEAT_INTERVAL, reconnect, clientName, token }: ConnectionOptions,
  handlers: ConnectionHandlers,
): Connection {
  const stateListeners = new Set<(state: ConnectionState) => void>();
  const stop = new AbortController();
  const { signal } = stop;
  let state: ConnectionState = 'connecting';
  let transport: Transport | undefined;
  let attempt = 0;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  let lastFrameAt = 0;
  /**
   * The code (or text) of the failure reported since the connection was last open. Attempts that
   * fail the same way are not reported again: an outage is one report when it starts (then the
   * state stays 'offline') and its end is the change to 'open', however many attempts it takes.
   */
  let outage: string | undefined;
  /**
   * A WebSocket has opened once: the URL is right and a server took it. From then on a failed attempt is an outage that
   * calls wait out (up to their timeout), also one before any welcome: a gateway whose store is down closes the
   * handshake (1011), one stopping closes it (1001), and a client started at that moment failed its calls at once.
   */
  let reached = false;
  /**
   * An attempt failed, or the connection was lost: reported once per outage. A refusal, or any
   * failure before the gateway was ever reached, also makes calls fail at once (handlers.blocked).
   */
  const failed = (error: unknown, refused?: boolean): void => {
    const kind = isEventflowError(error) ? error.code : String(error);
    if (kind !== outage) handlers.error(error);
    outage = kind;
    if (!refused && reached) return;
    setState('offline');
    handlers.blocked(refused ? (error as EventflowError) : new EventflowError('E_EVENTFLOW_OFFLINE', `not connected to the gateway (the client keeps trying): ${(error as Error).message ?? error}`, { cause: error }));
  };

  const setState = (next: ConnectionState): void => {
    if (state !== next) notify(stateListeners, (state = next), handlers.error);
  };

  const retry = (): void => {
    if (signal.aborted) return;
    setState('offline');
    retryTimer = setTimeout(connect, backoffDelay(attempt++, reconnect));
  };

  const connect = async (): Promise<void> => {
    let opened: Transport;
    let credentials: string | undefined;
    try {
      // A token callback is asked again before every handshake, so a reconnect sends a fresh token.
      credentials = typeof token === 'function' ? await token() : token;
      opened = await connector(signal);
    } catch (error) {
      if (!signal.aborted) failed(error);
      return retry();
    }
    if (signal.aborted) return opened.close(1000, 'client closed');
    transport = opened;
    reached = true;
    let welcomed = false;
    /** This handshake was refused or timed out: reported already, its close is no news. */
    let ended = false;
    const handshake = setTimeout(() => {
      ended = true;
      failed(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `no welcome from the gateway within ${handshakeTimeout} ms`));
      drop(4000, 'handshake timeout');
    }, handshakeTimeout);
    const onClose = (code: number, reason: string): void => {
      clearTimeout(handshake);
      if (transport !== opened) return;
      clearInterval(heartbeat);
      transport = undefined;
      if (signal.aborted) return;
      if (!ended) failed(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `connection to the gateway ${welcomed ? 'lost' : 'closed during the handshake'} (close code ${code}${reason ? `: ${reason}` : ''}); reconnecting with backoff`, { details: { code, reason } }));
      if (welcomed) handlers.lost();
      retry();
    };
    /**
     * Gives up on this transport now: a WebSocket's close waits for the peer's answer, which over a
     * silent link (a partition) comes only when the socket's own timeout (30 s in `ws`) ends it.
     */
    const drop = (code: number, reason: string): void => {
      opened.close(code, reason);
      onClose(code, reason);
    };

    opened.listen({
      message: (data) => {
        // From a transport given up on (its close still under way): its deliveries and answers belong to a connection that is gone.
        if (transport !== opened) return;
        // The gateway validates what it sends against protocol.ts, so only the frame's shape is
        // checked here: a schema check per event would put zod into every browser bundle. A frame
        // of a type this client does not know (a newer gateway's) is passed on and ignored, as
        // unknown fields are.
        let frame: ServerFrame | undefined;
        try {
          // Only objects have a `type` (null and other values do not).
          const json = JSON.parse(data) as { type?: unknown } | null;
          if (typeof json?.type === 'string') frame = json as ServerFrame;
        } catch {
          // not JSON: reported below
        }
        if (!frame) return handlers.error(new EventflowError('E_EVENTFLOW_INVALID_FRAME', 'ignored an unreadable frame from the gateway'));
        lastFrameAt = Date.now();
        if (welcomed) handlers.frame(frame);
        else if (frame.type === 'welcome') {
          welcomed = true;
          clearTimeout(handshake);
          attempt = 0;
          const recovered = outage !== undefined;
          outage = undefined;
          handlers.blocked(undefined);
          // An idle connection is pinged; a missed answer drops the transport, which reconnects.
          clearInterval(heartbeat);
          if (heartbeatInterval > 0) {
            heartbeat = setInterval(() => {
              if (state !== 'open' || Date.now() - lastFrameAt < heartbeatInterval) return;
              handlers.ping(heartbeatInterval).catch((error: unknown) => isEventflowError(error, 'E_EVENTFLOW_REQUEST_TIMEOUT') && transport === opened && drop(4001, 'heartbeat timeout'));
            }, heartbeatInterval);
            // A heartbeat alone must not keep a Node process alive.
            (heartbeat as { unref?: () => void }).unref?.();
          }
          setState('open');
          handlers.open(frame, recovered);
        } else if (frame.type === 'error') {
          // Refused (a bad token, another protocol version): calls fail with the cause at once, not after their timeout.
          failed(new EventflowError(frame.code === 'E_EVENTFLOW_UNAUTHORIZED' ? frame.code : 'E_EVENTFLOW_CONNECTION_FAILED', `handshake refused by the gateway: ${frame.code}: ${frame.message}`), (ended = true));
        }
      },
      close: onClose,
    });
    opened.send(JSON.stringify({ type: 'hello', protocol: PROTOCOL_VERSION, client: clientName, token: credentials }));
  };

  void connect();
  return {
    get state() {
      return state;
    },
    onStateChange(listener) {
      stateListeners.add(listener);
      return () => stateListeners.delete(listener);
    },
    send(frame) {
      if (state !== 'open' || !transport) return false;
      transport.send(frame);
      return true;
    },
    close() {
      if (state === 'closed') return;
      stop.abort();
      clearTimeout(retryTimer);
      clearInterval(heartbeat);
      setState('closed');
      transport?.close(1000, 'client closed');
      transport = undefined;
    },
  };
}

