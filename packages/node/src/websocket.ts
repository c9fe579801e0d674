/**
 * The Node client's WebSocket connector: `ws` (what core's webSocketConnector gets from isows in
 * Node), with the same opening and errors, plus one thing core cannot do portably: the TCP socket
 * is corked while a turn of the event loop sends frames, so that a burst of pipelined requests
 * leaves in one write instead of one system call per frame (the largest single cost of a
 * pipelined publisher before). The gateway corks its answers the same way. (Requests over the
 * gateway's frame limit are answered by core's request manager, before they reach a transport.)
 */
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import WebSocket from 'ws';
import { assertUrl, EventflowError, WebSocketTransport, type Connector, type Transport } from '@eventflow/core';

class CorkedWebSocketTransport extends WebSocketTransport {
  readonly #stream: Duplex;
  #corked = false;

  constructor(socket: WebSocket, stream: Duplex) {
    // Core types its socket as the platform WebSocket; in Node that is `ws` (isows), this very class.
    super(socket as unknown as ConstructorParameters<typeof WebSocketTransport>[0]);
    this.#stream = stream;
  }

  override send(frame: string): void {
    if (!this.#corked) {
      this.#corked = true;
      this.#stream.cork();
      process.nextTick(() => {
        this.#corked = false;
        this.#stream.uncork();
      });
    }
    super.send(frame);
  }
}

/** What `ws` passes to createConnection (http.request's options, with its own additions). */
type ConnectOptions = net.NetConnectOpts & tls.ConnectionOptions & { socketPath?: string; host?: string };

/** A connector for `ws://` / `wss://` URLs; errors as core's webSocketConnector reports them. */
export const nodeWebSocketConnector = (url: string | URL): Connector => {
  assertUrl(url);
  return (signal) =>
    new Promise<Transport>((resolve, reject) => {
      let stream: Duplex | undefined;
      // As `ws` connects by default, keeping the TCP (or TLS) socket for corking.
      const createConnection = (options: ConnectOptions): Duplex => {
        if (String(url).startsWith('wss:')) {
          const servername = options.servername ?? (net.isIP(options.host ?? '') ? '' : options.host);
          stream = tls.connect({ ...options, path: undefined, servername });
        } else {
          stream = net.connect({ ...options, path: options.socketPath } as net.NetConnectOpts);
        }
        return stream;
      };
      let socket: WebSocket;
      try {
        socket = new WebSocket(url, { createConnection } as WebSocket.ClientOptions);
      } catch (cause) {
        reject(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `cannot open WebSocket to ${url}: ${String(cause)}`, { cause }));
        return;
      }
      const onAbort = (): void => settle(`connecting to ${url} was aborted`);
      // The cause (ECONNREFUSED, ENOTFOUND, a TLS error) says what to fix.
      const onError = (error: Error & { code?: string }): void => settle(`cannot connect to ${url} (${error.code ?? error.message}); is the gateway running?`);
      const onClose = (code: number): void => settle(`connection to ${url} closed while opening (code ${code})`);
      // An HTTP answer instead of the upgrade: the gateway's refusal says why in its body.
      const onRefused = (_request: unknown, response: IncomingMessage): void => {
        let body = '';
        const done = (): void => settle(refusal(url, response.statusCode ?? 0, body));
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          body += chunk;
          if (body.length >= MAX_REFUSAL_BODY) response.destroy();
        });
        response.once('end', done).once('close', done).once('error', done);
      };
      const onOpen = (): void => settle();
      /** Opened (no message) or failed: the handlers of the opening are detached either way. */
      function settle(message?: string): void {
        signal.removeEventListener('abort', onAbort);
        socket.off('open', onOpen).off('close', onClose).off('error', onError).off('unexpected-response', onRefused);
        // An error after open is always followed by close, which the transport reports; `ws` throws on an unhandled one.
        socket.on('error', () => undefined);
        if (!message && stream) return resolve(new CorkedWebSocketTransport(socket, stream));
        if (socket.readyState !== WebSocket.CLOSED) socket.close();
        reject(new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', message ?? `cannot connect to ${url}`));
      }
      signal.addEventListener('abort', onAbort, { once: true });
      socket.on('error', onError).on('close', onClose).on('open', onOpen).on('unexpected-response', onRefused);
    });
};

/** The most of a refusal's body read: the gateway's are a line of JSON or text. */
const MAX_REFUSAL_BODY = 4096;

/**
 * A refused upgrade, in the gateway's words: HTTP 503 with its JSON `{ code, message }` when it holds
 * EVENTFLOW_MAX_CONNECTIONS connections, 403 (origin), 421 (host), 500. Before, each read "Unexpected
 * server response: 503; is the gateway running?", of a gateway that was running and said why.
 */
function refusal(url: string | URL, status: number, body: string): string {
  let said = body.trim().split('\n')[0]?.slice(0, 300) ?? '';
  try {
    const json = JSON.parse(body) as { code?: unknown; message?: unknown };
    if (typeof json.code === 'string' && typeof json.message === 'string') said = `${json.code}: ${json.message}`;
  } catch {
    // Text (or nothing): its first line.
  }
  return status === 503 || status === 403 || status === 421 || status === 500
    ? `the gateway at ${url} refused the connection with HTTP ${status}${said ? `: ${said}` : ''}`
    : `${url} answered HTTP ${status} instead of opening a WebSocket${said ? ` (${said})` : ''}; is it an eventflow gateway's URL?`;
}
