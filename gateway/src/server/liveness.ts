/**
 * EVENTFLOW_PING_INTERVAL_MS: a client connection the gateway hears nothing from (no frame, no
 * pong) for a whole interval is pinged (a WebSocket ping, which browsers and `ws` answer by
 * themselves), and terminated when the next interval passes without an answer. Without it a
 * client gone silent (a partition, a machine lost without a FIN) stayed a consumer group's member:
 * each time one of its leases ran out its credit came free and the gateway sent it more, so the
 * group's events went to it one lease after another, counting attempts, until they were
 * dead letters that had never run. One timer per interval for all connections (bench/idle-memory.mjs).
 */

/** What a connection gives the sweep. */
export interface Pingable {
  /** Heard from since the last sweep (a frame or a pong); the sweep clears it. */
  heard: boolean;
  /** Pinged at the last sweep and not heard from since. */
  pinged: boolean;
  /** Not read from on purpose (the receive budget paused it): its pong waits unread, so it is not pinged. */
  readonly paused: boolean;
  ping(): void;
  terminate(): void;
}

const sweeps = new Map<number, { connections: Set<Pingable>; timer: ReturnType<typeof setInterval> }>();

function sweep(connections: Set<Pingable>): void {
  for (const connection of connections) {
    if (connection.heard || connection.paused) {
      connection.heard = connection.pinged = false;
    } else if (connection.pinged) {
      connections.delete(connection);
      connection.terminate();
    } else {
      connection.pinged = true;
      connection.ping();
    }
  }
}

/** Watches `connection` every `interval` ms (0: never); returns what stops watching it (its close). */
export function watchLiveness(connection: Pingable, interval: number): () => void {
  if (interval <= 0) return () => undefined;
  let entry = sweeps.get(interval);
  if (!entry) {
    const connections = new Set<Pingable>();
    const timer = setInterval(() => sweep(connections), interval);
    // The sweep alone must not keep a process alive.
    timer.unref();
    sweeps.set(interval, (entry = { connections, timer }));
  }
  const { connections, timer } = entry;
  connections.add(connection);
  return () => {
    connections.delete(connection);
    if (connections.size === 0 && sweeps.get(interval)?.timer === timer) {
      clearInterval(timer);
      sweeps.delete(interval);
    }
  };
}
