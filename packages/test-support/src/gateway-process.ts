/**
 * Gateways (and other node scripts) as real child processes, so they can be killed with SIGKILL:
 * the built gateway (`gateway/dist/main.js`), built once per run by `buildOnce()` (`tsc -b
 * tsconfig.build.json`, retrying with --force when an incremental build is stale). Every child
 * started here is SIGKILLed by `killAllChildren()`.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from './wait.js';

export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
export const gatewayMain = join(repoRoot, 'gateway/dist/main.js');

/**
 * Builds under a lock directory, so that test files running in parallel workers do not write the
 * same dist files at once (the second build finds everything up to date and writes nothing).
 */
export async function buildOnce(): Promise<void> {
  const lock = join(tmpdir(), 'eventflow-chaos-build.lock');
  const deadline = Date.now() + 100_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // A lock left by a killed run: older than any build can take.
      if (Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > 150_000) rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`build lock ${lock} still held`);
      // Polling a lock held by another process: nothing to fence on.
      await sleep(100);
    }
  }
  try {
    const tsc = join(repoRoot, 'node_modules/typescript/bin/tsc');
    try {
      execFileSync(process.execPath, [tsc, '-b', 'tsconfig.build.json'], { cwd: repoRoot, timeout: 120_000, stdio: 'pipe' });
    } catch {
      // An incremental build whose state no longer matches dist: build everything.
      execFileSync(process.execPath, [tsc, '-b', 'tsconfig.build.json', '--force'], { cwd: repoRoot, timeout: 120_000, stdio: 'pipe' });
    }
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Every child process started here, so killAllChildren() can SIGKILL the ones still running. */
const children = new Set<ChildProcess>();

export function childEnv(extra: Record<string, string | number>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_OPTIONS;
  for (const [key, value] of Object.entries(extra)) env[key] = String(value);
  return env;
}

export interface SpawnedProcess {
  proc: ChildProcess;
  /** Its stdout and stderr so far, for failure messages. */
  output: () => string;
}

/** Spawns a node script; resolves once its stdout contains `readyText`. */
export function spawnNode(args: string[], env: Record<string, string | number>, readyText: string, timeout = 20_000): Promise<SpawnedProcess> {
  const proc = spawn(process.execPath, args, { cwd: repoRoot, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  let out = '';
  let err = '';
  proc.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  proc.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const output = (): string => `stdout:\n${out}\nstderr:\n${err}`;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} not ready within ${timeout} ms\n${output()}`)), timeout);
    const check = (): void => {
      if (out.includes(readyText)) {
        clearTimeout(timer);
        proc.stdout!.off('data', check);
        resolve({ proc, output });
      }
    };
    proc.stdout!.on('data', check);
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${args.join(' ')} exited (${code ?? signal}) before it was ready\n${output()}`));
    });
  });
}

/**
 * Spawns the built gateway on `port` with the SQLite file `dbPath` (unless `extra` picks another
 * store), without publish-rate or in-flight limits; resolves once it listens.
 */
export function startGatewayProcess(port: number, dbPath: string, extra: Record<string, string | number> = {}): Promise<SpawnedProcess> {
  return spawnNode(
    [gatewayMain],
    {
      EVENTFLOW_PORT: port,
      EVENTFLOW_SQLITE_PATH: dbPath,
      EVENTFLOW_LOG_LEVEL: 'warn',
      EVENTFLOW_MAX_PUBLISH_RATE: 0,
      EVENTFLOW_MAX_IN_FLIGHT: 100_000,
      ...extra,
    },
    'clients:',
  );
}

/** SIGKILLs the process and resolves once it has exited. */
export function kill9(proc: ChildProcess): Promise<void> {
  return stop(proc, 'SIGKILL');
}

/** Sends `signal` and resolves once the process has exited (SIGKILL after `timeout` ms). */
export function stop(proc: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', timeout = 5_000): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeout);
    proc.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    proc.kill(signal);
  });
}

export async function killAllChildren(): Promise<void> {
  await Promise.all([...children].map((proc) => kill9(proc)));
}
