#!/usr/bin/env node
// bench publish-throughput: durable publish throughput from ONE pipelined client
// (createNodeClient, @eventflow/node dist) to a gateway started in-process (gateway/dist), on a
// temporary SQLite file (windows of 200 and 500 publishes in flight) and on MariaDB
// (EVENTFLOW_STORE=mysql, a fresh database per window, dropped after; windows of 50, as v4's
// 1.9k events/s was measured, and 200). ~256 bytes of data per event. Reports events/s and
// p50/p99 ack latency (publish call → durable ack). Each window is bounded in time (a window that
// runs out of time reports what it completed), so the whole script stays well under 90 s.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { createNodeClient } from '@eventflow/node';
import { startGateway } from '../gateway/dist/index.js';
import { printEnvironment, writeResult } from './results.mjs';

const N = Number(process.env.BENCH_PUBLISH_EVENTS ?? 20_000);
const N_MARIADB = Number(process.env.BENCH_PUBLISH_EVENTS_MARIADB ?? 10_000);
const WINDOWS = [200, 500];
const MARIADB_WINDOWS = [50, 200];
const WINDOW_BUDGET_MS = 15_000;
const MARIADB_BUDGET_MS = 12_000;
const TARGET = 20_000;
/** eventflow v4 on MariaDB, 50 publishes in flight (the benchmark issue); the target is 3× that. */
const V4_MARIADB = 1_900;
const TARGET_MARIADB = 3 * V4_MARIADB;
const server = {
  host: process.env.EVENTFLOW_TEST_MYSQL_HOST ?? '127.0.0.1',
  port: Number(process.env.EVENTFLOW_TEST_MYSQL_PORT ?? 3306),
  user: process.env.EVENTFLOW_TEST_MYSQL_USER ?? 'root',
  password: process.env.EVENTFLOW_TEST_MYSQL_PASSWORD ?? '',
};
printEnvironment('publish-throughput');

const payload = "x".repeat(230);
const dataFor = (i) => ({ seq: i, payload }); // JSON ≈ 256 bytes
const dataBytes = JSON.stringify(dataFor(12345)).length;

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

/** A gateway on a fresh store: a temp SQLite file, or a fresh MariaDB database. Returns it with its clean-up. */
async function startOn(store) {
  const common = { EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0, EVENTFLOW_MAX_IN_FLIGHT: 100_000,
    // EVENTFLOW_METRICS=off in the environment measures the gateway without its metrics.
    EVENTFLOW_METRICS: process.env.EVENTFLOW_METRICS ?? 'on' };
  if (store === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'eventflow-bench-'));
    const gateway = await startGateway({ ...common, EVENTFLOW_SQLITE_PATH: join(dir, 'bench.db') });
    return { gateway, cleanUp: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const database = `eventflow_bench_${randomBytes(5).toString('hex')}`;
  const admin = await mysql.createConnection(server);
  await admin.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
  const cleanUp = async () => {
    await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
    await admin.end();
  };
  try {
    const gateway = await startGateway({
      ...common,
      EVENTFLOW_STORE: 'mysql',
      EVENTFLOW_MYSQL_HOST: server.host,
      EVENTFLOW_MYSQL_PORT: server.port,
      EVENTFLOW_MYSQL_USER: server.user,
      EVENTFLOW_MYSQL_PASSWORD: server.password,
      EVENTFLOW_MYSQL_DATABASE: database,
    });
    return { gateway, cleanUp };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

async function runWindow(store, inFlight, N, budgetMs) {
  const { gateway, cleanUp } = await startOn(store);
  const client = createNodeClient(gateway.url, { clientName: 'bench', requestTimeout: 60_000 });
  try {
    // Warm-up: connection, handshake, prepared statements, JIT.
    const warm = [];
    for (let i = 0; i < 500; i++) warm.push(client.publish({ domain: 'bench', name: 'warmup', pid: `w${i % 50}`, data: dataFor(i) }));
    await Promise.all(warm);

    const latencies = new Float64Array(N);
    let next = 0;
    let done = 0;
    let errors = 0;
    let firstError;
    const deadline = performance.now() + budgetMs;
    const t0 = performance.now();
    async function lane() {
      while (next < N && performance.now() < deadline) {
        const i = next++;
        const start = performance.now();
        try {
          await client.publish({ domain: 'bench', name: 'created', pid: `p${i % 1000}`, data: dataFor(i) });
          latencies[done++] = performance.now() - start;
        } catch (error) {
          errors++;
          firstError ??= error;
        }
      }
    }
    await Promise.all(Array.from({ length: inFlight }, lane));
    const elapsed = performance.now() - t0;
    const sorted = Array.from(latencies.subarray(0, done)).sort((a, b) => a - b);
    return {
      store,
      inFlight,
      events: done,
      errors,
      firstError: firstError ? String(firstError?.code ?? firstError?.message ?? firstError) : undefined,
      timedOut: done + errors < N,
      budgetSeconds: budgetMs / 1000,
      seconds: +(elapsed / 1000).toFixed(3),
      eventsPerSecond: Math.round(done / (elapsed / 1000)),
      p50Ms: +percentile(sorted, 50).toFixed(2),
      p99Ms: +percentile(sorted, 99).toFixed(2),
      maxMs: +(sorted.at(-1) ?? NaN).toFixed(2),
    };
  } finally {
    await client.close().catch(() => {});
    await gateway.close().catch(() => {});
    await cleanUp().catch(() => {});
  }
}

/** Why the MariaDB runs cannot happen here, or undefined when they can. */
async function mariadbUnavailable() {
  try {
    const connection = await mysql.createConnection({ ...server, connectTimeout: 3000 });
    await connection.end();
    return undefined;
  } catch (error) {
    return `no MariaDB/MySQL server at ${server.host}:${server.port} (${error?.code ?? error}); set EVENTFLOW_TEST_MYSQL_*`;
  }
}

const runs = [];
for (const inFlight of WINDOWS) runs.push(await runWindow('sqlite', inFlight, N, WINDOW_BUDGET_MS));
const skipMariadb = await mariadbUnavailable();
if (skipMariadb === undefined) for (const inFlight of MARIADB_WINDOWS) runs.push(await runWindow('mysql', inFlight, N_MARIADB, MARIADB_BUDGET_MS));
else console.log(`skipping the MariaDB runs: ${skipMariadb}`);
const embedded = runs.filter((r) => r.store === 'sqlite');
const mariadb = runs.filter((r) => r.store === 'mysql');

console.log(`events per window: ${N} (SQLite), ${N_MARIADB} (MariaDB); data: ${dataBytes} bytes JSON; one client; gateway in-process`);
console.table(runs.map((r) => ({ store: r.store === 'sqlite' ? 'SQLite (temp file)' : 'MariaDB', 'in flight': r.inFlight, events: r.events, errors: r.errors, 's': r.seconds, 'events/s': r.eventsPerSecond, 'p50 ms': r.p50Ms, 'p99 ms': r.p99Ms, 'max ms': r.maxMs })));
const best = Math.max(...embedded.map((r) => r.eventsPerSecond));
console.log(`embedded best: ${best} events/s (target >= ${TARGET}: ${best >= TARGET ? 'meets' : 'BELOW'})`);
for (const r of mariadb) {
  console.log(`MariaDB, ${r.inFlight} in flight: ${r.eventsPerSecond} events/s = ${(r.eventsPerSecond / V4_MARIADB).toFixed(2)}× v4's ${V4_MARIADB} (target >= ${TARGET_MARIADB}: ${r.eventsPerSecond >= TARGET_MARIADB ? 'meets' : 'BELOW'})`);
}
for (const r of runs) if (r.errors) console.log(`${r.store} window ${r.inFlight}: ${r.errors} publishes failed, first: ${r.firstError}`);
for (const r of runs) if (r.timedOut) console.log(`${r.store} window ${r.inFlight}: stopped at the ${r.budgetSeconds} s budget after ${r.events} events`);
writeResult('publish-throughput', {
  eventsPerWindow: N, eventsPerMariadbWindow: N_MARIADB, dataBytes, target: `>= ${TARGET} events/s embedded, >= ${TARGET_MARIADB} events/s on MariaDB (3x v4's ${V4_MARIADB})`,
  meetsTarget: best >= TARGET && mariadb.length > 0 && mariadb.every((r) => r.eventsPerSecond >= TARGET_MARIADB), bestEventsPerSecond: best, runs, mariadbSkipped: skipMariadb,
  summary: [
    ...embedded.flatMap((r) => [
      { measure: `embedded events/s, ${r.inFlight} in flight`, value: r.eventsPerSecond, target: `>= ${TARGET}`, meets: r.eventsPerSecond >= TARGET, note: r.timedOut ? 'time budget hit' : '' },
      { measure: `embedded ack p50 / p99 ms, ${r.inFlight} in flight`, value: `${r.p50Ms} / ${r.p99Ms}`, target: '', note: r.errors ? `${r.errors} errors` : '' },
    ]),
    ...mariadb.flatMap((r) => [
      { measure: `mariadb events/s, ${r.inFlight} in flight`, value: r.eventsPerSecond, target: `>= ${TARGET_MARIADB}`, meets: r.eventsPerSecond >= TARGET_MARIADB, note: r.timedOut ? 'time budget hit' : '' },
      { measure: `mariadb vs v4 (${V4_MARIADB} events/s), ${r.inFlight} in flight`, value: `${(r.eventsPerSecond / V4_MARIADB).toFixed(2)}×`, target: '>= 3×', meets: r.eventsPerSecond >= TARGET_MARIADB },
      { measure: `mariadb ack p50 / p99 ms, ${r.inFlight} in flight`, value: `${r.p50Ms} / ${r.p99Ms}`, target: '', note: r.errors ? `${r.errors} errors` : '' },
    ]),
    ...(skipMariadb === undefined ? [] : [{ measure: 'mariadb events/s', value: 'skipped', target: `>= ${TARGET_MARIADB}`, note: skipMariadb }]),
  ],
});
