/**
 * One logical connection to a gateway across many transports: opens, does the hello/welcome
 * handshake, reconnects with exponential backoff and jitter, and reports its state.
 */
import { backoffDelay, type BackoffOptions } from './backoff.js';
import { EventflowError } from './errors.js';
import { PROTOCOL_VERSION, type ServerFrame, type WelcomeFrame } from './protocol.js';
import type { Connector, Transport } from './transport.js';

export type ConnectionState = 'connecting' | 'open' | 'closed';

export interface ConnectionHandlers {
  /** A new transport completed the handshake. */
  open(welcome: WelcomeFrame): void;
  frame(frame: ServerFrame): void;
  /** The open transport went away; a new one is being sought. */
  lost(): void;
  error(error: unknown): void;
}

export interface ConnectionOptions {
  handshakeTimeout: number;
  reconnect: BackoffOptions;
  clientName?: string | undefined;
}

export class Connection {
  readonly #connector: Connector;
  readonly #options: ConnectionOptions;
  readonly #handlers: ConnectionHandlers;
  readonly #stateListeners = new Set<(state: ConnectionState) => void>();
  readonly #closing = new AbortController();
  #state: ConnectionState = 'connecting';
  #transport: Transport | undefined;
  #welcome: WelcomeFrame | undefined;
  #attempt = 0;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(connector: Connector, options: ConnectionOptions, handlers: ConnectionHandlers) {
    this.#connector = connector;
    this.#options = options;
    this.#handlers = handlers;
    void this.#connect();
  }

  get state(): ConnectionState {
    return this.#state;
  }

  get welcome(): WelcomeFrame | undefined {
    return this.#welcome;
  }

  onStateChange(listener: (state: ConnectionState) => void): () => void {
    this.#stateListeners.add(listener);
    return () => this.#stateListeners.delete(listener);
  }

  /** Sends on the open transport; false when there is none (the caller queues). */
  send(frame: string): boolean {
    if (this.#state !== 'open' || !this.#transport) return false;
    this.#transport.send(frame);
    return true;
  }

  /** Drops the current transport (e.g. a heartbeat failed) and reconnects. */
  reconnect(): void {
    this.#transport?.close(4001, 'heartbeat timeout');
  }

  close(): void {
    if (this.#state === 'closed') return;
    this.#closing.abort();
    clearTimeout(this.#retryTimer);
    this.#setState('closed');
    this.#transport?.close(1000, 'client closed');
    this.#transport = undefined;
  }

  #setState(state: ConnectionState): void {
    if (this.#state === state) return;
    this.#state = state;
    for (const listener of this.#stateListeners) {
      try {
        listener(state);
      } catch (error) {
        this.#handlers.error(error);
      }
    }
  }

  async #connect(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    let transport: Transport;
    try {
      transport = await this.#connector(this.#closing.signal);
    } catch (error) {
      if (!this.#closing.signal.aborted) this.#handlers.error(error);
      this.#retry();
      return;
    }
    if (this.#closing.signal.aborted) {
      transport.close(1000, 'client closed');
      return;
    }
    this.#transport = transport;
    let opened = false;
    const handshake = setTimeout(() => {
      this.#handlers.error(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `no welcome from the gateway within ${this.#options.handshakeTimeout} ms`));
      transport.close(4000, 'handshake timeout');
    }, this.#options.handshakeTimeout);

    transport.listen({
      message: (data) => {
        const frame = parseServerFrame(data);
        if (!frame) {
          this.#handlers.error(new EventflowError('E_EVENTFLOW_INVALID_FRAME', 'the gateway sent a frame this client cannot read; ignored'));
          return;
        }
        if (!opened) {
          if (frame.type === 'welcome') {
            opened = true;
            clearTimeout(handshake);
            this.#attempt = 0;
            this.#welcome = frame;
            this.#setState('open');
            this.#handlers.open(frame);
          } else if (frame.type === 'error') {
            this.#handlers.error(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `the gateway refused the handshake: ${frame.code}: ${frame.message}`));
          }
          return;
        }
        this.#handlers.frame(frame);
      },
      close: () => {
        clearTimeout(handshake);
        if (this.#transport !== transport) return;
        this.#transport = undefined;
        if (this.#closing.signal.aborted) return;
        if (opened) this.#handlers.lost();
        this.#retry();
      },
    });
    transport.send(JSON.stringify({ type: 'hello', protocol: PROTOCOL_VERSION, client: this.#options.clientName }));
  }

  #retry(): void {
    if (this.#closing.signal.aborted) return;
    this.#setState('connecting');
    const delay = backoffDelay(this.#attempt++, this.#options.reconnect);
    this.#retryTimer = setTimeout(() => void this.#connect(), delay);
  }
}

const frameTypes = new Set<unknown>(['welcome', 'result', 'error', 'event', 'delivery', 'waited', 'deleted']);

/**
 * The gateway validates what it sends against protocol.ts, so the client only checks the frame's
 * shape: a full schema check per event would put zod into every browser bundle.
 */
function parseServerFrame(data: string): ServerFrame | undefined {
  try {
    const json: unknown = JSON.parse(data);
    return json !== null && typeof json === 'object' && frameTypes.has((json as { type?: unknown }).type) ? (json as ServerFrame) : undefined;
  } catch {
    return undefined;
  }
}
