import { WebSocket } from 'isows';
import { EventflowError } from './errors.js';
import { ListenerSlot, type Connector, type Transport, type TransportListener } from './transport.js';

class WebSocketTransport implements Transport {
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
    if (this.#socket.readyState === WebSocket.OPEN) this.#socket.send(frame);
  }

  close(code = 1000, reason = ''): void {
    if (this.#socket.readyState === WebSocket.CLOSED) return;
    this.#socket.close(code, reason);
  }

  listen(listener: TransportListener): void {
    this.#slot.attach(listener);
  }

  get bufferedAmount(): number {
    return this.#socket.bufferedAmount;
  }
}

/** A connector for `ws://` / `wss://` URLs on isows: the platform WebSocket in browsers, `ws` in Node. */
export function webSocketConnector(url: string | URL): Connector {
  return (signal) =>
    new Promise<Transport>((resolve, reject) => {
      let socket: WebSocket;
      try {
        socket = new WebSocket(url);
      } catch (cause) {
        reject(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `cannot open WebSocket to ${String(url)}: ${String(cause)}`, { cause }));
        return;
      }
      const fail = (message: string): void => {
        signal.removeEventListener('abort', onAbort);
        socket.onopen = socket.onclose = null;
        // `ws` reports closing a connecting socket as an 'error' event, which must have a listener.
        socket.onerror = () => undefined;
        if (socket.readyState !== WebSocket.CLOSED) socket.close();
        reject(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', message));
      };
      const onAbort = (): void => fail(`connecting to ${String(url)} was aborted`);
      signal.addEventListener('abort', onAbort, { once: true });
      socket.onerror = () => fail(`cannot connect to ${String(url)}; is the gateway running?`);
      socket.onclose = (event) => fail(`connection to ${String(url)} closed while opening (code ${event.code})`);
      socket.onopen = () => {
        signal.removeEventListener('abort', onAbort);
        socket.onopen = null;
        // An error after open is always followed by close, which the transport reports; a
        // listener must stay attached because `ws` in Node throws on unhandled 'error' events.
        socket.onerror = () => undefined;
        const transport = new WebSocketTransport(socket);
        resolve(transport);
      };
    });
}
