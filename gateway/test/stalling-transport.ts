/**
 * A client connection for gateway.accept whose faults the test sets: `bufferedAmount` (how much
 * the client has not taken: a stalled or slow reader), and a close that, like a peer that never
 * answers the close frame, does not end the connection until the test calls `end()`.
 */
import type { ServerTransport, TransportListener } from '@eventflow/core';

export interface EventFrame {
  type: 'event';
  names: string[];
  event: { id: string; position: number; data: Record<string, unknown> };
}

export class StallingTransport implements ServerTransport {
  bufferedAmount = 0;
  readonly frames: Array<{ type: string; [key: string]: unknown }> = [];
  /** The close code the gateway asked for, if it did. */
  closed: number | undefined;
  /** With true, close() ends the connection at once (a well-behaved peer). */
  readonly #answersClose: boolean;
  #listener: TransportListener | undefined;
  #ended = false;

  constructor(options: { answersClose?: boolean } = {}) {
    this.#answersClose = options.answersClose ?? true;
  }

  send(frame: string): void {
    this.frames.push(JSON.parse(frame) as { type: string });
  }
  close(code = 1000, reason = ''): void {
    if (this.closed !== undefined) return;
    this.closed = code;
    if (this.#answersClose) queueMicrotask(() => this.end(code, reason));
  }
  /** The connection is gone (the close handshake ended, or timed out). */
  end(code = this.closed ?? 1006, reason = ''): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#listener?.close(code, reason);
  }
  listen(listener: TransportListener): void {
    this.#listener = listener;
  }
  deliver(frame: unknown): void {
    this.#listener?.message(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }
  events(): EventFrame[] {
    return this.frames.filter((frame) => frame.type === 'event') as unknown as EventFrame[];
  }
}
