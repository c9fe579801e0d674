#!/usr/bin/env node
// bench latency-v4: eventflow v4's own latency workload. 500 sequential publishes (each awaited
// before the next), one subscriber that reads every event's data; latency = the publish call →
// the subscriber's listener receiving that event (its data.seq), p50/p99. Publisher and
// subscriber are @eventflow/node clients in this process (one clock); the servers run in their own.
//   embedded:     one gateway (gateway/dist, own process, SQLite temp file, default limits).
//   mariadb+hub:  v4's shape, hub + two spokes: `node gateway/dist/main.js hub` and two gateways
//                 (EVENTFLOW_STORE=mysql, EVENTFLOW_ROUTER=hubs) on a fresh database (dropped
//                 after); the publisher on one gateway, the subscriber on the other, so every
//                 event goes store → hub → other gateway → store read → subscriber, as in v4.
//   mariadb+nats: the same two gateways on a fresh database with EVENTFLOW_ROUTER=nats instead
//                 (the NATS at BENCH_NATS_URL, default nats://127.0.0.1:4222, a subject prefix of
//                 its own): store → NATS → other gateway → store read → subscriber. Run right after
//                 the hub run, same workload, so the two rows compare the routers.
//   baseline:     the Node ceiling (server-support.mjs `ceiling`): the same sequential workload
//                 through a `ws` server that frames once and writes to the subscriber, no store;
//                 the floor of two WebSocket hops on this machine in this run.
//   reference:    real eventflow v4.8 cannot run here (needs Node >= 22.10); the numbers measured by
//                 hand for issue 17 are printed as a labelled reference, not a same-run baseline.
import { createNodeClient } from '@eventflow/node';
import { connect as tcpConnect } from 'node:net';
import WebSocket from 'ws';
import { startServer } from './server-support.mjs';
import { CERT_ENV, freshDatabase, mariadbUnavailable, startHubProcess } from './v4-support.mjs';
import { printEnvironment, writeResult } from './results.mjs';

const N = Number(process.env.BENCH_V4_LATENCY_EVENTS ?? 500);
const WARMUP = 50;
const RUN_BUDGET_MS = 20_000;
const TARGET_EMBEDDED_P99 = 2;
const TARGET_MARIADB_P99 = 5;
/** Measured by hand on this kind of machine (issue 17), not in this run. */
const V4_REFERENCE = [
  { label: 'eventflow v4.8, hub + two spokes, MariaDB (issue 17, one sitting)', p50: 4.6, p99: 62 },
  { label: 'eventflow v4.8, same, a quiet earlier run', p50: 1.5, p99: 5.9 },
];
const DOMAIN = 'v4lat';
const NAME = 'tick';
printEnvironment('latency-v4');

const payload = 'x'.repeat(230);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const stats = (values) => {
  const sorted = Float64Array.from(values).sort();
  const at = (p) => +(sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN).toFixed(3);
  return { samples: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: +(sorted.at(-1) ?? NaN).toFixed(3) };
};

/**
 * The workload: `publish(seq)` resolves when the publish is acknowledged; `onReceipt` is fed the
 * seq each received event carries. Warm-up first (not sampled); then N publishes, one at a time.
 */
async function sequential(publish, receipts) {
  const sentAt = new Map();
  const latencies = [];
  let bad = 0;
  receipts.on = (seq) => {
    const t0 = sentAt.get(seq);
    if (t0 === undefined) return void bad++;
    sentAt.delete(seq);
    if (seq >= WARMUP) latencies.push(performance.now() - t0);
  };
  const deadline = performance.now() + RUN_BUDGET_MS;
  let published = 0;
  for (let seq = 0; seq < WARMUP + N && performance.now() < deadline; seq++) {
    sentAt.set(seq, performance.now());
    await publish(seq);
    published++;
  }
  // The last receipts may still be on their way.
  for (let i = 0; i < 200 && sentAt.size > 0; i++) await sleep(10);
  return { ...stats(latencies), published: published - WARMUP, missing: sentAt.size, bad, timedOut: published < WARMUP + N };
}

/** Publishes fence events through `publisher` until `receipts` sees one: the route publisher → subscriber works end to end. */
async function routeReady(publisher, receipts, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let seen = false;
  receipts.on = () => (seen = true);
  while (!seen) {
    if (Date.now() > deadline) throw new Error(`no event reached the subscriber within ${timeoutMs} ms`);
    await publisher.publish({ domain: DOMAIN, name: NAME, pid: 'fence', data: { seq: -1, payload } });
    for (let i = 0; i < 20 && !seen; i++) await sleep(10);
  }
  await sleep(200);
}

/** The gateway workload between a publisher on `publishUrl` and a subscriber on `subscribeUrl`. */
async function runClients(publishUrl, subscribeUrl, readyTimeoutMs) {
  const publisher = createNodeClient(publishUrl, { clientName: 'bench-v4-publisher', requestTimeout: 30_000 });
  const subscriber = createNodeClient(subscribeUrl, { clientName: 'bench-v4-subscriber' });
  const receipts = { on: () => undefined };
  try {
    // The subscriber reads the event's data, as v4's workload does.
    await subscriber.subscribe(DOMAIN, NAME, (event) => receipts.on(event.data.seq));
    await routeReady(publisher, receipts, readyTimeoutMs);
    return await sequential((seq) => publisher.publish({ domain: DOMAIN, name: NAME, pid: `p${seq % 10}`, data: { seq, payload } }), receipts);
  } finally {
    await Promise.allSettled([publisher.close(), subscriber.close()]);
  }
}

async function runEmbedded() {
  const server = await startServer('gateway');
  try {
    return await runClients(server.url, server.url, 10_000);
  } finally {
    await server.stop();
  }
}

async function runMariadbHub() {
  const db = await freshDatabase('eventflow_bench_v4lat');
  const stops = [];
  try {
    const hub = await startHubProcess(db.env);
    stops.push(hub.stop);
    const config = { ...db.env, ...CERT_ENV, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 200 };
    const a = await startServer('gateway', { gatewayConfig: config });
    stops.unshift(a.stop);
    const b = await startServer('gateway', { gatewayConfig: config });
    stops.unshift(b.stop);
    // Each gateway finds the hub within a poll, creates its certificate and connects: allow for it.
    return { ...(await runClients(a.url, b.url, 30_000)), hubPort: hub.port };
  } finally {
    for (const stop of stops) await stop().catch(() => {});
    await db.drop();
  }
}

const NATS_URL = process.env.BENCH_NATS_URL ?? 'nats://127.0.0.1:4222';

/** Why no NATS run, or undefined: a server answers at NATS_URL with its INFO line. */
async function natsUnavailable() {
  const { hostname, port } = new URL(NATS_URL.replace(/^nats:/, 'http:'));
  const ok = await new Promise((resolve) => {
    const socket = tcpConnect({ host: hostname, port: Number(port || 4222) });
    const done = (value) => (socket.destroy(), resolve(value));
    socket.setTimeout(3_000, () => done(false));
    socket.once('data', (chunk) => done(chunk.toString('latin1').startsWith('INFO ')));
    socket.once('error', () => done(false));
  });
  return ok ? undefined : `no NATS server answers at ${NATS_URL} (set BENCH_NATS_URL)`;
}

async function runMariadbNats() {
  const db = await freshDatabase('eventflow_bench_v4lat');
  const stops = [];
  try {
    const config = { ...db.env, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'nats', EVENTFLOW_NATS_SERVERS: NATS_URL, EVENTFLOW_NATS_SUBJECT_PREFIX: `eventflow-bench.${process.pid}` };
    const a = await startServer('gateway', { gatewayConfig: config });
    stops.unshift(a.stop);
    const b = await startServer('gateway', { gatewayConfig: config });
    stops.unshift(b.stop);
    return await runClients(a.url, b.url, 30_000);
  } finally {
    for (const stop of stops) await stop().catch(() => {});
    await db.drop();
  }
}

async function runCeiling() {
  const server = await startServer('ceiling');
  const open = () =>
    new Promise((resolve, reject) => {
      const socket = new WebSocket(server.url, { perMessageDeflate: false });
      socket.once('open', () => resolve(socket)).once('error', reject);
    });
  const publisher = await open();
  const subscriber = await open();
  const receipts = { on: () => undefined };
  const acks = [];
  publisher.on('message', () => acks.shift()?.());
  // Reads the event's data, as the gateway's subscriber does (the client parses every frame).
  subscriber.on('message', (data) => receipts.on(JSON.parse(data.toString()).event.data.seq));
  const timestamp = new Date().toISOString();
  try {
    return await sequential(
      (seq) =>
        new Promise((resolve) => {
          acks.push(resolve);
          // The gateway's event frame, field for field.
          const event = { id: `bench-${seq}-${'0'.repeat(20)}`, domain: DOMAIN, name: NAME, pid: `p${seq % 10}`, data: { seq, payload }, timestamp, rid: null, position: 1_000_000 + seq };
          publisher.send(JSON.stringify({ type: 'event', names: [NAME], event }));
        }),
      receipts,
    );
  } finally {
    publisher.terminate();
    subscriber.terminate();
    await server.stop();
  }
}

const embedded = await runEmbedded();
const skipMariadb = await mariadbUnavailable();
let mariadb;
let mariadbError;
if (skipMariadb === undefined) {
  try {
    mariadb = await runMariadbHub();
  } catch (error) {
    mariadbError = String(error?.stack ?? error);
    console.log(`mariadb + hub run failed: ${mariadbError}`);
  }
} else console.log(`skipping the MariaDB + hub run: ${skipMariadb}`);
const skipNats = skipMariadb ?? (await natsUnavailable());
let nats;
let natsError;
if (skipNats === undefined) {
  try {
    nats = await runMariadbNats();
  } catch (error) {
    natsError = String(error?.stack ?? error);
    console.log(`mariadb + nats run failed: ${natsError}`);
  }
} else console.log(`skipping the MariaDB + NATS run: ${skipNats}`);
const ceiling = await runCeiling();

console.log(`${N} sequential publishes (each awaited) after ${WARMUP} warm-up, one subscriber reading each event's data; latency = publish call → receipt (ms)`);
console.table(
  [
    ['gateway, SQLite (embedded)', embedded],
    ...(mariadb ? [['gateway, MariaDB + our v4 hub (hub + two gateways)', mariadb]] : []),
    ...(nats ? [['gateway, MariaDB + NATS (two gateways, EVENTFLOW_ROUTER=nats)', nats]] : []),
    ['baseline: ceiling ws server, no store (frame once)', ceiling],
    ...V4_REFERENCE.map((r) => [`reference, not this run: ${r.label}`, r]),
  ].map(([name, r]) => ({ run: name, samples: r.samples ?? '', missing: r.missing ?? '', p50: r.p50, p90: r.p90 ?? '', p99: r.p99, max: r.max ?? '' })),
);
const complete = (r) => r && !r.missing && !r.bad && !r.timedOut;
for (const [name, r] of [['embedded', embedded], ['mariadb', mariadb], ['nats', nats], ['ceiling', ceiling]]) {
  if (r && !complete(r)) console.log(`${name}: ${r.published} published, ${r.missing} not received, ${r.bad} unexpected, timed out: ${r.timedOut}`);
}
const ref = V4_REFERENCE[0];
writeResult('latency-v4', {
  events: N, warmup: WARMUP, embedded, mariadb, mariadbSkipped: skipMariadb, mariadbError, nats, natsSkipped: skipNats, natsError, ceiling, v4Reference: V4_REFERENCE,
  summary: [
    { measure: `v4 workload (${N} sequential), gateway SQLite p50 / p99 ms`, value: `${embedded.p50} / ${embedded.p99}`, baseline: `ceiling ${ceiling.p50} / ${ceiling.p99}`, ratio: `p99 ${(embedded.p99 / ceiling.p99).toFixed(1)}x`, target: `p99 <= ${TARGET_EMBEDDED_P99}`, meets: complete(embedded) && embedded.p99 <= TARGET_EMBEDDED_P99, note: complete(embedded) ? '' : 'incomplete' },
    mariadb
      ? { measure: 'v4 workload, gateway MariaDB + hub p50 / p99 ms', value: `${mariadb.p50} / ${mariadb.p99}`, baseline: `v4.8 ${ref.p50} / ${ref.p99} (reference, not this run)`, ratio: `p99 ${(mariadb.p99 / ref.p99).toFixed(2)}x v4's`, target: `p99 <= ${TARGET_MARIADB_P99}`, meets: complete(mariadb) && mariadb.p99 <= TARGET_MARIADB_P99, note: complete(mariadb) ? '' : 'incomplete' }
      : { measure: 'v4 workload, gateway MariaDB + hub', value: mariadbError ? 'failed' : 'skipped', target: `p99 <= ${TARGET_MARIADB_P99}`, note: mariadbError ? 'see output' : skipMariadb },
    nats
      ? { measure: 'cross-gateway, MariaDB + NATS p50 / p99 ms', value: `${nats.p50} / ${nats.p99}`, baseline: mariadb ? `our hub ${mariadb.p50} / ${mariadb.p99} (this run)` : 'hub run missing', ratio: mariadb ? `p99 ${(nats.p99 / mariadb.p99).toFixed(2)}x the hub's` : '', target: `p99 <= ${TARGET_MARIADB_P99}`, meets: complete(nats) && nats.p99 <= TARGET_MARIADB_P99, note: complete(nats) ? '' : 'incomplete' }
      : { measure: 'cross-gateway, MariaDB + NATS', value: natsError ? 'failed' : 'skipped', target: `p99 <= ${TARGET_MARIADB_P99}`, note: natsError ? 'see output' : skipNats },
  ],
});
