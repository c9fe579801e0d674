/**
 * Runs the bins as a person does: as child processes, from the sources (scripts/source-loader.mjs,
 * so that a stale dist/ never answers for the code under test), with their stdout, stderr and exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const loader = join(repoRoot, 'scripts/source-loader.mjs');
export const gatewaySource = join(repoRoot, 'gateway/src/main.ts');

export interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The first line of stderr. */
  firstError: string;
}

export interface Running {
  proc: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when the process has exited. */
  exited: Promise<Exited>;
  /** Resolves once stdout contains `text` (rejects if the process exits first). */
  printed(text: string, timeoutMs?: number): Promise<void>;
}

/** Every EVENTFLOW_* variable of the test run removed, then `env` set: the child sees only what the test gives it. */
function childEnv(env: Record<string, string | number>): NodeJS.ProcessEnv {
  const result: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('EVENTFLOW_') && key !== 'NODE_OPTIONS') result[key] = value;
  for (const [key, value] of Object.entries(env)) result[key] = String(value);
  return result;
}

export function run(command: string, args: string[], env: Record<string, string | number> = {}, cwd = repoRoot, user?: { uid: number; gid: number }): Running {
  const proc = spawn(command, args, { cwd, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'], ...user });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  proc.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<Exited>((resolve) =>
    proc.once('close', (code, signal) => resolve({ code, signal, stdout: out, stderr: err, firstError: err.split('\n')[0] ?? '' })),
  );
  return {
    proc,
    stdout: () => out,
    stderr: () => err,
    exited,
    printed: (text, timeoutMs = 30_000) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${JSON.stringify(text)} within ${timeoutMs} ms\nstdout:\n${out}\nstderr:\n${err}`)), timeoutMs);
        const check = (): void => {
          if (!out.includes(text)) return;
          clearTimeout(timer);
          proc.stdout!.off('data', check);
          resolve();
        };
        proc.stdout!.on('data', check);
        check();
        void exited.then((result) => {
          clearTimeout(timer);
          if (!out.includes(text)) reject(new Error(`exited (${result.code ?? result.signal}) before printing ${JSON.stringify(text)}\nstdout:\n${out}\nstderr:\n${err}`));
        });
      }),
  };
}

/** `eventflow-gateway <args>` from the sources; as another user (`user`, when the tests run as root). */
export function gateway(args: string[], env: Record<string, string | number> = {}, user?: { uid: number; gid: number }): Running {
  return run(process.execPath, ['--import', loader, gatewaySource, ...args], env, repoRoot, user);
}

/** Runs to the end, SIGKILLing after `timeoutMs` (then `signal` is SIGKILL: the process hung). */
export async function finished(running: Running, timeoutMs = 30_000): Promise<Exited> {
  const timer = setTimeout(() => running.proc.kill('SIGKILL'), timeoutMs);
  try {
    return await running.exited;
  } finally {
    clearTimeout(timer);
  }
}
