/** One connection accepted by the hub, and the deferred its accepting waits on. */
import type { TLSSocket } from 'node:tls';
import { RecordDecoder } from '../codec.js';

/** One accepted TLS connection (a spoke, a gateway, or a peer hub announcing itself). */
export class HubClient {
  ready = false;
  closed = false;
  /** Routing of this connection's publishes, in the order received. */
  tail: Promise<void> = Promise.resolve();
  inFlight = 0;
  paused = false;
  invalid = 0;
  readonly decoder: RecordDecoder;

  constructor(
    readonly socket: TLSSocket,
    readonly id: string,
    maxRecordBytes: number,
  ) {
    this.decoder = new RecordDecoder(maxRecordBytes);
  }
}

export function deferred(): { promise: Promise<void>; resolve(): void; reject(error: Error): void } {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
