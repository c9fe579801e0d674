/**
 * A TCP proxy that can partition the link without closing it: `partition()` makes every
 * connection through it (and every new one) stop carrying bytes in both directions, closes
 * included, as a network partition does; `heal()` lets what was held through, in order, as TCP's
 * retransmissions would. Nothing is dropped and no socket is closed by the proxy itself.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface PartitionProxy {
  readonly port: number;
  readonly url: string;
  partition(): void;
  heal(): void;
  /** Ends every connection through it at once (both sockets destroyed), as a dropped link does; new ones pass. */
  cut(): void;
  /**
   * Stops reading every connection through it (and every new one), as a stopped process does: the kernel's
   * buffers fill, then the sender's. `heal()` reads again.
   */
  stall(): void;
  close(): Promise<void>;
}

/** One direction of a proxied connection: bytes and the end, held while partitioned. */
class Direction {
  readonly #to: Socket;
  #held: Buffer[] = [];
  #ended = false;

  constructor(from: Socket, to: Socket, partitioned: () => boolean) {
    this.#to = to;
    from.on('data', (chunk: Buffer) => (partitioned() ? this.#held.push(chunk) : to.write(chunk)));
    from.on('close', () => {
      this.#ended = true;
      if (!partitioned()) this.flush();
    });
  }

  flush(): void {
    for (const chunk of this.#held.splice(0)) this.#to.write(chunk);
    if (this.#ended) this.#to.destroy();
  }
}

export async function startPartitionProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<PartitionProxy> {
  let partitioned = false;
  let stalled = false;
  const directions = new Set<Direction>();
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect({ host: targetHost, port: targetPort });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
      if (stalled) socket.pause();
    }
    const isPartitioned = (): boolean => partitioned;
    directions.add(new Direction(client, upstream, isPartitioned));
    directions.add(new Direction(upstream, client, isPartitioned));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('the proxy has no port');
  return {
    port: address.port,
    url: `nats://127.0.0.1:${address.port}`,
    partition() {
      partitioned = true;
    },
    heal() {
      partitioned = false;
      stalled = false;
      for (const socket of sockets) socket.resume();
      for (const direction of directions) direction.flush();
    },
    stall() {
      stalled = true;
      for (const socket of sockets) socket.pause();
    },
    cut() {
      for (const socket of sockets) socket.destroy();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
