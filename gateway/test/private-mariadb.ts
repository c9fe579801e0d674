/**
 * A private MariaDB server for tests that need a server configured differently from the shared
 * one (e.g. a global sql_mode): `mariadbd` on a free port, its data directory in a temp folder,
 * started by the test and stopped (and its folder removed) after it. `unavailable` says why none
 * can run here (mariadbd or mariadb-install-db not installed).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createConnection } from 'mysql2/promise';

const find = (name: string): string | undefined => ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/sbin'].map((dir) => join(dir, name)).find((path) => existsSync(path));
const mariadbd = find('mariadbd') ?? find('mysqld');
const installDb = find('mariadb-install-db') ?? find('mysql_install_db');

export const unavailable = mariadbd === undefined || installDb === undefined ? 'mariadbd and mariadb-install-db are not installed' : undefined;

export interface PrivateMariadb {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  /** Stops the server and removes its folder. */
  stop(): Promise<void>;
  /** Kills the server (SIGKILL: no shutdown, InnoDB recovers at the next start); `start` brings it back, same port and data. */
  kill(): Promise<void>;
  /** Starts the killed server again; resolves once it answers queries. */
  start(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Starts a server with `args` (e.g. `--sql-mode=…`); resolves once it answers queries. */
export async function startPrivateMariadb(args: readonly string[] = [], timeoutMs = 60_000): Promise<PrivateMariadb> {
  if (unavailable !== undefined || mariadbd === undefined || installDb === undefined) throw new Error(unavailable);
  const daemon = mariadbd;
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-mariadb-'));
  const datadir = join(dir, 'data');
  // A temporary directory of its own: a server starting removes the temporary tables it finds in its tmpdir (/tmp by
  // default), other servers' included, and failed a private server being installed at the same time (another file).
  const temporary = join(dir, 'tmp');
  mkdirSync(temporary);
  const install = spawnSync(installDb, ['--no-defaults', `--datadir=${datadir}`, `--tmpdir=${temporary}`, '--auth-root-authentication-method=normal', '--skip-test-db'], { encoding: 'utf8' });
  if (install.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`mariadb-install-db failed: ${install.stderr || install.stdout}`);
  }
  const port = await freePort();
  const options = { host: '127.0.0.1', port, user: 'root', password: '' };
  let server: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const launch = async (): Promise<void> => {
    const started: ChildProcess = spawn(
      daemon,
      [
        '--no-defaults',
        `--datadir=${datadir}`,
        `--tmpdir=${temporary}`,
        `--port=${port}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(dir, 'mariadb.sock')}`,
        `--pid-file=${join(dir, 'mariadb.pid')}`,
        `--log-error=${join(dir, 'error.log')}`,
        '--user=root',
        '--skip-log-bin',
        '--innodb-buffer-pool-size=16M',
        '--innodb-log-file-size=16M',
        ...args,
      ],
      { stdio: 'ignore' },
    );
    server = started;
    exited = new Promise<void>((resolve) => started.once('exit', () => resolve()));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const connection = await createConnection({ ...options, connectTimeout: 2_000 });
        await connection.end();
        return;
      } catch (error) {
        if (started.exitCode !== null || Date.now() > deadline) throw new Error(`the private mariadbd did not start: ${String(error)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };
  const halt = async (signal: NodeJS.Signals): Promise<void> => {
    if (server !== undefined && server.exitCode === null && server.signalCode === null) server.kill(signal);
    await exited;
  };
  const stop = async (): Promise<void> => {
    await halt('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await launch();
  } catch (error) {
    await stop();
    throw error;
  }
  return { ...options, stop, kill: () => halt('SIGKILL'), start: launch };
}
