/**
 * Test harness: a real gateway on a random port with a real SQLite file in a fresh temp dir, and
 * real WebSocket clients. Everything started here is closed by `stop()`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, EventflowClient, EventflowError, webSocketConnector, type ClientOptions, type EventMap, type Transport } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';

export interface Harness {
  gateway: Gateway;
  dir: string;
  dbPath: string;
  client<M extends EventMap = EventMap>(options?: ClientOptions): EventflowClient<M>;
  /** A client whose connection can be cut as if its process died: it never reconnects after kill(). */
  killableClient(options?: ClientOptions): { client: EventflowClient; kill(): void };
  /** Stops the gateway and starts a new one on the same port and database file. */
  restart(): Promise<Gateway>;
  stop(): Promise<void>;
}

export async function startHarness(config: Record<string, string | number> = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-test-'));
  const dbPath = join(dir, 'eventflow.db');
  const base = { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: dbPath, EVENTFLOW_LOG_LEVEL: 'silent', ...config };
  let gateway = await startGateway(base);
  const clients = new Set<EventflowClient<EventMap>>();
  const harness: Harness = {
    get gateway() {
      return gateway;
    },
    dir,
    dbPath,
    client<M extends EventMap = EventMap>(options: ClientOptions = {}) {
      const client = createClient<M>(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined, ...options });
      clients.add(client as unknown as EventflowClient<EventMap>);
      return client;
    },
    killableClient(options: ClientOptions = {}) {
      let dead = false;
      let current: Transport | undefined;
      const connect = webSocketConnector(gateway.url);
      const client = new EventflowClient(
        async (signal) => {
          if (dead) throw new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', 'killed');
          return (current = await connect(signal));
        },
        { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined, ...options },
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
    async restart() {
      const port = gateway.port;
      await gateway.close();
      gateway = await startGateway({ ...base, EVENTFLOW_PORT: port });
      return gateway;
    },
    async stop() {
      await Promise.allSettled([...clients].map((client) => client.close()));
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return harness;
}

/** Polls until `check` returns a value other than undefined/null/false, or fails after `timeout` ms. */
export async function eventually<T>(check: () => T | undefined | null | false | Promise<T | undefined | null | false>, timeout = 5_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
