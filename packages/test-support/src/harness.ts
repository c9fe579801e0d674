/**
 * Test harness: a real gateway on a random port with a real SQLite file in a fresh temp dir
 * (temp-gateway.ts), and real WebSocket clients. Everything started here is closed by `stop()`.
 */
import { consuming, createClient, EventflowClient, EventflowError, iterating, v4Reads, waiting, webSocketConnector, type ClientOptions, type EventMap, type Transport } from '@eventflow/core';
import type { Gateway } from '@eventflow/gateway';
import { startTempGateway, type GatewayEnv } from './temp-gateway.js';
import { fence, FENCE_NAME, FENCE_PID } from './wait.js';

export interface Harness {
  gateway: Gateway;
  dir: string;
  dbPath: string;
  client<M extends EventMap = EventMap>(options?: ClientOptions): EventflowClient<M>;
  /** A client whose connection can be cut as if its process died: it never reconnects after kill(). */
  killableClient(options?: ClientOptions): { client: EventflowClient; kill(): void };
  /**
   * A fence for the events of `domain` on `client`'s connection: publishes a marker event (pid
   * `test-fence-…`) named `name` in `domain` and waits until it reached a listener of `client`.
   * Every event of the domain stored before it has then reached the client's listeners too: the
   * gateway hands a domain's events out in position order. With the default name the client is
   * subscribed to it once for good; with a name the test subscribed to, the marker travels down
   * that very subscription (replays included) and the test's listener should skip it (`isFence`),
   * as should listeners of `*`.
   */
  fence(client: EventflowClient<EventMap>, domain: string, name?: string): Promise<void>;
  /** Stops the gateway and starts a new one on the same port and database file. */
  restart(): Promise<Gateway>;
  /** Stops the gateway only (an outage): `startGateway()` brings it back on the same port and file. */
  stopGateway(): Promise<void>;
  startGateway(): Promise<Gateway>;
  stop(): Promise<void>;
}

export async function startHarness(config: GatewayEnv = {}): Promise<Harness> {
  const temp = await startTempGateway(config);
  const clients = new Set<EventflowClient<EventMap>>();
  /** client → domain → the pids of the markers it received there. */
  const fenced = new WeakMap<EventflowClient<EventMap>, Map<string, Set<string>>>();
  let markers = 0;
  const harness: Harness = {
    get gateway() {
      return temp.gateway;
    },
    dir: temp.dir,
    dbPath: temp.dbPath,
    client<M extends EventMap = EventMap>(options: ClientOptions = {}) {
      const client = createClient<M>(temp.gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined, ...options });
      clients.add(client as unknown as EventflowClient<EventMap>);
      return client;
    },
    killableClient(options: ClientOptions = {}) {
      let dead = false;
      let current: Transport | undefined;
      const connect = webSocketConnector(temp.gateway.url);
      const client = new EventflowClient(
        async (signal) => {
          if (dead) throw new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', 'killed');
          return (current = await connect(signal));
        },
        { features: [consuming, waiting, v4Reads, iterating], reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined, ...options },
      );
      clients.add(client);
      return {
        client,
        kill() {
          dead = true;
          current?.close(4999, 'killed');
        },
      };
    },
    async fence(client, domain, name = FENCE_NAME) {
      const pid = `${FENCE_PID}${++markers}`;
      if (name === FENCE_NAME) {
        let domains = fenced.get(client);
        if (!domains) fenced.set(client, (domains = new Map()));
        let seen = domains.get(domain);
        if (!seen) {
          const arrived = new Set<string>();
          await client.subscribe(domain, FENCE_NAME, (event) => void arrived.add(event.pid));
          domains.set(domain, (seen = arrived));
        }
        const marks = seen;
        await fence(() => client.publish({ domain, name, pid }), () => marks.has(pid), 10_000, `the fence marker in ${domain}`);
        return;
      }
      // A second listener on the test's key shares its subscription at the gateway (and is removed
      // after, which leaves that subscription as it was).
      let arrived = false;
      const listener = (event: { pid: string }): void => void (event.pid === pid && (arrived = true));
      await client.subscribe(domain, name, listener);
      try {
        await fence(() => client.publish({ domain, name, pid }), () => arrived, 10_000, `the fence marker ${domain}/${name}`);
      } finally {
        await client.unsubscribe(domain, name, listener);
      }
    },
    restart() {
      return temp.restart();
    },
    stopGateway() {
      return temp.stop();
    },
    startGateway() {
      return temp.start();
    },
    async stop() {
      await Promise.allSettled([...clients].map((client) => client.close()));
      await temp.dispose();
    },
  };
  return harness;
}
