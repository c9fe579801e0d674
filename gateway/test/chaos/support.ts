/**
 * Chaos test support: the built gateway (`gateway/dist/main.js`) and worker scripts run as real
 * child processes, so they can be killed with SIGKILL. `buildOnce()` builds packages/* and gateway
 * with `tsc -b tsconfig.build.json` (retrying with --force when an incremental build is stale).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import type { EventflowClient } from '@eventflow/core';

export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
export const gatewayMain = join(repoRoot, 'gateway/dist/main.js');
export const chaosDir = fileURLToPath(new URL('./', import.meta.url));

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

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

/** Every child process started here, so afterAll can SIGKILL the ones still running. */
const children = new Set<ChildProcess>();

export function childEnv(extra: Record<string, string | number>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_OPTIONS;
  for (const [key, value] of Object.entries(extra)) env[key] = String(value);
  return env;
}

/** Spawns a node script; resolves once its stdout contains `readyText`. */
export function spawnNode(args: string[], env: Record<string, string | number>, readyText: string, timeout = 20_000): Promise<{ proc: ChildProcess; output: () => string }> {
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

export function startGatewayProcess(port: number, dbPath: string, extra: Record<string, string | number> = {}): Promise<{ proc: ChildProcess; output: () => string }> {
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

export function tempDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-chaos-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export async function eventually(check: () => boolean | Promise<boolean>, timeout: number, what: string): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await sleep(25);
  }
}

/** The stores each chaos proof runs on; the MariaDB variant skips (reason printed) when no server answers. */
export type ChaosStore = 'sqlite' | 'mysql';
export const chaosStores: Array<{ store: ChaosStore }> = [{ store: 'sqlite' }, { store: 'mysql' }];

/** Gateway environment for the MySQL/MariaDB store on the given test database. */
export function mysqlGatewayEnv(options: { host?: string; port?: number; user?: string; password?: string; database?: string }): Record<string, string | number> {
  return {
    EVENTFLOW_STORE: 'mysql',
    EVENTFLOW_MYSQL_HOST: options.host ?? '127.0.0.1',
    EVENTFLOW_MYSQL_PORT: options.port ?? 3306,
    EVENTFLOW_MYSQL_USER: options.user ?? 'root',
    EVENTFLOW_MYSQL_PASSWORD: options.password ?? '',
    EVENTFLOW_MYSQL_DATABASE: options.database ?? '',
  };
}

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
