/**
 * Chaos test support: the built gateway and worker scripts run as real child processes
 * (@eventflow/test-support/gateway-process), so they can be killed with SIGKILL; this file adds
 * what only the chaos suites share: the stores they run on and their lifecycle.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import type { EventflowClient } from '@eventflow/core';
import { buildOnce, killAllChildren } from '@eventflow/test-support/gateway-process';

export { mysqlGatewayEnv } from '@eventflow/test-support/mysql';

export const chaosDir = fileURLToPath(new URL('./', import.meta.url));

export function tempDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-chaos-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The stores each chaos proof runs on; the MariaDB variant skips (reason printed) when no server answers. */
export type ChaosStore = 'sqlite' | 'mysql';
export const chaosStores: Array<{ store: ChaosStore }> = [{ store: 'sqlite' }, { store: 'mysql' }];

/**
 * A chaos suite's shared lifecycle: builds the packages once before it, and afterwards closes the
 * clients it registered, kills every child process it started and removes its temp dir.
 */
export function useChaosLifecycle(): { temp: { dir: string; remove: () => void }; clients: EventflowClient[] } {
  const temp = tempDir();
  const clients: EventflowClient[] = [];
  beforeAll(() => buildOnce(), 120_000);
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close({ drainTimeout: 100 }).catch(() => undefined)));
    await killAllChildren();
    temp.remove();
  }, 30_000);
  return { temp, clients };
}
