#!/usr/bin/env node
// bench latency: publish → deliver latency at a steady 1,000 events/s with 100 subscribers.
//   gateway:  gateway/dist in its own process (SQLite temp file, default limits but no publish rate limit). The publisher is
//             @eventflow/node in this process: every publish is durable, and its event data
//             carries t = process.hrtime.bigint() taken just before the publish call. The 100
//             subscribers are raw `ws` clients (hello/welcome, subscribe) in a third process that
//             reads data.t from every event frame and records now − data.t. hrtime is CLOCK_MONOTONIC, one
//             clock for every process on the machine, so the two readings compare.
//   baseline: the Node ceiling (server-support.mjs `ceiling`: each frame framed once, the same
//             Buffers written to every subscriber's socket, corked per tick; no store) in its own
//             process, fed frames of the same shape and size by a raw `ws` publisher at the same
//             rate, received by the same subscriber process.
// v4's own workload (500 sequential publishes, one subscriber) is bench/latency-v4.mjs.
// Each run: 1 s warm-up, then DURATION s measured; every delivery to every subscriber is a sample.
// BENCH_LATENCY_ROUNDS (default 3) alternating rounds of both servers; each reports its median round.
import { createNodeClient } from '@eventflow/node';
import WebSocket from 'ws';
import { startClients } from './clients-support.mjs';
import { startServer } from './server-support.mjs';
import { printEnvironment, writeResult } from './results.mjs';

const SUBSCRIBERS = Number(process.env.BENCH_LATENCY_SUBSCRIBERS ?? 100);
const RATE = 1000;
const WARMUP_MS = 1_000;
const DURATION_MS = Number(process.env.BENCH_LATENCY_MS ?? 5_000);
/**
 * p99 against the same run's ceiling (issue 22: the ceiling's own p99 moves from machine to machine,
 * 2.28 ms on one quiet 2-core machine, so an absolute 2 ms could not be met by any server there).
 * The former absolute target is printed as a reference.
 */
const TARGET_P99_RATIO = 1.2;
const REFERENCE_P99 = 2;
/** eventflow v4.8 (hub + two spokes, MariaDB) on its own workload, measured by hand earlier (issue 17); not this workload, not this run. */
const V4 = { p50: 1.5, p99: 5.9 };
const DOMAIN = 'lat';
const NAME = 'tick';
printEnvironment('latency');

const payload = 'x'.repeat(200);
const hrNow = () => Number(process.hrtime.bigint());
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Calls fire(i) RATE times a second for `ms`, on schedule: a late timer fires every event that is due. */
async function paced(ms, fire) {
  const start = performance.now();
  const total = Math.round((ms / 1000) * RATE);
  let i = 0;
  while (i < total) {
    const due = Math.floor(((performance.now() - start) / 1000) * RATE) + 1;
    while (i < Math.min(due, total)) fire(i++);
    await sleep(1);
  }
  return total;
}

async function measure(server, clients, fire) {
  await clients.ask({ cmd: 'reset' });
  await paced(WARMUP_MS, fire);
  await sleep(200);
  await clients.ask({ cmd: 'reset', stampedAfter: hrNow() });
  const cpu0 = await server.cpu();
  const sent = await paced(DURATION_MS, fire);
  await sleep(500);
  const cpu1 = await server.cpu();
  const report = await clients.ask({ cmd: 'report' });
  // Robust to a busy machine: the server's CPU time per published event (its 100 deliveries included).
  const serverCpuUsPerEvent = Math.round((cpu1.user + cpu1.system - cpu0.user - cpu0.system) / sent);
  return { sent, expected: sent * SUBSCRIBERS, delivered: report.total, bad: report.bad, firstBad: report.firstBad, serverCpuUsPerEvent, ...report.latency };
}

async function runGateway() {
  // Default limits except the publish rate: a late timer on a busy machine fires a burst of due
  // events, which the 1,000/s per-connection limit would refuse; the ceiling has no such limit.
  const server = await startServer('gateway', { gatewayConfig: { EVENTFLOW_MAX_PUBLISH_RATE: 0 } });
  const clients = await startClients();
  const publisher = createNodeClient(server.url, { clientName: 'bench-publisher' });
  let errors = 0;
  let firstError;
  try {
    await clients.ask({ cmd: 'connect', url: server.url, count: SUBSCRIBERS, hello: true, subscribe: { domain: DOMAIN, name: NAME }, measure: 'latency' });
    let seq = 0;
    const result = await measure(server, clients, () => {
      const i = seq++;
      publisher.publish({ domain: DOMAIN, name: NAME, pid: `p${i % 100}`, data: { seq: i, t: hrNow(), payload } }).catch((error) => {
        errors++;
        firstError ??= String(error?.code ?? error);
      });
    });
    return { ...result, errors, firstError, sample: undefined };
  } finally {
    await publisher.close().catch(() => {});
    await clients.close();
    await server.stop();
  }
}

async function runBaseline() {
  const server = await startServer('ceiling');
  const clients = await startClients();
  const socket = new WebSocket(server.url, { perMessageDeflate: false });
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  try {
    await clients.ask({ cmd: 'connect', url: server.url, count: SUBSCRIBERS, hello: false, measure: 'latency' });
    let seq = 0;
    const timestamp = new Date().toISOString();
    return await measure(server, clients, () => {
      const i = seq++;
      // The gateway's event frame, field for field.
      const event = { id: `bench-${i}-${'0'.repeat(20)}`, domain: DOMAIN, name: NAME, pid: `p${i % 100}`, data: { seq: i, t: hrNow(), payload }, timestamp, rid: null, position: 1_000_000 + i };
      socket.send(JSON.stringify({ type: 'event', names: [NAME], event }));
    });
  } finally {
    socket.terminate();
    await clients.close();
    await server.stop();
  }
}

// Alternating rounds (gateway, ceiling, gateway, …): each server's figures are its round with the
// median p99, and the ratio compares those two. One round of each swung the ratio from 1.1× to 4.9×
// between runs on a loaded 2-core machine (2026-12-06); the rounds are all kept in the results.
const ROUNDS = Number(process.env.BENCH_LATENCY_ROUNDS ?? 3);
if (!(Number.isInteger(ROUNDS) && ROUNDS >= 1)) {
  console.error('bench latency: BENCH_LATENCY_ROUNDS must be an integer >= 1');
  process.exit(2);
}
const rounds = { gateway: [], baseline: [] };
for (let round = 0; round < ROUNDS; round++) {
  rounds.gateway.push(await runGateway());
  rounds.baseline.push(await runBaseline());
}
const medianRound = (runs) => [...runs].sort((a, b) => a.p99 - b.p99)[Math.floor((runs.length - 1) / 2)];
const gateway = medianRound(rounds.gateway);
const baseline = medianRound(rounds.baseline);
console.log(`${SUBSCRIBERS} subscribers, ${RATE} events/s for ${DURATION_MS / 1000} s after ${WARMUP_MS / 1000} s warm-up; latency = subscriber's receipt − publish call (ms); ${ROUNDS} alternating round(s), each server's median round by p99 (p99 of every round: gateway ${rounds.gateway.map((r) => r.p99).join(' / ')}, ceiling ${rounds.baseline.map((r) => r.p99).join(' / ')})`);
console.table(
  [
    ['gateway (SQLite, durable)', gateway],
    ['baseline: ceiling (frame once, cork per tick)', baseline],
    ['reference: eventflow v4.8 on MariaDB, its own workload (earlier, not this run)', { p50: V4.p50, p99: V4.p99 }],
  ].map(([name, r]) => ({ server: name, samples: r.samples ?? '', delivered: r.delivered ?? '', 'of': r.expected ?? '', p50: r.p50, p90: r.p90 ?? '', p99: r.p99, 'p99.9': r.p999 ?? '', max: r.max ?? '', 'server cpu µs/event': r.serverCpuUsPerEvent ?? '' })),
);
const complete = rounds.gateway.every((r) => r.delivered === r.expected && !r.errors && !r.bad);
const p99Ratio = gateway.p99 / baseline.p99;
console.log(`gateway p99 ${gateway.p99} ms, ${p99Ratio.toFixed(2)}x the ceiling's ${baseline.p99} ms (target <= ${TARGET_P99_RATIO}x: ${p99Ratio <= TARGET_P99_RATIO ? 'meets' : 'BELOW'} target; the former absolute ${REFERENCE_P99} ms: ${gateway.p99 <= REFERENCE_P99 ? 'within' : 'above'})`);
console.log(`reference (its own workload, not this one, not this run): eventflow v4.8 on this machine's MariaDB measured p50 ${V4.p50} ms, p99 ${V4.p99} ms`);
if (!complete) for (const r of rounds.gateway) console.log(`gateway round: ${r.delivered} of ${r.expected} deliveries, ${r.errors} publish errors (first: ${r.firstError}), ${r.bad} bad frames (first: ${r.firstBad})`);
writeResult('latency', {
  subscribers: SUBSCRIBERS, rate: RATE, durationMs: DURATION_MS, rounds: ROUNDS, gateway, baseline, gatewayRounds: rounds.gateway, baselineRounds: rounds.baseline, v4Reference: V4,
  summary: [
    { measure: `gateway p50 / p99 ms, ${RATE}/s, ${SUBSCRIBERS} subscribers`, value: `${gateway.p50} / ${gateway.p99}`, baseline: `ceiling ${baseline.p50} / ${baseline.p99}`, ratio: `p99 ${p99Ratio.toFixed(2)}x`, target: `p99 <= ${TARGET_P99_RATIO}x the ceiling's`, meets: complete && p99Ratio <= TARGET_P99_RATIO, note: [complete ? '' : 'incomplete, see output', `former absolute target p99 ${REFERENCE_P99} ms: ${gateway.p99 <= REFERENCE_P99 ? 'within' : 'above'}`].filter(Boolean).join('; ') },
    { measure: 'server CPU µs per event (100 deliveries)', value: gateway.serverCpuUsPerEvent, baseline: `ceiling ${baseline.serverCpuUsPerEvent}`, ratio: `${(gateway.serverCpuUsPerEvent / baseline.serverCpuUsPerEvent).toFixed(1)}x`, target: '' },
  ],
});
