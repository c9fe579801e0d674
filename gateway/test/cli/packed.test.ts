/**
 * The packages as a user installs them (README, "Using the packages in your own project"): `npm run
 * pack` (scripts/pack.mjs) makes the tarballs, installed into a temporary project outside the
 * repository (registry dependencies from npm's cache where `npm ci` put them, else from the registry), then the bins from
 * node_modules/.bin, a gateway with tokens and the CLI authenticated. Also checks what each tarball carries.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { buildOnce, freePort, spawnNode, stop } from '@eventflow/test-support/gateway-process';
import { usage as cliUsage } from '@eventflow/node/commands';
import { gatewayUsage } from '../../src/cli-args.js';
import { repoRoot } from './support.js';

const exec = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'eventflow-packed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const workspaces = ['packages/core', 'packages/node', 'packages/browser', 'gateway'];
const versions = (workspace: string): string => (JSON.parse(readFileSync(join(repoRoot, workspace, 'package.json'), 'utf8')) as { version: string }).version;

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

  it('made by npm run pack and installed from their tarballs outside the repository as the README says: the bins run from node_modules/.bin, their typings resolve under node10 and node16, the gateway starts with jwt, the CLI mints a token and is let in with it, the console is served', async (context) => {
    await buildOnce();
    // The README's step: `npm run pack` (scripts/pack.mjs) builds what the packages carry and packs them.
    const packed = join(dir, 'packed');
    const { stdout: packOutput } = await exec(process.execPath, [join(repoRoot, 'scripts/pack.mjs'), '--out', packed], { cwd: repoRoot, timeout: 240_000 });
    const tarball = (name: string): string => join(packed, `eventflow-${name}-${versions(name === 'gateway' ? 'gateway' : `packages/${name}`)}.tgz`);
    // The build says what it does and how long each step took (scripts/build-if-stale.mjs, as npm start runs it).
    expect(packOutput).toMatch(/^build: TypeScript \(tsc -b: packages\/\*\/dist, gateway\/dist\) \(.+\) …$/m);
    expect(packOutput).toMatch(/^build: TypeScript \(tsc -b: packages\/\*\/dist, gateway\/dist\): done in \d+\.\d s$/m);
    // Each printed install line names core's tarball beside the package's, so npm never asks the registry for @eventflow/core.
    expect(packOutput).toContain(`npm install ${tarball('core')} ${tarball('node')} `);
    expect(packOutput).toContain(`npm install ${tarball('core')} ${tarball('gateway')} `);
    const app = join(dir, 'app');
    rmSync(app, { recursive: true, force: true });
    await exec('mkdir', ['-p', app]);
    // The README's advice for such a project: the nuid override (a clean install on Node 20) and better-sqlite3's script allowed.
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module', overrides: { '@nats-io/nuid': '2.0.3' }, allowScripts: { 'better-sqlite3': true } }));
    let installed: { stderr: string };
    try {
      // --ignore-scripts: better-sqlite3's native build is not what this checks (and needs no network that way).
      // --prefer-offline: the registry dependencies from npm's cache where it has them (npm ci filled it), else from the registry.
      installed = await exec('npm', ['install', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', ...['core', 'node', 'browser', 'gateway'].map(tarball)], { cwd: app, timeout: 200_000 });
    } catch (error) {
      const output = String((error as { stderr?: unknown }).stderr ?? error);
      if (/ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH/.test(output)) {
        console.warn(`Skipping the install-from-tarballs check: the npm registry is not reachable from here, and a dependency is not in npm's cache:\n${output}`);
        context.skip();
      }
      throw error;
    }
    expect(installed.stderr).not.toContain('EBADENGINE');
    const bin = (name: string): string => join(app, 'node_modules/.bin', name);
    expect((await exec(bin('eventflow'), ['--help'], { cwd: app })).stdout).toBe(cliUsage);
    expect((await exec(bin('eventflow'), ['--version'], { cwd: app })).stdout).toBe(`eventflow ${versions('packages/node')}\n`);
    expect((await exec('npx', ['--no-install', 'eventflow-gateway', '--version'], { cwd: app })).stdout).toBe(`eventflow-gateway ${versions('gateway')}\n`);
    expect((await exec(bin('eventflow-gateway'), ['--help'], { cwd: app })).stdout).toBe(gatewayUsage);

    // Typings of every entry point, subpaths included, for TypeScript users on each resolution: node10 reads
    // the top-level "types" and "typesVersions", node16 the "exports".
    writeFileSync(
      join(app, 'check.ts'),
      [
        "import { createClient, type EventMap } from '@eventflow/core';",
        "import { operations } from '@eventflow/core/protocol';",
        "import { createNodeClient, routeConsumers } from '@eventflow/node';",
        "import { runCli } from '@eventflow/node/commands';",
        "import { createBrowserClient } from '@eventflow/browser';",
        "import { useEventlogState } from '@eventflow/browser/react';",
        "import { createOutbox } from '@eventflow/browser/outbox';",
        "import { consuming } from '@eventflow/browser/work';",
        "import { startGateway } from '@eventflow/gateway';",
        "type Events = { orders: { placed: { sku: string } } } & EventMap;",
        "export const client = createNodeClient<Events>('ws://127.0.0.1:8080/');",
        "export const known: boolean = 'publish' in operations;",
        'export { createClient, routeConsumers, runCli, createBrowserClient, useEventlogState, createOutbox, consuming, startGateway };',
      ].join('\n'),
    );
    for (const [resolution, module] of [['node10', 'esnext'], ['node16', 'node16']] as const) {
      const tsc = ['--noEmit', '--strict', '--skipLibCheck', '--moduleResolution', resolution, '--module', module, '--target', 'es2022', '--types', 'node', '--typeRoots', join(repoRoot, 'node_modules/@types'), 'check.ts'];
      const checked = await exec(process.execPath, [join(repoRoot, 'node_modules/typescript/bin/tsc'), ...tsc], { cwd: app }).catch((error: { stdout: string }) => ({ stdout: error.stdout }));
      expect(checked.stdout, `moduleResolution ${resolution}`).toBe('');
    }

    // The gateway package carries its start-up bundle (its prepack makes it), which the installed bin runs.
    expect(existsSync(join(app, 'node_modules/@eventflow/gateway/bundle/main.mjs'))).toBe(true);

    // The gateway from the installed bin, with tokens: better-sqlite3's native build is the repository's (same version).
    cpSync(join(repoRoot, 'node_modules/better-sqlite3/build'), join(app, 'node_modules/better-sqlite3/build'), { recursive: true });
    const port = await freePort();
    const secret = 'packed-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
    const gateway = await spawnNode(
      [bin('eventflow-gateway')],
      { EVENTFLOW_PORT: port, EVENTFLOW_SQLITE_PATH: join(dir, 'packed.db'), EVENTFLOW_LOG_LEVEL: 'warn', EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: secret },
      'clients:',
    );
    try {
      const url = `ws://127.0.0.1:${port}/`;
      const cli = (args: string[], env: Record<string, string> = {}) =>
        exec(bin('eventflow'), [...args, '--url', url], { cwd: app, env: { ...process.env, ...env } }).then(
          ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
          (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
        );
      const refused = await cli(['state', 'orders', 'o1']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^E_EVENTFLOW_UNAUTHORIZED: .*pass --token or set EVENTFLOW_TOKEN/);
      const token = (await cli(['token', '--sub', 'ops', '--allow', 'orders:publish,read'], { EVENTFLOW_JWT_SECRET: secret })).stdout.trim();
      expect(await cli(['publish', 'orders', 'placed', 'o1', '{"amount":3}'], { EVENTFLOW_TOKEN: token })).toMatchObject({ code: 0 });
      expect(await cli(['state', '--token', token, 'orders', 'o1'])).toMatchObject({ code: 0, stdout: '{"amount":3}\n' });

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
