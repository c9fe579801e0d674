/**
 * The gateway's start-up bundle (scripts/bundle-gateway.mjs → gateway/bundle/main.cjs, what the bin
 * runs once built): it starts on the embedded store, serves HTTP, takes WebSocket clients, stores and
 * reads events, and finds the files it ships beside its code (package.json for --version), although
 * its modules sit at another depth than in dist/. V8's code cache beside it (gateway/bin/run-bundle.js)
 * is made by a first run, replaced by a run that compiled more, and ignored when it does not match.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeClient } from '@eventflow/node';
import { buildOnce, freePort, spawnNode, stop } from '@eventflow/test-support/gateway-process';
import { repoRoot } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-bundle-'));
const bundle = join(repoRoot, 'gateway/bundle/main.cjs');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeAll(async () => {
  await buildOnce();
  execFileSync(process.execPath, [join(repoRoot, 'scripts/bundle-gateway.mjs'), '--if-stale'], { cwd: repoRoot, timeout: 120_000, stdio: 'pipe' });
}, 240_000);

describe('the gateway bundle', () => {
  it('--version reads the package version from the bundle', () => {
    const version = (JSON.parse(readFileSync(join(repoRoot, 'gateway/package.json'), 'utf8')) as { version: string }).version;
    expect(execFileSync(process.execPath, [bundle, '--version'], { encoding: 'utf8' })).toBe(`eventflow-gateway ${version}\n`);
    // bundle/main.mjs runs the same build, for `node gateway/bundle/main.mjs`.
    expect(execFileSync(process.execPath, [join(repoRoot, 'gateway/bundle/main.mjs'), '--version'], { encoding: 'utf8' })).toBe(`eventflow-gateway ${version}\n`);
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

  it("keeps V8's code cache beside the bundle: a --version run's is replaced by a gateway run's, and one that does not match is ignored and replaced", async () => {
    const build = /join\(__dirname, '([^']+)', 'main\.cjs'\)/.exec(readFileSync(bundle, 'utf8'))?.[1];
    const cache = join(repoRoot, 'gateway/bundle', build ?? 'missing', 'main.cjs.cache');
    const startAndStop = async (name: string): Promise<void> => {
      const port = await freePort();
      const gateway = await spawnNode([bundle], { EVENTFLOW_PORT: port, EVENTFLOW_SQLITE_PATH: join(dir, `${name}.db`), EVENTFLOW_LOG_LEVEL: 'warn' }, 'clients:');
      try {
        expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      } finally {
        await stop(gateway.proc);
      }
    };
    rmSync(cache, { force: true });
    execFileSync(process.execPath, [bundle, '--version']);
    const small = statSync(cache).size;
    await startAndStop('cache-first');
    expect(statSync(cache).size).toBeGreaterThan(small * 1.1);
    writeFileSync(cache, 'not a code cache');
    await startAndStop('cache-rejected');
    expect(statSync(cache).size).toBeGreaterThan(small);
  });
});
