/**
 * A client connection's transport over a `ws` WebSocket: frames sent in one tick leave in one write
 * (corked), binary frames become a marker that gets a coded error, the receive budget throttles
 * reading, a client that does not answer a close within CLOSE_GRACE_MS is dropped, and one silent
 * for two ping intervals is terminated (liveness.ts).
 *
 * The connections written to in one tick are uncorked together at its end, those holding a frame
 * another party is waiting on (`urgent`: a delivery, an event, a wait's outcome) before those holding
 * only answers to their own requests: a job's delivery or a request()'s outcome leaves ahead of the
 * publisher's answer written in the same tick, a write sooner (a write is ~50 µs of the gateway's
 * time, more when it wakes the reader on the same core).
 */
import type { Duplex } from 'node:stream';
import { ListenerSlot, type ServerTransport, type TransportListener } from '@eventflow/core';
import type { WebSocket } from 'ws';
import { BINARY_FRAME } from '../connection/frames.js';
import { CLOSE_GRACE_MS } from '../defaults.js';
import { watchLiveness, type Pingable } from './liveness.js';
import { ReceiveThrottle } from './receive-budget.js';
import { sharedTextFrame } from './shared-frame.js';


/** The transports corked in this tick, in the order they are uncorked at its end (see the header). */
const corked: { urgent: WsTransport[]; rest: WsTransport[]; scheduled: boolean } = { urgent: [], rest: [], scheduled: false };

function uncorkAll(): void {
  corked.scheduled = false;
  const { urgent, rest } = corked;
  corked.urgent = [];
  corked.rest = [];
  for (const transport of urgent) transport.uncork();
  for (const transport of rest) transport.uncork();
}

export class WsTransport implements ServerTransport, Pingable {
  /** Liveness (liveness.ts): heard from since the last sweep, pinged at it. */
  heard = true;
  pinged = false;
  readonly #socket: WebSocket;
  /** The upgraded TCP socket under `#socket`, corked while frames are being sent in one tick. */
  readonly #raw: Duplex | undefined;
  /** Corked in this tick, and whether in the urgent list. */
  #corked: 'no' | 'urgent' | 'rest' = 'no';
  /**
   * Frames can be written to `#raw` as they are: no extension (permessage-deflate is off in
   * gateway.ts, but a transport made with it must not get uncompressed frames) and the socket known.
   * Extensions are settled by the handshake, before a transport is made.
   */
  readonly #writesRaw: boolean;
  readonly #slot = new ListenerSlot();

  /** `receiveRate`: EVENTFLOW_MAX_RECEIVE_RATE (0 = unlimited), see receive-budget.ts; `pingInterval`: EVENTFLOW_PING_INTERVAL_MS (0 = never), see liveness.ts. */
  constructor(socket: WebSocket, raw?: Duplex, receiveRate = 0, pingInterval = 0) {
    this.#socket = socket;
    this.#raw = raw;
    this.#writesRaw = raw !== undefined && socket.extensions === '';
    const throttle = receiveRate > 0 ? new ReceiveThrottle(socket, receiveRate) : undefined;
    const unwatch = watchLiveness(this, pingInterval);
    socket.on('pong', () => (this.heard = true));
    socket.on('message', (data, isBinary) => {
      this.heard = true;
      throttle?.received(Array.isArray(data) ? data.reduce((sum, part) => sum + part.length, 0) : data.byteLength);
      // Binary frames are not part of the protocol; hand them on as a marker so they get a coded error.
      this.#slot.message(isBinary ? BINARY_FRAME : data.toString());
    });
    socket.on('close', (code, reason) => {
      throttle?.stop();
      unwatch();
      this.#slot.close(code, reason.toString());
    });
    socket.on('error', () => undefined); // always followed by 'close'
  }

  /** `urgent`: another party waits on the frame (see the header); answers to the connection's own requests are not. */
  send(frame: string, urgent = false): void {
    if (this.#socket.readyState !== this.#socket.OPEN) return;
    this.#cork(urgent);
    this.#socket.send(frame);
  }

  /**
   * Sends a frame that a fan-out sends to many connections: framed once for all of them
   * (shared-frame.ts) and written to the TCP socket, where `bufferedAmount` still counts it. `ws`
   * queues nothing of its own without extensions, so frames keep their order with send()'s.
   */
  sendShared(frame: string): void {
    if (!this.#writesRaw) return this.send(frame, true);
    if (this.#socket.readyState !== this.#socket.OPEN) return;
    this.#cork(true);
    this.#raw?.write(sharedTextFrame(frame));
  }

  /** Frames sent in the same tick (a fan-out page, a replay page) leave in one write instead of one system call each. */
  #cork(urgent: boolean): void {
    if (!this.#raw || this.#corked === 'urgent' || (this.#corked === 'rest' && !urgent)) return;
    if (this.#corked === 'no') this.#raw.cork();
    // Listed again when an urgent frame follows answers: uncork() is a no-op the second time.
    this.#corked = urgent ? 'urgent' : 'rest';
    corked[this.#corked].push(this);
    if (corked.scheduled) return;
    corked.scheduled = true;
    process.nextTick(uncorkAll);
  }

  /** Writes what was sent in this tick (uncorkAll). */
  uncork(): void {
    if (this.#corked === 'no') return;
    this.#corked = 'no';
    this.#raw?.uncork();
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

  get paused(): boolean {
    return this.#socket.isPaused;
  }

  ping(): void {
    if (this.#socket.readyState === this.#socket.OPEN) this.#socket.ping();
  }

  terminate(): void {
    this.#socket.terminate();
  }

  listen(listener: TransportListener): void {
    this.#slot.attach(listener);
  }

  get bufferedAmount(): number {
    return this.#socket.bufferedAmount;
  }
}

