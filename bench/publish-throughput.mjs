#!/usr/bin/env node
// bench publish-throughput: durable publish throughput with the gateway in its own process
// (server-support.mjs, gateway/dist through @eventflow/gateway) and the publishers in this one
// (createNodeClient, @eventflow/node dist): ONE pipelined client, and FOUR clients sharing the same
// number of publishes in flight; on a temporary SQLite file (500 in flight) and on MariaDB
// (EVENTFLOW_STORE=mysql, a fresh database per window, dropped after; 200 in flight). ~256 bytes of
// data per event; every publish is acknowledged after its store commit. Reports events/s, p50/p99
// ack latency (publish call → durable ack) and the CPU of both processes per event, so the
// bottleneck is visible.
//   baseline (SQLite): the store's floor, better-sqlite3 alone in this process appending the same
//             rows (same columns and indexes as an event row, 256 bytes of JSON) in WAL
//             transactions of 500: what the disk and SQLite allow before any of our code runs.
//   baseline (MariaDB): eventflow v4's 1.9k events/s (50 in flight; the benchmark issue), a
//             reference measured earlier, not in this run.
// Each window is bounded in time (a window that runs out of time reports what it completed), so
// the whole script stays well under 90 s.
// BENCH_PUBLISH_STORES=sqlite|mysql runs one store. BENCH_CPU_PROF=<dir> writes a --cpu-prof of every gateway process (node bench/cpuprofile-support.mjs <file>).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createNodeClient } from '@eventflow/node';
import { startServer } from './server-support.mjs';
import { freshDatabase, mariadbUnavailable } from './v4-support.mjs';
import { printEnvironment, writeResult } from './results.mjs';

const N = Number(process.env.BENCH_PUBLISH_EVENTS ?? 20_000);
const N_MARIADB = Number(process.env.BENCH_PUBLISH_EVENTS_MARIADB ?? 10_000);
const IN_FLIGHT = 500;
const MARIADB_IN_FLIGHT = 200;
const CLIENTS = [1, 4];
/** BENCH_PUBLISH_STORES=sqlite (or mysql) runs one store only, e.g. to profile it. */
const STORES = (process.env.BENCH_PUBLISH_STORES ?? 'sqlite,mysql').split(',');
const WINDOW_BUDGET_MS = 15_000;
const MARIADB_BUDGET_MS = 12_000;
const TARGET = 30_000;
const TARGET_MARIADB = 10_000;
/** eventflow v4 on MariaDB, 50 publishes in flight (the benchmark issue): a reference, not this run. */
const V4_MARIADB = 1_900;
printEnvironment('publish-throughput');

const payload = "x".repeat(230);
const dataFor = (i) => ({ seq: i, payload }); // JSON ≈ 256 bytes
const dataBytes = JSON.stringify(dataFor(12345)).length;

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

// The per-connection limits are off: one client here stands for many (the default receive budget,
// 1 MiB/s per connection, alone caps one pipelined client at ~2,600 of these publishes a second).
const GATEWAY_CONFIG = { EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0, EVENTFLOW_MAX_RECEIVE_RATE: 0, EVENTFLOW_MAX_IN_FLIGHT: 100_000,
  // EVENTFLOW_METRICS=off in the environment measures the gateway without its metrics.
  EVENTFLOW_METRICS: process.env.EVENTFLOW_METRICS ?? 'on' };

/** A gateway process on a fresh store (server-support's temp SQLite file, or a fresh MariaDB database). */
async function startOn(store) {
  if (store === 'sqlite') {
    const server = await startServer('gateway', { gatewayConfig: GATEWAY_CONFIG });
    return { server, cleanUp: async () => {} };
  }
  const db = await freshDatabase();
  try {
    const server = await startServer('gateway', { gatewayConfig: { ...GATEWAY_CONFIG, ...db.env, EVENTFLOW_STORE: 'mysql' } });
    return { server, cleanUp: db.drop };
  } catch (error) {
    await db.drop();
    throw error;
  }
}

async function runWindow(store, clientCount, inFlight, N, budgetMs) {
  const { server, cleanUp } = await startOn(store);
  const clients = Array.from({ length: clientCount }, (_, c) => createNodeClient(server.url, { clientName: `bench-${c}`, requestTimeout: 60_000 }));
  try {
    // Warm-up: connections, handshakes, prepared statements, JIT.
    const warm = [];
    for (let i = 0; i < 1000; i++) warm.push(clients[i % clientCount].publish({ domain: 'bench', name: 'warmup', pid: `w${i % 50}`, data: dataFor(i) }));
    await Promise.all(warm);

    const latencies = new Float64Array(N);
    let next = 0;
    let done = 0;
    let errors = 0;
    let firstError;
    const deadline = performance.now() + budgetMs;
    const serverCpu0 = await server.cpu();
    const ownCpu0 = process.cpuUsage();
    const t0 = performance.now();
    async function lane(client) {
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
    await Promise.all(Array.from({ length: inFlight }, (_, l) => lane(clients[l % clientCount])));
    const elapsed = performance.now() - t0;
    const ownCpu = process.cpuUsage(ownCpu0);
    const serverCpu1 = await server.cpu();
    const sorted = Array.from(latencies.subarray(0, done)).sort((a, b) => a - b);
    const usPerEvent = (us) => +(us / Math.max(1, done)).toFixed(1);
    return {
      store,
      clients: clientCount,
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
      // CPU µs per event and CPU seconds per wall second (near 1: that process was the limit).
      gatewayCpuUsPerEvent: usPerEvent(serverCpu1.user + serverCpu1.system - serverCpu0.user - serverCpu0.system),
      gatewayLoad: +((serverCpu1.user + serverCpu1.system - serverCpu0.user - serverCpu0.system) / 1e3 / elapsed).toFixed(2),
      publishersCpuUsPerEvent: usPerEvent(ownCpu.user + ownCpu.system),
      publishersLoad: +((ownCpu.user + ownCpu.system) / 1e3 / elapsed).toFixed(2),
    };
  } finally {
    await Promise.allSettled(clients.map((client) => client.close()));
    await server.stop().catch(() => {});
    await cleanUp().catch(() => {});
  }
}

/**
 * The SQLite floor: better-sqlite3 alone appending event-shaped rows (an autoincrement position, id,
 * domain, name, pid, JSON data, timestamp; a unique index on id, one on (domain, pid)) in WAL
 * transactions of 500 (the size of the gateway's batches at 500 in flight), synchronous=NORMAL.
 */
function sqliteFloor(N) {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-bench-floor-'));
  const db = new Database(join(dir, 'floor.db'));
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec(`CREATE TABLE event (position INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, domain TEXT NOT NULL, name TEXT NOT NULL, pid TEXT NOT NULL, data TEXT NOT NULL, timestamp TEXT NOT NULL);
      CREATE UNIQUE INDEX event_id ON event (id); CREATE INDEX event_domain_pid ON event (domain, pid, position);`);
    const insert = db.prepare('INSERT INTO event (id, domain, name, pid, data, timestamp) VALUES (?, ?, ?, ?, ?, ?)');
    const batch = db.transaction((from, to) => {
      for (let i = from; i < to; i++) insert.run(`floor-${i}-${'0'.repeat(16)}`, 'bench', 'created', `p${i % 1000}`, JSON.stringify(dataFor(i)), new Date().toISOString());
    });
    batch(0, 1000); // warm-up
    const t0 = performance.now();
    for (let i = 1000; i < 1000 + N; i += 500) batch(i, Math.min(i + 500, 1000 + N));
    const seconds = (performance.now() - t0) / 1000;
    return { events: N, seconds: +seconds.toFixed(3), eventsPerSecond: Math.round(N / seconds) };
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const runs = [];
if (STORES.includes('sqlite')) for (const clients of CLIENTS) runs.push(await runWindow('sqlite', clients, IN_FLIGHT, N, WINDOW_BUDGET_MS));
const floor = sqliteFloor(N);
const skipMariadb = STORES.includes('mysql') ? await mariadbUnavailable() : 'not asked for (BENCH_PUBLISH_STORES)';
if (skipMariadb === undefined) for (const clients of CLIENTS) runs.push(await runWindow('mysql', clients, MARIADB_IN_FLIGHT, N_MARIADB, MARIADB_BUDGET_MS));
else console.log(`skipping the MariaDB runs: ${skipMariadb}`);
const embedded = runs.filter((r) => r.store === 'sqlite');
const mariadb = runs.filter((r) => r.store === 'mysql');

console.log(`events per window: ${N} (SQLite), ${N_MARIADB} (MariaDB); data: ${dataBytes} bytes JSON; gateway in its own process, publishers in this one`);
console.table([
  ...runs.map((r) => ({ run: `${r.store === 'sqlite' ? 'SQLite (temp file)' : 'MariaDB'}, ${r.clients} client${r.clients > 1 ? 's' : ''}`, 'in flight': r.inFlight, events: r.events, errors: r.errors, 's': r.seconds, 'events/s': r.eventsPerSecond, 'p50 ms': r.p50Ms, 'p99 ms': r.p99Ms, 'gateway µs/ev': r.gatewayCpuUsPerEvent, 'gateway load': r.gatewayLoad, 'publishers µs/ev': r.publishersCpuUsPerEvent, 'publishers load': r.publishersLoad })),
  { run: 'baseline: better-sqlite3 alone, batches of 500', events: floor.events, 's': floor.seconds, 'events/s': floor.eventsPerSecond },
  { run: `reference, not this run: eventflow v4 on MariaDB, 50 in flight`, 'in flight': 50, 'events/s': V4_MARIADB },
]);
for (const r of runs) {
  const target = r.store === 'sqlite' ? TARGET : TARGET_MARIADB;
  console.log(`${r.store}, ${r.clients} client(s), ${r.inFlight} in flight: ${r.eventsPerSecond} events/s (target >= ${target}: ${r.eventsPerSecond >= target ? 'meets' : 'BELOW'})`);
}
for (const r of runs) if (r.errors) console.log(`${r.store} ${r.clients} client(s): ${r.errors} publishes failed, first: ${r.firstError}`);
for (const r of runs) if (r.timedOut) console.log(`${r.store} ${r.clients} client(s): stopped at the ${r.budgetSeconds} s budget after ${r.events} events`);
const label = (r) => `${r.clients} client${r.clients > 1 ? 's' : ''}, ${r.inFlight} in flight`;
const cpuNote = (r) => `gateway ${r.gatewayCpuUsPerEvent} µs/ev (load ${r.gatewayLoad}), publishers ${r.publishersCpuUsPerEvent} µs/ev (load ${r.publishersLoad})`;
writeResult('publish-throughput', {
  eventsPerWindow: N, eventsPerMariadbWindow: N_MARIADB, dataBytes, target: `>= ${TARGET} events/s embedded, >= ${TARGET_MARIADB} events/s on MariaDB (v4: ${V4_MARIADB})`,
  runs, sqliteFloor: floor, mariadbSkipped: skipMariadb,
  summary: [
    ...embedded.flatMap((r) => [
      { measure: `embedded events/s, ${label(r)}`, value: r.eventsPerSecond, baseline: `better-sqlite3 alone ${floor.eventsPerSecond}`, ratio: `${(r.eventsPerSecond / floor.eventsPerSecond).toFixed(2)}x`, target: `>= ${TARGET}`, meets: !r.errors && r.eventsPerSecond >= TARGET, note: [r.timedOut ? 'time budget hit' : '', r.errors ? `${r.errors} errors` : ''].filter(Boolean).join(', ') },
      { measure: `embedded ack p50 / p99 ms; CPU, ${label(r)}`, value: `${r.p50Ms} / ${r.p99Ms}`, note: cpuNote(r) },
    ]),
    ...mariadb.flatMap((r) => [
      { measure: `mariadb events/s, ${label(r)}`, value: r.eventsPerSecond, baseline: `v4 ${V4_MARIADB} (reference, not this run)`, ratio: `${(r.eventsPerSecond / V4_MARIADB).toFixed(2)}x`, target: `>= ${TARGET_MARIADB}`, meets: !r.errors && r.eventsPerSecond >= TARGET_MARIADB, note: [r.timedOut ? 'time budget hit' : '', r.errors ? `${r.errors} errors` : ''].filter(Boolean).join(', ') },
      { measure: `mariadb ack p50 / p99 ms; CPU, ${label(r)}`, value: `${r.p50Ms} / ${r.p99Ms}`, note: cpuNote(r) },
    ]),
    ...(skipMariadb === undefined ? [] : [{ measure: 'mariadb events/s', value: 'skipped', target: `>= ${TARGET_MARIADB}`, note: skipMariadb }]),
  ],
});
