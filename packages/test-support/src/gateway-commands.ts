/**
 * Vitest browser commands: tests running in Chromium start, stop and restart real gateways in the
 * Node process that drives them. The gateways themselves live in gateway-control.ts, loaded as a
 * globalSetup: the config must not import workspace sources, which only Vite's module runner
 * resolves (the config is bundled before any package is built).
 */
import type { BrowserCommand } from 'vitest/node';

export interface GatewayControl {
  start(env?: Record<string, string | number>): Promise<{ handle: string; url: string }>;
  stop(handle: string): Promise<void>;
  restart(handle: string): Promise<void>;
  dispose(handle: string): Promise<void>;
  stats(handle: string): Promise<{ subscriptions: number; consumers: number; waits: number; deliveries: number }>;
}

const slot = Symbol.for('eventflow.test.gatewayControl');
type WithControl = typeof globalThis & { [slot]?: GatewayControl };

export function setGatewayControl(control: GatewayControl): void {
  (globalThis as WithControl)[slot] = control;
}

function control(): GatewayControl {
  const found = (globalThis as WithControl)[slot];
  if (!found) throw new Error('gateway control not loaded: the browser project needs packages/test-support/src/gateway-control.ts as globalSetup');
  return found;
}

const gatewayStart: BrowserCommand<[env?: Record<string, string | number>]> = (_context, env) => control().start(env);
const gatewayStop: BrowserCommand<[handle: string]> = (_context, handle) => control().stop(handle);
const gatewayRestart: BrowserCommand<[handle: string]> = (_context, handle) => control().restart(handle);
const gatewayDispose: BrowserCommand<[handle: string]> = (_context, handle) => control().dispose(handle);
const gatewayStats: BrowserCommand<[handle: string]> = (_context, handle) => control().stats(handle);

export const gatewayCommands = { gatewayStart, gatewayStop, gatewayRestart, gatewayDispose, gatewayStats };
