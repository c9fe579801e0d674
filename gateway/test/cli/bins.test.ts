/**
 * The bins by name, as a new user runs them: `npx --no-install eventflow` and `npx --no-install eventflow-gateway` from the
 * repository (linked by npm to the committed shims in packages/node/bin and gateway/bin, which run
 * dist/ when built and the sources otherwise), --help, --version, and usage errors (exit 2).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gatewayUsage, hubUsage } from '../../src/cli-args.js';
import { usage as cliUsage } from '@eventflow/node/commands';
import { finished, gateway, repoRoot, run } from './support.js';

const version = (path: string): string => (JSON.parse(readFileSync(join(repoRoot, path), 'utf8')) as { version: string }).version;

describe('npx from the repository runs our own bins', () => {
  it('npx --no-install eventflow --help prints the CLI usage', async () => {
    const result = await finished(run('npx', ['--no-install', 'eventflow', '--help']));
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toBe(cliUsage);
  });

  it('npx --no-install eventflow-gateway --help prints the gateway usage (and starts nothing)', async () => {
    const result = await finished(run('npx', ['--no-install', 'eventflow-gateway', '--help']));
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toBe(gatewayUsage);
  });

  it('the linked bins are the committed shims, not files in dist/', () => {
    for (const [bin, target] of [
      ['eventflow', 'packages/node/bin/eventflow.js'],
      ['eventflow-gateway', 'gateway/bin/eventflow-gateway.js'],
    ] as const) {
      expect(readFileSync(join(repoRoot, 'node_modules/.bin', bin), 'utf8')).toBe(readFileSync(join(repoRoot, target), 'utf8'));
    }
  });
});

describe('eventflow-gateway flags', () => {
  it('--version and -v print the package version', async () => {
    for (const flag of ['--version', '-v']) {
      const result = await finished(gateway([flag]));
      expect(result).toMatchObject({ code: 0, stdout: `eventflow-gateway ${version('gateway/package.json')}\n`, stderr: '' });
    }
  });

  it('hub --help prints the hub usage', async () => {
    expect(await finished(gateway(['hub', '--help']))).toMatchObject({ code: 0, stdout: hubUsage, stderr: '' });
  });

  it.each([[['--bogus']], [['--port', '80']], [['serve']], [['hub', '--bogus']], [['hub', 'extra']]])('%j is a usage error: exit 2, the problem, the usage', async (args) => {
    const result = await finished(gateway(args));
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.firstError).toMatch(/^eventflow-gateway: (unknown option|unknown command|unexpected argument)/);
    expect(result.stderr).toContain(args[0] === 'hub' ? hubUsage : gatewayUsage);
  });

  it.each([
    [['--port', '9000'], 'unknown option --port: the gateway takes its settings from EVENTFLOW_* variables, not options (gateway/README.md › Configuration); e.g. EVENTFLOW_PORT=9000 eventflow-gateway'],
    [['--sqlite-path=/tmp/x.db'], 'unknown option --sqlite-path: the gateway takes its settings from EVENTFLOW_* variables, not options (gateway/README.md › Configuration); e.g. EVENTFLOW_SQLITE_PATH=/tmp/x.db eventflow-gateway'],
    [['--url', 'ws://x/'], 'unknown option --url: the gateway takes its settings from EVENTFLOW_* variables, not options (gateway/README.md › Configuration)'],
    [['hub', '--port'], 'unknown option --port: the hub takes its settings from EVENTFLOW_* variables, not options (gateway/README.md › Configuration)'],
  ])('%j: names the variable to set instead (exit 2)', async (args, line) => {
    // Before: "Unknown option '--port'. To specify a positional argument starting with a '-', place it at the end of the
    // command after '--', as in '-- "--port"': parseArgs's advice, for positionals, which the gateway has none of.
    const result = await finished(gateway(args));
    expect(result).toMatchObject({ code: 2, firstError: `eventflow-gateway: ${line}` });
  });

  it('eventflow --version prints the package version', async () => {
    const result = await finished(run(process.execPath, [join(repoRoot, 'packages/node/bin/eventflow.js'), '--version']));
    expect(result).toMatchObject({ code: 0, stdout: `eventflow ${version('packages/node/package.json')}\n` });
  });
});
