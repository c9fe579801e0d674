/**
 * The HTTP boundary's guards: nothing a client puts in a request line, target or header may end
 * the process or disturb another connection. A request-target the WHATWG URL parser rejects is
 * answered with 400; an exception escaping a request or upgrade handler is answered with 500 (or
 * the socket is destroyed when an answer cannot be written) and logged; a request Node's HTTP
 * parser rejects (`clientError`) is answered with 400/431 like Node's default, without logging
 * more than a debug line.
 */
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../log.js';

/**
 * The path of a request-target (origin-form `/a?b`, absolute-form `http://h/a`, `*`), or
 * undefined when it is not a URL at all (`//[`, `http://[`, a bad port or host escape...). The
 * query is dropped: it may carry a token, and no route reads it.
 */
export function requestPath(target: string | undefined): string | undefined {
  try {
    return new URL(target ?? '/', 'http://gateway').pathname;
  } catch {
    return undefined;
  }
}

/** Answers `status` with a short plain-text body, unless an answer is already under way. */
export function answerPlain(response: ServerResponse, status: number, body: string): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).end(body);
}

/**
 * Runs a request handler so that nothing it throws, synchronously or in its promise, escapes to
 * the process: the client gets 500 (or its socket is destroyed mid-answer) and the error is logged.
 */
export function guardRequest(log: Logger, handle: (request: IncomingMessage, response: ServerResponse) => void | Promise<void>) {
  const failed = (request: IncomingMessage, response: ServerResponse, error: unknown): void => {
    log.error('http request handler failed', { error, method: request.method });
    try {
      answerPlain(response, 500, 'internal error; see the gateway log\n');
    } catch {
      response.destroy();
    }
  };
  return (request: IncomingMessage, response: ServerResponse): void => {
    try {
      const result = handle(request, response);
      if (result) result.catch((error: unknown) => failed(request, response, error));
    } catch (error) {
      failed(request, response, error);
    }
  };
}

/** The same for an `upgrade` handler: a failure destroys that socket and is logged. */
export function guardUpgrade(log: Logger, handle: (request: IncomingMessage, socket: Duplex, head: Buffer) => void) {
  return (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    // Until ws takes the socket, a reset by the client must not become an unhandled 'error'.
    socket.on('error', ignore);
    try {
      handle(request, socket, head);
    } catch (error) {
      log.error('websocket upgrade handler failed', { error });
      refuseUpgrade(socket, 500, 'internal error; see the gateway log\n');
    }
  };
}

/** Answers an upgrade request with a plain HTTP error and closes the socket: no WebSocket is opened. */
export function refuseUpgrade(socket: Duplex, status: number, body: string, contentType = 'text/plain; charset=utf-8', extraHeaders = ''): void {
  socket.on('error', ignore);
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nConnection: close\r\nContent-Type: ${contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extraHeaders}\r\n${body}`,
  );
}

/**
 * `clientError`: Node's parser rejected the request (bad request line, header, framing) or the
 * socket failed before a request was complete. Node's default answer, made explicit so that it
 * stays one place to look: 431 for oversized headers, else 400, then the socket is closed.
 */
export function guardClientErrors(server: Server, log: Logger): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    log.debug('malformed http request refused', { code: error.code });
    socket.on('error', ignore);
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    socket.once('finish', () => socket.destroy());
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  });
}

const ignore = (): void => undefined;
