/**
 * One in-process gateway on a random port with a SQLite file in a fresh temp dir: stopped and
 * started again on the same port and file (a restart, or an outage), disposed with its files.
 * The gateway harness, the browser tests' gateway control and the demo's end-to-end test all
 * start their gateways here.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, type Gateway } from '@eventflow/gateway';

export type GatewayEnv = Record<string, string | number>;

export interface TempGateway {
  /** The running gateway; throws while it is stopped. */
  readonly gateway: Gateway;
  readonly running: boolean;
  readonly dir: string;
  readonly dbPath: string;
  /** The port, kept across stop/start (0 until the first start chose one). */
  readonly port: number;
  /** Closes the gateway, keeping its port and database file. */
  stop(): Promise<void>;
  /** Starts it again on the same port and database file (after stop()). */
  start(): Promise<Gateway>;
  /** stop() then start(). */
  restart(): Promise<Gateway>;
  /** Stops it and deletes its temp dir. */
  dispose(): Promise<void>;
}

/**
 * Starts a gateway with `EVENTFLOW_*` settings `config` over the defaults (random port, a SQLite
 * file in a new temp dir named `prefix…`, silent log, no console).
 */
export async function startTempGateway(config: GatewayEnv = {}, prefix = 'eventflow-test-'): Promise<TempGateway> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const dbPath = join(dir, 'eventflow.db');
  // No drain on close: a test that stops a gateway with handlers running says so (EVENTFLOW_DRAIN_TIMEOUT_MS).
  // No console unless asked for (EVENTFLOW_CONSOLE_DIR): whether gateway/console is built must not change what a test sees.
  const base: GatewayEnv = { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: dbPath, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_DRAIN_TIMEOUT_MS: 0, EVENTFLOW_CONSOLE_DIR: 'off', ...config };
  let current: Gateway | undefined;
  let port = 0;
  const temp: TempGateway = {
    get gateway() {
      if (!current) throw new Error(`the gateway of ${dir} is stopped`);
      return current;
    },
    get running() {
      return current !== undefined;
    },
    dir,
    dbPath,
    get port() {
      return port;
    },
    async stop() {
      const closing = current;
      current = undefined;
      await closing?.close();
    },
    async start() {
      if (current) throw new Error(`the gateway of ${dir} is already running`);
      current = await startGateway({ ...base, ...(port ? { EVENTFLOW_PORT: port } : {}) });
      port = current.port;
      return current;
    },
    async restart() {
      await temp.stop();
      return temp.start();
    },
    async dispose() {
      await temp.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await temp.start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return temp;
}
