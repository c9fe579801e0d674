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
//                 its own): store → NATS → other gateway → store read → subscriber. Both
//                 deployments run at once and are measured in alternating rounds (ROUNDS), so the
//                 two rows compare the routers under the same load.
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
/** The cross-gateway runs (hub, NATS) alternate in this many rounds of N / ROUNDS publishes each, 6 s at most per round. */
const ROUNDS = 5;
const ROUND_BUDGET_MS = 6_000;
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
 * The workload: `publish(seq)` resolves when the publish is acknowledged; `receipts.on` is fed the
 * seq each received event carries. Publishes seq = from … from + count - 1 one at a time, the first
 * `warmup` not sampled; returns the raw latencies.
 */
async function sequentialRaw(publish, receipts, { from = 0, count, warmup, budgetMs }) {
  const sentAt = new Map();
  const latencies = [];
  let bad = 0;
  receipts.on = (seq) => {
    const t0 = sentAt.get(seq);
    if (t0 === undefined) return void bad++;
    sentAt.delete(seq);
    if (seq >= from + warmup) latencies.push(performance.now() - t0);
  };
  const deadline = performance.now() + budgetMs;
  let published = 0;
  for (let seq = from; seq < from + count && performance.now() < deadline; seq++) {
    sentAt.set(seq, performance.now());
    await publish(seq);
    published++;
  }
  // The last receipts may still be on their way.
  for (let i = 0; i < 200 && sentAt.size > 0; i++) await sleep(10);
  return { latencies, published: Math.max(0, published - warmup), missing: sentAt.size, bad, timedOut: published < count };
}

/** Warm-up, then N publishes, in one go. */
async function sequential(publish, receipts) {
  const { latencies, ...run } = await sequentialRaw(publish, receipts, { count: WARMUP + N, warmup: WARMUP, budgetMs: RUN_BUDGET_MS });
  return { ...stats(latencies), ...run };
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

/** A publisher on `publishUrl` and a subscriber (reading the event's data, as v4's workload does) on `subscribeUrl`, route checked. */
async function openLane(publishUrl, subscribeUrl, readyTimeoutMs) {
  const publisher = createNodeClient(publishUrl, { clientName: 'bench-v4-publisher', requestTimeout: 30_000 });
  const subscriber = createNodeClient(subscribeUrl, { clientName: 'bench-v4-subscriber' });
  const receipts = { on: () => undefined };
  const close = () => Promise.allSettled([publisher.close(), subscriber.close()]);
  try {
    await subscriber.subscribe(DOMAIN, NAME, (event) => receipts.on(event.data.seq));
    await routeReady(publisher, receipts, readyTimeoutMs);
  } catch (error) {
    await close();
    throw error;
  }
  return { receipts, close, publish: (seq) => publisher.publish({ domain: DOMAIN, name: NAME, pid: `p${seq % 10}`, data: { seq, payload } }) };
}

async function runEmbedded() {
  const server = await startServer('gateway');
  try {
    const lane = await openLane(server.url, server.url, 10_000);
    try {
      return await sequential(lane.publish, lane.receipts);
    } finally {
      await lane.close();
    }
  } finally {
    await server.stop();
  }
}

/**
 * A fresh database (dropped by stop()), `startFirst(dbEnv)` run on it (the hub) if given, then two
 * gateways with `gatewayConfig(dbEnv)`. Resolves with the gateways' URLs, what `startFirst` gave, and stop().
 */
async function startDeployment(gatewayConfig, startFirst) {
  const db = await freshDatabase('eventflow_bench_v4lat');
  const stops = [db.drop];
  const stop = async () => {
    for (const each of stops) await each().catch(() => {});
  };
  try {
    const first = startFirst ? await startFirst(db.env) : undefined;
    if (first) stops.unshift(first.stop);
    const a = await startServer('gateway', { gatewayConfig: gatewayConfig(db.env) });
    stops.unshift(a.stop);
    const b = await startServer('gateway', { gatewayConfig: gatewayConfig(db.env) });
    stops.unshift(b.stop);
    return { a: a.url, b: b.url, first, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** v4's shape: a hub process and two gateways as its spokes. */
async function startMariadbHub() {
  const deployment = await startDeployment((env) => ({ ...env, ...CERT_ENV, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 200 }), startHubProcess);
  return { ...deployment, hubPort: deployment.first.port };
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

/** Two gateways with EVENTFLOW_ROUTER=nats on a fresh database of their own. */
function startMariadbNats() {
  return startDeployment((env) => ({ ...env, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'nats', EVENTFLOW_NATS_SERVERS: NATS_URL, EVENTFLOW_NATS_SUBJECT_PREFIX: `eventflow-bench.${process.pid}` }));
}

/**
 * The cross-gateway runs, all deployments up at once and measured in alternating rounds (the order
 * reversed every round), so that on a shared machine each router sees the same load over time.
 * `deployments`: name → { a, b } (publisher's and subscriber's gateway URL). Resolves name → result.
 */
async function runInterleaved(deployments) {
  const lanes = [];
  try {
    for (const [name, deployment] of Object.entries(deployments)) {
      // Each gateway finds its hub within a poll and connects (or connects to NATS): allow for it.
      lanes.push({ name, lane: await openLane(deployment.a, deployment.b, 30_000), next: 0, latencies: [], published: 0, missing: 0, bad: 0, timedOut: false });
    }
    const perRound = Math.ceil(N / ROUNDS);
    for (let round = 0; round < ROUNDS; round++) {
      for (const each of round % 2 === 0 ? lanes : [...lanes].reverse()) {
        const warmup = round === 0 ? WARMUP : 0;
        const run = await sequentialRaw(each.lane.publish, each.lane.receipts, { from: each.next, count: warmup + perRound, warmup, budgetMs: ROUND_BUDGET_MS });
        each.next += warmup + perRound;
        each.latencies.push(...run.latencies);
        each.published += run.published;
        each.missing += run.missing;
        each.bad += run.bad;
        each.timedOut ||= run.timedOut;
      }
    }
    return Object.fromEntries(lanes.map(({ name, latencies, published, missing, bad, timedOut }) => [name, { ...stats(latencies), published, missing, bad, timedOut }]));
  } finally {
    await Promise.allSettled(lanes.map((each) => each.lane.close()));
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
const skipNats = skipMariadb ?? (await natsUnavailable());
let mariadb;
let mariadbError;
let nats;
let natsError;
if (skipMariadb === undefined) {
  const deployments = {};
  try {
    deployments.hub = await startMariadbHub();
    if (skipNats === undefined) {
      try {
        deployments.nats = await startMariadbNats();
      } catch (error) {
        natsError = String(error?.stack ?? error);
        console.log(`mariadb + nats start failed: ${natsError}`);
      }
    }
    ({ hub: mariadb, nats } = await runInterleaved(deployments));
    mariadb = { ...mariadb, hubPort: deployments.hub.hubPort };
  } catch (error) {
    mariadbError = String(error?.stack ?? error);
    console.log(`mariadb runs failed: ${mariadbError}`);
  } finally {
    for (const deployment of Object.values(deployments)) await deployment.stop();
  }
} else console.log(`skipping the MariaDB runs (hub, NATS): ${skipMariadb}`);
if (skipNats !== undefined && skipMariadb === undefined) console.log(`skipping the MariaDB + NATS run: ${skipNats}`);
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
