/**
 * The seam between the client (or the gateway) and the bytes. Core never imports a runtime:
 * a WebSocket transport (isows) and an in-memory pair implement this interface. The gateway's
 * transports also say how much they have still to write (ServerTransport); a client never asks.
 */
export interface TransportListener {
  message(frame: string): void;
  close(code: number, reason: string): void;
}

export interface Transport {
  send(frame: string): void;
  close(code?: number, reason?: string): void;
  /**
   * Attaches the listener. Frames that arrived before are delivered then, so that nothing is
   * lost between "open" and the moment a consumer of the transport is ready.
   */
  listen(listener: TransportListener): void;
}

/** A transport the gateway serves a connection over: it holds back (or drops) a client that reads too slowly. */
export interface ServerTransport extends Transport {
  /** Bytes accepted by send() but not yet written to the network. */
  readonly bufferedAmount: number;
}

/** Opens a transport; rejects when it cannot be opened or when `signal` aborts first. */
export type Connector = (signal: AbortSignal) => Promise<Transport>;

/** Buffers frames and the close until a listener is attached; shared by the implementations. */
export class ListenerSlot {
  #listener: TransportListener | undefined;
  #queue: string[] = [];
  #closed: [number, string] | undefined;

  attach(listener: TransportListener): void {
    if (this.#listener) throw new Error('transport already has a listener');
    this.#listener = listener;
    for (const frame of this.#queue.splice(0)) listener.message(frame);
    if (this.#closed) listener.close(...this.#closed);
  }

  message(frame: string): void {
    if (this.#closed) return;
    if (this.#listener) this.#listener.message(frame);
    else this.#queue.push(frame);
  }

  close(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = [code, reason];
    this.#listener?.close(code, reason);
  }
}

class MemoryTransport implements ServerTransport {
  readonly slot = new ListenerSlot();
  peer!: MemoryTransport;
  bufferedAmount = 0;
  /** Closed here, or by the peer (once its close arrived). */
  #closed = false;

  send(frame: string): void {
    if (this.#closed) return;
    // Asynchronous like a socket, so tests exercise the same interleavings as the network.
    this.bufferedAmount += frame.length;
    queueMicrotask(() => {
      this.bufferedAmount -= frame.length;
      this.peer.slot.message(frame);
    });
  }

  close(code = 1000, reason = ''): void {
    if (this.#closed) return;
    this.#end(code, reason);
    queueMicrotask(() => this.peer.#end(code, reason));
  }

  #end(code: number, reason: string): void {
    this.#closed = true;
    this.slot.close(code, reason);
  }

  listen(listener: TransportListener): void {
    this.slot.attach(listener);
  }
}

/** Two connected in-memory transports: what one sends, the other receives. */
export function createMemoryPair(): [ServerTransport, ServerTransport] {
  const a = new MemoryTransport();
  const b = new MemoryTransport();
  a.peer = b;
  b.peer = a;
  return [a, b];
}
