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
import { ReceiveThrottle } from './receive-budget.js';
import { sharedTextFrame } from './shared-frame.js';


export class WsTransport implements Transport {
  readonly #socket: WebSocket;
  /** The upgraded TCP socket under `#socket`, corked while frames are being sent in one tick. */
  readonly #raw: Duplex | undefined;
  #corked = false;
  /**
   * Frames can be written to `#raw` as they are: no extension (permessage-deflate is off in
   * gateway.ts, but a transport made with it must not get uncompressed frames) and the socket known.
   * Extensions are settled by the handshake, before a transport is made.
   */
  readonly #writesRaw: boolean;
  readonly #slot = new ListenerSlot();

  /** `receiveRate`: EVENTFLOW_MAX_RECEIVE_RATE (0 = unlimited), see receive-budget.ts. */
  constructor(socket: WebSocket, raw?: Duplex, receiveRate = 0) {
    this.#socket = socket;
    this.#raw = raw;
    this.#writesRaw = raw !== undefined && socket.extensions === '';
    const throttle = receiveRate > 0 ? new ReceiveThrottle(socket, receiveRate) : undefined;
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
    this.#cork();
    this.#socket.send(frame);
  }

  /**
   * Sends a frame that a fan-out sends to many connections: framed once for all of them
   * (shared-frame.ts) and written to the TCP socket, where `bufferedAmount` still counts it. `ws`
   * queues nothing of its own without extensions, so frames keep their order with send()'s.
   */
  sendShared(frame: string): void {
    if (!this.#writesRaw) return this.send(frame);
    if (this.#socket.readyState !== this.#socket.OPEN) return;
    this.#cork();
    this.#raw?.write(sharedTextFrame(frame));
  }

  /** Frames sent in the same tick (a fan-out page, a replay page) leave in one write instead of one system call each. */
  #cork(): void {
    if (!this.#raw || this.#corked) return;
    this.#corked = true;
    this.#raw.cork();
    process.nextTick(() => {
      this.#corked = false;
      this.#raw?.uncork();
    });
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

