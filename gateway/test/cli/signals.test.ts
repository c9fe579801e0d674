/**
 * How the gateway's process takes a stop signal (shutdown.ts), and that `npm start` delivers it to
 * the gateway at all. npm forwards SIGTERM / SIGINT to its script's process: without `exec` that was
 * the `sh -c` in between, which died and left the gateway running (holding its port and its store's
 * lock, and never handing its running work on); with `exec` the gateway gets it, and under a terminal
 * it gets Ctrl-C twice (from the terminal and from npm), which must still be one graceful stop.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { finished, repoRoot, run } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-signals-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const loader = join(repoRoot, 'scripts/source-loader.mjs');

/** A process whose stop (stopOnSignals('probe')) takes `stopMs`; it prints `ready` once its handlers are in. */
function probe(stopMs: number) {
  const shutdown = pathToFileURL(join(repoRoot, 'gateway/src/shutdown.ts')).href;
  const code = `const { stopOnSignals } = await import(${JSON.stringify(shutdown)});
const signals = stopOnSignals('probe');
signals.stopWith(() => new Promise((resolve) => setTimeout(resolve, ${stopMs})));
setInterval(() => undefined, 1000);
console.log('ready');`;
  return run(process.execPath, ['--import', loader, '--input-type=module', '-e', code]);
}

describe('stop signals', () => {
  it('the same signal again within a second of the first (Ctrl-C from the terminal and from npm) is one stop: it finishes and exits 0', async () => {
    const running = probe(1_500);
    await running.printed('ready');
    running.proc.kill('SIGINT');
    await running.printed('SIGINT: stopping probe');
    running.proc.kill('SIGINT');
    running.proc.kill('SIGTERM');
    const result = await finished(running);
    expect(result.stderr).not.toContain('again');
    expect({ code: result.code, signal: result.signal }).toEqual({ code: 0, signal: null });
  });

  it('a second signal later during the stop exits 1 at once', async () => {
    const running = probe(60_000);
    await running.printed('ready');
    running.proc.kill('SIGTERM');
    await running.printed('SIGTERM: stopping probe');
    const at = performance.now();
    // Past the repeat window, measured on the test's clock after the probe took the first one.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    running.proc.kill('SIGINT');
    const result = await finished(running, 10_000);
    expect(performance.now() - at).toBeLessThan(10_000);
    expect(result.stderr).toContain('SIGINT again: exiting without finishing the stop of probe');
    expect(result.code).toBe(1);
  });

  it("npm start's gateway is the process npm signals: SIGTERM to its script's process stops the gateway gracefully", async () => {
    const start = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    // The script's last command, as npm runs it (sh -c); the build before it is not what is tested.
    const serve = start.split('&&').at(-1)!.trim();
    const child = spawn('sh', ['-c', serve], {
      cwd: repoRoot,
      // Its own process group: whatever the shell leaves behind is killed with it below.
      detached: true,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, EVENTFLOW_PORT: '0', EVENTFLOW_SQLITE_PATH: join(dir, 'start.db'), EVENTFLOW_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // Also when the test times out: a gateway left behind keeps its port and its store's lock.
    onTestFinished(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // The group is gone: nothing was left behind.
      }
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', () => undefined);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
    await new Promise<void>((resolve, reject) => {
      // The bin runs the bundle, else dist/, else the sources (a clean clone before its build): slower.
      const timer = setTimeout(() => reject(new Error(`no banner within 40 s:\n${out}`)), 40_000);
      const check = (): void => {
        if (!out.includes('  clients:')) return;
        clearTimeout(timer);
        resolve();
      };
      child.stdout.on('data', check);
      void exited.then(() => reject(new Error(`exited before its banner:\n${out}`)));
    });
    child.kill('SIGTERM');
    const result = await Promise.race([exited, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 10_000))]);
    expect(result).toEqual({ code: 0, signal: null });
    expect(out).toContain('SIGTERM: stopping gateway');
  }, 60_000);
});
