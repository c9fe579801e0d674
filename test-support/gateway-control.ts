/**
 * Real gateways for browser tests, driven from the Node process: started, stopped and restarted on
 * the same port and database. Loaded as the browser project's globalSetup (through Vite, so the
 * workspace sources resolve); the browser commands reach it through `gatewayControl()`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, type Gateway } from '../gateway/src/index.js';
import { setGatewayControl, type GatewayControl } from './gateway-commands.js';

interface Running {
  gateway: Gateway | undefined;
  dir: string;
  port: number;
}

const running = new Map<string, Running>();
let next = 1;

async function start(dir: string, port: number): Promise<Gateway> {
  return startGateway({ EVENTFLOW_PORT: port, EVENTFLOW_SQLITE_PATH: join(dir, 'eventflow.db'), EVENTFLOW_LOG_LEVEL: 'silent' });
}

const control: GatewayControl = {
  async start() {
    const dir = mkdtempSync(join(tmpdir(), 'eventflow-browser-'));
    const gateway = await start(dir, 0);
    const handle = `g${next++}`;
    running.set(handle, { gateway, dir, port: gateway.port });
    return { handle, url: gateway.url };
  },
  async stop(handle) {
    const entry = running.get(handle);
    await entry?.gateway?.close();
    if (entry) entry.gateway = undefined;
  },
  async restart(handle) {
    const entry = running.get(handle);
    if (!entry) throw new Error(`unknown gateway ${handle}`);
    await entry.gateway?.close();
    entry.gateway = await start(entry.dir, entry.port);
  },
  async dispose(handle) {
    const entry = running.get(handle);
    running.delete(handle);
    await entry?.gateway?.close();
    if (entry) rmSync(entry.dir, { recursive: true, force: true });
  },
  async stats(handle) {
    const gateway = running.get(handle)?.gateway;
    if (!gateway) throw new Error(`gateway ${handle} is not running`);
    return gateway.dispatcher.stats;
  },
};

export function setup(): void {
  setGatewayControl(control);
}

export async function teardown(): Promise<void> {
  await Promise.all([...running.keys()].map((handle) => control.dispose(handle)));
}
