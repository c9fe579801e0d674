/**
 * NATS for tests. The shared server (127.0.0.1:4222 unless EVENTFLOW_TEST_NATS_URL says otherwise)
 * serves tests that only publish and subscribe, each on a subject prefix of its own
 * (`uniqueSubjectPrefix`); a test that stops and restarts NATS starts a private `nats-server` on a
 * free port (`startPrivateNats`), stops it and removes its folder. `natsUnavailable` and
 * `natsServerUnavailable` say why either cannot run here; the tests skip with that reason printed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './gateway-process.js';

export const natsUrl = process.env.EVENTFLOW_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

const natsServer = ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/sbin'].map((dir) => join(dir, 'nats-server')).find((path) => existsSync(path));

/** Resolves once something accepts TCP connections at host:port (NATS speaks first: INFO). */
function reachable(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('data', (chunk: Buffer) => done(chunk.toString('latin1').startsWith('INFO ')));
    socket.once('error', () => done(false));
  });
}

const shared = new URL(natsUrl.replace(/^nats:/, 'http:'));
/** Why the tests on the shared NATS cannot run, or undefined when they can. */
export const natsUnavailable = (await reachable(shared.hostname, Number(shared.port || 4222), 3_000)) ? undefined : `no NATS server answers at ${natsUrl}; set EVENTFLOW_TEST_NATS_URL to run the NATS tests`;
if (natsUnavailable !== undefined) console.warn(`Skipping the NATS tests: ${natsUnavailable}`);

/** Why no private nats-server can be started here, or undefined. */
export const natsServerUnavailable = natsServer === undefined ? 'nats-server is not installed (looked in /usr/sbin, /usr/bin, /usr/local/bin, /usr/local/sbin)' : undefined;

/** A subject prefix no other test uses (EVENTFLOW_NATS_SUBJECT_PREFIX). */
export function uniqueSubjectPrefix(): string {
  return `eventflow-test.${randomBytes(6).toString('hex')}`;
}

export interface PrivateNats {
  readonly url: string;
  readonly port: number;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s); `start` brings it back on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops it for good and removes its folder. */
  dispose(): Promise<void>;
}

/** Starts a private nats-server on a free port; resolves once it accepts connections. */
export async function startPrivateNats(timeoutMs = 10_000): Promise<PrivateNats> {
  if (natsServer === undefined) throw new Error(natsServerUnavailable);
  const server = natsServer;
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-nats-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  let output = '';

  const start = async (): Promise<void> => {
    if (child) return;
    output = '';
    const started = spawn(server, ['-a', '127.0.0.1', '-p', String(port), '-sd', join(dir, 'store'), '-P', join(dir, 'nats.pid')], { stdio: ['ignore', 'pipe', 'pipe'] });
    started.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    started.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child = started;
    started.once('exit', () => {
      if (child === started) child = undefined;
    });
    const deadline = Date.now() + timeoutMs;
    while (!(await reachable('127.0.0.1', port, 500))) {
      if (child !== started) throw new Error(`nats-server exited at start: ${output}`);
      if (Date.now() > deadline) throw new Error(`nats-server did not accept connections within ${timeoutMs} ms: ${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  const stop = async (): Promise<void> => {
    const running = child;
    if (!running) return;
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill('SIGTERM');
    const killer = setTimeout(() => running.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(killer);
  };

  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    stop,
    start,
    async dispose() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
