// A fresh MariaDB database and a v4-compatible hub (`node gateway/dist/main.js hub`) in its own
// process, for benches that run the gateway as a spoke of a hub mesh (EVENTFLOW_STORE=mysql,
// EVENTFLOW_ROUTER=hubs), started only through the built bin, as an operator would.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const gatewayMain = join(root, 'gateway/dist/main.js');

export const mysqlServer = {
  host: process.env.EVENTFLOW_TEST_MYSQL_HOST ?? '127.0.0.1',
  port: Number(process.env.EVENTFLOW_TEST_MYSQL_PORT ?? 3306),
  user: process.env.EVENTFLOW_TEST_MYSQL_USER ?? 'root',
  password: process.env.EVENTFLOW_TEST_MYSQL_PASSWORD ?? '',
};

/** Why MariaDB runs cannot happen here, or undefined when they can. */
export async function mariadbUnavailable() {
  try {
    const connection = await mysql.createConnection({ ...mysqlServer, connectTimeout: 3000 });
    await connection.end();
    return undefined;
  } catch (error) {
    return `no MariaDB/MySQL server at ${mysqlServer.host}:${mysqlServer.port} (${error?.code ?? error}); set EVENTFLOW_TEST_MYSQL_*`;
  }
}

/** Creates a fresh database; resolves with its name, the gateway/hub environment for it, and drop(). */
export async function freshDatabase(prefix = 'eventflow_bench') {
  const database = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = await mysql.createConnection(mysqlServer);
  await admin.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
  return {
    database,
    env: {
      EVENTFLOW_MYSQL_HOST: mysqlServer.host,
      EVENTFLOW_MYSQL_PORT: mysqlServer.port,
      EVENTFLOW_MYSQL_USER: mysqlServer.user,
      EVENTFLOW_MYSQL_PASSWORD: mysqlServer.password,
      EVENTFLOW_MYSQL_DATABASE: database,
    },
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS \`${database}\``).catch(() => {});
      await admin.end().catch(() => {});
    },
  };
}

/**
 * The certificate settings every hub and gateway of one bench mesh shares. The PBKDF2 iteration
 * count only costs time when a key is sealed or opened (start-up, the first TLS handshake of an
 * identity), never on the measured path; 1,000 keeps start-up short, as the tests do.
 */
export const CERT_ENV = { EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: 'bench-master-key', EVENTFLOW_CERT_PASS_PBKDF2_ITERATIONS: 1000 };

/** Spawns `node gateway/dist/main.js hub` on a free port of 127.0.0.1; resolves once it printed its `listening:` line. */
export function startHubProcess(dbEnv, timeoutMs = 30_000) {
  const env = { ...process.env, ...stringify(dbEnv), ...stringify(CERT_ENV), EVENTFLOW_HUB_INTERNAL_IP: '127.0.0.1', EVENTFLOW_HUB_INTERNAL_PORT: '0', EVENTFLOW_HUB_EXTERNAL_IP: '127.0.0.1', EVENTFLOW_LOG_LEVEL: 'warn' };
  delete env.NODE_OPTIONS;
  const execArgv = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...execArgv, gatewayMain, 'hub'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk) => (out += chunk));
  child.stderr.on('data', (chunk) => (err += chunk));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    // SIGTERM: the hub marks its row quit and exits (and --cpu-prof writes its profile).
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`hub not listening within ${timeoutMs} ms\nstdout: ${out}\nstderr: ${err}`));
    }, timeoutMs);
    const check = () => {
      const match = /listening:\s+[\d.]+:(\d+)/.exec(out);
      if (!match) return;
      clearTimeout(timer);
      child.stdout.off('data', check);
      resolve({ port: Number(match[1]), pid: child.pid, stop, output: () => `stdout: ${out}\nstderr: ${err}` });
    };
    child.stdout.on('data', check);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`hub exited (${code ?? signal}) before listening\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}

const stringify = (env) => Object.fromEntries(Object.entries(env).map(([key, value]) => [key, String(value)]));
