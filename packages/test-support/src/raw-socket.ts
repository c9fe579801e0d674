/**
 * A raw WebSocket connection to the gateway for the tests that talk to it with `ws` directly,
 * not through the client (bad-input, limits, fuzz): it collects the parsed frames, waits for a
 * matching one, sends frames and requests, and says hello unless told not to.
 */
import { expect } from 'vitest';
import WebSocket from 'ws';

export interface Frame {
  type: string;
  id?: number;
  code?: string;
  message?: string;
  result?: unknown;
  details?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface Closed {
  code: number;
  reason: string;
}

export interface ConnectOptions extends WebSocket.ClientOptions {
  /** Say hello and wait for the welcome before resolving (default true). */
  hello?: boolean;
  /** The client name in the hello. */
  client?: string;
  /**
   * Takes every frame after the welcome (every frame without a hello) instead of keeping it in
   * `frames`, for suites whose frames are too many to keep.
   */
  onFrame?: (frame: Frame, isBinary: boolean) => void;
}

export interface Conn {
  ws: WebSocket;
  /** Every frame received so far, in order. */
  readonly frames: Frame[];
  /** Resolves with the close code once the socket is closed. */
  readonly closed: Promise<Closed>;
  /** The first not-yet-taken frame matching `predicate` (already received or arriving within `timeout`). */
  next(predicate?: (frame: Frame) => boolean, timeout?: number): Promise<Frame>;
  send(data: unknown): void;
  sendRaw(data: string | Buffer): void;
  /** Sends a request without waiting; returns its id. */
  sendRequest(op: string, params: unknown): number;
  /** The result or error frame of request `id`. */
  answer(id: number): Promise<Frame>;
  /** Sends a request and returns its result or error frame. */
  request(op: string, params: unknown): Promise<Frame>;
  /** Proves the connection still serves requests. */
  ping(): Promise<void>;
}

let nextRequestId = 1000;

export async function connect(url: string, options: ConnectOptions = {}): Promise<Conn> {
  const { hello = true, client = 'raw-socket-test', onFrame, ...wsOptions } = options;
  const ws = new WebSocket(url, wsOptions);
  const frames: Frame[] = [];
  const taken = new Set<Frame>();
  const waiters = new Set<() => void>();
  let welcomed = !hello;
  ws.on('message', (data, isBinary) => {
    const frame = JSON.parse(data.toString()) as Frame;
    if (onFrame && welcomed) return onFrame(frame, isBinary);
    expect(isBinary).toBe(false);
    if (frame.type === 'welcome') welcomed = true;
    frames.push(frame);
    for (const wake of waiters) wake();
  });
  ws.on('error', () => undefined); // followed by 'close'
  const closed = new Promise<Closed>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });

  const conn: Conn = {
    ws,
    frames,
    closed,
    next(predicate = () => true, timeout = 10_000) {
      return new Promise<Frame>((resolve, reject) => {
        const check = (): boolean => {
          const frame = frames.find((candidate) => !taken.has(candidate) && predicate(candidate));
          if (!frame) return false;
          taken.add(frame);
          resolve(frame);
          return true;
        };
        if (check()) return;
        const wake = (): void => {
          if (check()) done();
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`no matching frame within ${timeout} ms; received ${JSON.stringify(frames).slice(0, 2_000)}`));
        }, timeout);
        const done = (): void => {
          clearTimeout(timer);
          waiters.delete(wake);
        };
        waiters.add(wake);
      });
    },
    send(data) {
      ws.send(JSON.stringify(data));
    },
    sendRaw(data) {
      ws.send(data);
    },
    sendRequest(op, params) {
      const id = nextRequestId++;
      conn.send({ type: 'request', id, op, params });
      return id;
    },
    answer(id) {
      return conn.next((frame) => (frame.type === 'result' || frame.type === 'error') && frame.id === id);
    },
    request(op, params) {
      return conn.answer(conn.sendRequest(op, params));
    },
    async ping() {
      expect(ws.readyState).toBe(WebSocket.OPEN);
      expect(await conn.request('ping', {})).toMatchObject({ type: 'result', result: {} });
    },
  };

  if (hello) {
    conn.send({ type: 'hello', protocol: 1, client });
    await conn.next((frame) => frame.type === 'welcome');
  }
  return conn;
}
