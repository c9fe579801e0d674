/**
 * Vitest browser commands: tests running in Chromium start, stop and restart real gateways (on
 * random ports, with SQLite files in temp directories) in the Node process that drives them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserCommand } from 'vitest/node';
import { startGateway, type Gateway } from '../gateway/src/index.js';

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

/** Starts a gateway; resolves with its handle and WebSocket URL. */
const gatewayStart: BrowserCommand<[]> = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-browser-'));
  const gateway = await start(dir, 0);
  const handle = `g${next++}`;
  running.set(handle, { gateway, dir, port: gateway.port });
  return { handle, url: gateway.url };
};

/** Stops a gateway but keeps its port and database, for restart. */
const gatewayStop: BrowserCommand<[handle: string]> = async (_context, handle) => {
  const entry = running.get(handle);
  await entry?.gateway?.close();
  if (entry) entry.gateway = undefined;
};

/** Starts a stopped gateway again on the same port and database. */
const gatewayRestart: BrowserCommand<[handle: string]> = async (_context, handle) => {
  const entry = running.get(handle);
  if (!entry) throw new Error(`unknown gateway ${handle}`);
  await entry.gateway?.close();
  entry.gateway = await start(entry.dir, entry.port);
};

/** Stops a gateway and deletes its database. */
const gatewayDispose: BrowserCommand<[handle: string]> = async (_context, handle) => {
  const entry = running.get(handle);
  running.delete(handle);
  await entry?.gateway?.close();
  if (entry) rmSync(entry.dir, { recursive: true, force: true });
};

/** The gateway's counts of registrations (subscriptions, consumers, waits, deliveries). */
const gatewayStats: BrowserCommand<[handle: string]> = async (_context, handle) => {
  const gateway = running.get(handle)?.gateway;
  if (!gateway) throw new Error(`gateway ${handle} is not running`);
  return gateway.dispatcher.stats;
};

export const gatewayCommands = { gatewayStart, gatewayStop, gatewayRestart, gatewayDispose, gatewayStats };
