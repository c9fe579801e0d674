/**
 * The Node client's WebSocket connector: `ws` (what core's webSocketConnector gets from isows in
 * Node), with the same opening and errors, plus one thing core cannot do portably: the TCP socket
 * is corked while a turn of the event loop sends frames, so that a burst of pipelined requests
 * leaves in one write instead of one system call per frame (the largest single cost of a
 * pipelined publisher before). The gateway corks its answers the same way.
 *
 * It also keeps requests within the gateway's frame limit (`welcome.limits.maxFrameBytes`): the
 * gateway closes a connection whose frame is over it (1009), and the client sent the request again
 * on each new connection, so that the connection went up and down until the call's timeout, every
 * subscription and consumer of the client with it. Such a request is answered here, as the gateway
 * would answer it if it could read it: E_EVENTFLOW_INVALID_INPUT, and the frame is not sent. (The
 * browser bundles have no room for this check: there, keep events under the limit.)
 */
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import WebSocket from 'ws';
import { assertUrl, EventflowError, WebSocketTransport, type Connector, type Transport, type TransportListener } from '@eventflow/core';

/** The request id and operation at the start of a request frame, as the client's request manager writes it. */
const REQUEST_START = /^\{"type":"request","id":(\d+),"op":"([A-Za-z]+)"/;

class CorkedWebSocketTransport extends WebSocketTransport {
  readonly #stream: Duplex;
  #corked = false;
  #listener: TransportListener | undefined;
  /** welcome.limits.maxFrameBytes, once the welcome came. */
  #maxFrameBytes = Number.POSITIVE_INFINITY;

  constructor(socket: WebSocket, stream: Duplex) {
    // Core types its socket as the platform WebSocket; in Node that is `ws` (isows), this very class.
    super(socket as unknown as ConstructorParameters<typeof WebSocketTransport>[0]);
    this.#stream = stream;
  }

  override listen(listener: TransportListener): void {
    this.#listener = listener;
    let first = true;
    super.listen({
      message: (frame) => {
        if (first) {
          first = false;
          this.#readLimit(frame);
        }
        listener.message(frame);
      },
      close: (code, reason) => listener.close(code, reason),
    });
  }

  override send(frame: string): void {
    // A frame of n UTF-16 units is n to 3n bytes: counted only when it may be over.
    if (frame.length * 3 > this.#maxFrameBytes && this.#refused(frame)) return;
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

  #readLimit(frame: string): void {
    if (!frame.startsWith('{"type":"welcome"')) return;
    try {
      const limit = (JSON.parse(frame) as { limits?: { maxFrameBytes?: unknown } }).limits?.maxFrameBytes;
      if (typeof limit === 'number' && limit > 0) this.#maxFrameBytes = limit;
    } catch {
      // The client reports an unreadable welcome itself.
    }
  }

  /** Whether the frame is over the limit, and then its request answered here. */
  #refused(frame: string): boolean {
    const bytes = Buffer.byteLength(frame);
    const request = REQUEST_START.exec(frame);
    if (bytes <= this.#maxFrameBytes || !request || !this.#listener) return false;
    const [, id, op] = request;
    const limit = this.#maxFrameBytes;
    const answer = JSON.stringify({
      type: 'error',
      id: Number(id),
      code: 'E_EVENTFLOW_INVALID_INPUT',
      message: `${op}: its frame is ${bytes} bytes, over the gateway's limit of ${limit} (EVENTFLOW_MAX_FRAME_BYTES): the gateway would close the connection; send less data in one request`,
      details: { bytes, limit },
    });
    const listener = this.#listener;
    process.nextTick(() => listener.message(answer));
    return true;
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
