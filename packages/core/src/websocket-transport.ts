import { WebSocket } from './native-websocket.js';
import { assertUrl } from './arguments.js';
import { EventflowError } from './errors.js';
import { ListenerSlot, type Connector, type Transport, type TransportListener } from './transport.js';

/** A Transport over a connected WebSocket (browser's, or `ws` in Node); @eventflow/node extends it to cork its socket. */
export class WebSocketTransport implements Transport {
  readonly #socket: WebSocket;
  readonly #slot = new ListenerSlot();

  constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.onmessage = (message) => {
      if (typeof message.data === 'string') this.#slot.message(message.data);
      // Binary frames are not part of the protocol; the gateway never sends them.
    };
    socket.onclose = (event) => this.#slot.close(event.code, event.reason);
  }

  send(frame: string): void {
    if (this.#socket.readyState === 1 /* OPEN */) this.#socket.send(frame);
  }

  close(code = 1000, reason = ''): void {
    if (this.#socket.readyState === 3 /* CLOSED */) return;
    this.#socket.close(code, reason);
  }

  listen(listener: TransportListener): void {
    this.#slot.attach(listener);
  }
}

/** A connector for `ws://` / `wss://` URLs on isows: the platform WebSocket in browsers, `ws` in Node. */
export const webSocketConnector = (url: string | URL): Connector => {
  assertUrl(url);
  return (signal) =>
    new Promise<Transport>((resolve, reject) => {
      let socket: WebSocket;
      try {
        socket = new WebSocket(url);
      } catch (cause) {
        reject(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `cannot open WebSocket to ${url}: ${String(cause)}`, { cause }));
        return;
      }
      /** Opened (no message) or failed: the handlers of the opening are detached either way. */
      const settle = (message?: string): void => {
        signal.removeEventListener('abort', onAbort);
        socket.onopen = socket.onclose = null;
        // `ws` reports closing a connecting socket as an 'error' event, and in Node throws on an
        // unhandled one: a listener stays attached. An error after open is always followed by
        // close, which the transport reports.
        socket.onerror = () => undefined;
        if (!message) return resolve(new WebSocketTransport(socket));
        if (socket.readyState !== 3 /* CLOSED */) socket.close();
        reject(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', message));
      };
      const onAbort = (): void => settle(`connecting to ${url} was aborted`);
      signal.addEventListener('abort', onAbort, { once: true });
      // `ws` (Node) carries the cause (ECONNREFUSED, ENOTFOUND); a browser's error event says nothing.
      socket.onerror = (event) => {
        const code = (event as { error?: { code?: string } }).error?.code;
        settle(`cannot connect to ${url}${code ? ` (${code})` : ''}; is the gateway running?`);
      };
      socket.onclose = (event) => settle(`connection to ${url} closed while opening (code ${event.code})`);
      socket.onopen = () => settle();
    });
};
