/**
 * The gateway's start-up bundle (scripts/bundle-gateway.mjs → gateway/bundle/main.mjs, what the bin
 * runs once built): it starts on the embedded store, serves HTTP, takes WebSocket clients, stores and
 * reads events, and finds the files it ships beside its code (package.json for --version), although
 * its modules sit at another depth than in dist/.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeClient } from '@eventflow/node';
import { buildOnce, freePort, spawnNode, stop } from '@eventflow/test-support/gateway-process';
import { repoRoot } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-bundle-'));
const bundle = join(repoRoot, 'gateway/bundle/main.mjs');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeAll(async () => {
  await buildOnce();
  execFileSync(process.execPath, [join(repoRoot, 'scripts/bundle-gateway.mjs'), '--if-stale'], { cwd: repoRoot, timeout: 120_000, stdio: 'pipe' });
}, 240_000);

describe('the gateway bundle', () => {
  it('--version reads the package version from the bundle', () => {
    const version = (JSON.parse(readFileSync(join(repoRoot, 'gateway/package.json'), 'utf8')) as { version: string }).version;
    expect(execFileSync(process.execPath, [bundle, '--version'], { encoding: 'utf8' })).toBe(`eventflow-gateway ${version}\n`);
  });

  it('starts on SQLite, answers /healthz and /metrics, and stores and reads events over WebSocket', async () => {
    const port = await freePort();
    const gateway = await spawnNode([bundle], { EVENTFLOW_PORT: port, EVENTFLOW_SQLITE_PATH: join(dir, 'bundle.db'), EVENTFLOW_LOG_LEVEL: 'warn' }, 'clients:');
    const client = createNodeClient(`ws://127.0.0.1:${port}/`);
    try {
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      expect(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).toContain('eventflow_requests_total');
      const id = await client.publish({ domain: 'orders', name: 'order-placed', pid: 'o1', data: { amount: 3 } });
      const events = await client.readEventlog('orders', 'o1');
      expect(events.map((event) => [event.id, event.data])).toEqual([[id, { amount: 3 }]]);
    } finally {
      await client.close();
      await stop(gateway.proc);
    }
  });
});
