/**
 * A client connection's transport over a `ws` WebSocket: frames sent in one tick leave in one write
 * (corked), binary frames become a marker that gets a coded error, the receive budget throttles
 * reading, and a client that does not answer a close within CLOSE_GRACE_MS is dropped.
 */
import type { Duplex } from 'node:stream';
import { ListenerSlot, type Transport, type TransportListener } from '@eventflow/core';
import type { WebSocket } from 'ws';
import { BINARY_FRAME } from '../connection/frames.js';
import { CLOSE_GRACE_MS } from '../defaults.js';
import { throttleReceiving } from './receive-budget.js';


export class WsTransport implements Transport {
  readonly #socket: WebSocket;
  /** The upgraded TCP socket under `#socket`, corked while frames are being sent in one tick. */
  readonly #raw: Duplex | undefined;
  #corked = false;
  readonly #slot = new ListenerSlot();

  /** `receiveRate`: EVENTFLOW_MAX_RECEIVE_RATE (0 = unlimited), see receive-budget.ts. */
  constructor(socket: WebSocket, raw?: Duplex, receiveRate = 0) {
    this.#socket = socket;
    this.#raw = raw;
    const throttle = receiveRate > 0 ? throttleReceiving(socket, receiveRate) : undefined;
    socket.on('message', (data, isBinary) => {
      throttle?.received(Array.isArray(data) ? data.reduce((sum, part) => sum + part.length, 0) : data.byteLength);
      // Binary frames are not part of the protocol; hand them on as a marker so they get a coded error.
      this.#slot.message(isBinary ? BINARY_FRAME : data.toString());
    });
    socket.on('close', (code, reason) => {
      throttle?.stop();
      this.#slot.close(code, reason.toString());
    });
    socket.on('error', () => undefined); // always followed by 'close'
  }

  send(frame: string): void {
    if (this.#socket.readyState !== this.#socket.OPEN) return;
    // Frames sent in the same tick (a fan-out page, a replay page) leave in one write instead of
    // one system call each, which is what a fan-out to many connections spends most time on.
    if (this.#raw && !this.#corked) {
      this.#corked = true;
      this.#raw.cork();
      process.nextTick(() => {
        this.#corked = false;
        this.#raw?.uncork();
      });
    }
    this.#socket.send(frame);
  }

  close(code = 1000, reason = ''): void {
    if (this.#socket.readyState !== this.#socket.OPEN && this.#socket.readyState !== this.#socket.CONNECTING) return;
    this.#socket.close(code, reason);
    // ws waits up to 30 s for the client's close frame; a client that never sends it must not keep
    // the socket (and what it sends meanwhile) for that long.
    const grace = setTimeout(() => this.#socket.terminate(), CLOSE_GRACE_MS);
    grace.unref();
    this.#socket.once('close', () => clearTimeout(grace));
  }

  listen(listener: TransportListener): void {
    this.#slot.attach(listener);
  }

  get bufferedAmount(): number {
    return this.#socket.bufferedAmount;
  }
}

