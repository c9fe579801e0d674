/**
 * The published packages as a user installs them: `npm pack` of core, node and gateway, installed
 * from the tarballs into a temporary project outside the repository (offline: the dependencies are
 * in the npm cache after `npm ci`), then the bins by name. Also checks what each tarball carries.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { buildOnce, freePort, spawnNode, stop } from '@eventflow/test-support/gateway-process';
import { gatewayUsage } from '../../src/cli-args.js';
import { repoRoot } from './support.js';

const exec = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'eventflow-packed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const workspaces = ['packages/core', 'packages/node', 'packages/browser', 'gateway'];

describe('the packed packages', () => {
  it('carry LICENSE, engines, repository, and their bins', async () => {
    for (const workspace of workspaces) {
      const manifest = JSON.parse(readFileSync(join(repoRoot, workspace, 'package.json'), 'utf8')) as Record<string, unknown>;
      expect(manifest, workspace).toMatchObject({ license: 'MIT', engines: { node: '>=20.19' }, repository: { type: 'git', directory: workspace } });
      const { stdout } = await exec('npm', ['pack', '--dry-run', '--json', '-w', workspace], { cwd: repoRoot });
      const files = (JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0]!.files.map((file) => file.path);
      expect(files, workspace).toContain('LICENSE');
      expect(files, workspace).toContain('package.json');
      for (const bin of Object.values((manifest.bin ?? {}) as Record<string, string>)) expect(files, workspace).toContain(bin.replace(/^\.\//, ''));
    }
  });

  it('installed from their tarballs outside the repository, npx eventflow and npx eventflow-gateway run them, and the gateway serves the console', async (context) => {
    await buildOnce();
    // The console build the gateway package ships (npm run build does this).
    if (!existsSync(join(repoRoot, 'gateway/console/index.html'))) {
      await exec(process.execPath, [join(repoRoot, 'node_modules/vite/bin/vite.js'), 'build', 'packages/console', '--logLevel', 'warn'], { cwd: repoRoot, timeout: 120_000 });
      await exec(process.execPath, [join(repoRoot, 'scripts/copy-console.mjs')], { cwd: repoRoot });
    }
    const { stdout } = await exec('npm', ['pack', '--json', '--pack-destination', dir, '-w', 'packages/core', '-w', 'packages/node', '-w', 'gateway'], { cwd: repoRoot, timeout: 120_000 });
    const tarballs = (JSON.parse(stdout) as Array<{ filename: string }>).map((pack) => join(dir, pack.filename));
    const app = join(dir, 'app');
    rmSync(app, { recursive: true, force: true });
    await exec('mkdir', ['-p', app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    try {
      // --ignore-scripts: better-sqlite3's native build is not what this checks (and needs no network that way).
      await exec('npm', ['install', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', ...tarballs], { cwd: app, timeout: 150_000 });
    } catch (error) {
      const output = String((error as { stderr?: unknown }).stderr ?? error);
      if (/ENOTCACHED/.test(output)) {
        console.warn(`Skipping the install-from-tarballs check: a dependency is not in the npm cache (run npm ci once with network):\n${output}`);
        context.skip();
      }
      throw error;
    }
    const versions = (workspace: string): string => (JSON.parse(readFileSync(join(repoRoot, workspace, 'package.json'), 'utf8')) as { version: string }).version;
    expect((await exec('npx', ['--no-install', 'eventflow', '--version'], { cwd: app })).stdout).toBe(`eventflow ${versions('packages/node')}\n`);
    expect((await exec('npx', ['--no-install', 'eventflow-gateway', '--version'], { cwd: app })).stdout).toBe(`eventflow-gateway ${versions('gateway')}\n`);
    expect((await exec('npx', ['--no-install', 'eventflow-gateway', '--help'], { cwd: app })).stdout).toBe(gatewayUsage);

    // The gateway package carries its start-up bundle (its prepack makes it), which the installed bin runs.
    expect(existsSync(join(app, 'node_modules/@eventflow/gateway/bundle/main.mjs'))).toBe(true);

    // The console, from the installed package: better-sqlite3's native build is the repository's (same version).
    const installed = join(app, 'node_modules');
    cpSync(join(repoRoot, 'node_modules/better-sqlite3/build'), join(installed, 'better-sqlite3/build'), { recursive: true });
    const port = await freePort();
    const gateway = await spawnNode([join(installed, '@eventflow/gateway/bin/eventflow-gateway.js')], { EVENTFLOW_PORT: port, EVENTFLOW_SQLITE_PATH: join(dir, 'packed.db'), EVENTFLOW_LOG_LEVEL: 'warn' }, 'clients:');
    try {
      const page = await fetch(`http://127.0.0.1:${port}/`);
      const html = await page.text();
      expect(page.status).toBe(200);
      expect(html).toContain('<title>eventflow console</title>');
      const script = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
      expect(script, 'the page loads its script by a relative URL').toBeDefined();
      const asset = await fetch(`http://127.0.0.1:${port}/${script}`);
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-type')).toContain('javascript');
    } finally {
      await stop(gateway.proc);
    }
  }, 300_000);
});
