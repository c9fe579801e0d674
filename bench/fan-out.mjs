#!/usr/bin/env node
// bench fan-out: one publisher → 1,000 WebSocket subscribers, events with 256 bytes of JSON data.
//   gateway:  gateway/dist in its own process (SQLite temp file). The publisher is @eventflow/node
//             (a durable publish per event, acked with its stored position); the 1,000 subscribers
//             are raw `ws` clients in another process that each did hello/welcome and subscribe.
//   baseline: the Node ceiling for that work (server-support.mjs `ceiling`): a `ws` server in its
//             own process that frames each received frame ONCE (Sender.frame) and writes the same
//             Buffers to every other client's socket, corked per tick; no store, no protocol. Fed
//             frames of the gateway's own shape and size, received by the same subscriber process.
//   reference: the naive relay (`client.send(string)` per subscriber: ws converts and frames it
//             once per subscriber), the baseline of earlier runs, labelled as such.
// Both publishers keep at most WINDOW publishes unanswered and at most AHEAD events beyond what
// the subscribers have received (progress reported by the subscriber process), so the run
// measures sustained delivery rather than how much a server can buffer.
// Reports deliveries/s (N × 1,000 / (last frame received − first publish)), the server's CPU µs per
// delivery (process.cpuUsage of the server process over the measured phase), and both ratios.
import { createNodeClient } from '@eventflow/node';
import WebSocket from 'ws';
import { startClients } from './clients-support.mjs';
import { startServer } from './server-support.mjs';
import { printEnvironment, writeResult } from './results.mjs';

const SUBSCRIBERS = Number(process.env.BENCH_FANOUT_SUBSCRIBERS ?? 1000);
const N = Number(process.env.BENCH_FANOUT_EVENTS ?? 500);
const WARMUP = 100;
const WINDOW = 32;
const AHEAD = 50;
const RUN_BUDGET_MS = 15_000;
const TARGET = 0.8;
/** BENCH_FANOUT_RELAY=0 leaves out the naive-relay reference row (it takes ~6 s). */
const WITH_RELAY = process.env.BENCH_FANOUT_RELAY !== '0';
/** The naive relay is ~20× slower per delivery: fewer events keep its row inside the time bound. */
const N_RELAY = Math.min(N, 150);
const DOMAIN = 'fan';
const NAME = 'tick';
printEnvironment('fan-out');

const payload = 'x'.repeat(230);
const dataFor = (i) => ({ seq: i, payload }); // JSON ≈ 256 bytes
const dataBytes = JSON.stringify(dataFor(12345)).length;
const now = () => Number(process.hrtime.bigint());

/** Publishes `n` events through `publishOne` with the window and the lead over delivery; resolves with what was delivered by when. */
function drive(clients, publishOne, n, budgetMs) {
  const expected = n * SUBSCRIBERS;
  const t0 = now();
  return new Promise((resolve, reject) => {
    let published = 0;
    let inFlight = 0;
    let finished = false;
    const finish = (timedOut) => {
      if (finished) return;
      finished = true;
      off();
      clearTimeout(timer);
      resolve({ t0, timedOut });
    };
    const pump = () => {
      while (!finished && published < n && inFlight < WINDOW && published - clients.progress / SUBSCRIBERS < AHEAD) {
        const i = published++;
        inFlight++;
        publishOne(i).then(() => {
          inFlight--;
          pump();
        }, reject);
      }
    };
    const off = clients.onProgress((progress) => (progress >= expected ? finish(false) : pump()));
    const timer = setTimeout(() => finish(true), budgetMs);
    pump();
  });
}

async function measure(server, clients, publishOne, n = N) {
  await clients.ask({ cmd: 'reset' });
  await drive(clients, publishOne, WARMUP, 5_000);
  await new Promise((resolve) => setTimeout(resolve, 200));
  await clients.ask({ cmd: 'reset' });
  const serverCpu0 = await server.cpu();
  const clientCpu0 = (await clients.ask({ cmd: 'report' })).cpu;
  const { t0, timedOut } = await drive(clients, (i) => publishOne(WARMUP + i), n, RUN_BUDGET_MS);
  const report = await clients.ask({ cmd: 'report' });
  const seconds = (report.lastAt - t0) / 1e9;
  const serverCpu1 = await server.cpu();
  // CPU seconds per wall second: near 1 means that process was the bottleneck.
  const cpuSeconds = (a, b) => (b.user + b.system - a.user - a.system) / 1e6;
  const load = (a, b) => +(cpuSeconds(a, b) / seconds).toFixed(2);
  return {
    deliveries: report.total,
    expected: n * SUBSCRIBERS,
    timedOut,
    seconds: +seconds.toFixed(3),
    deliveriesPerSecond: Math.round(report.total / seconds),
    checkedFrames: report.checked,
    badFrames: report.bad,
    firstBad: report.firstBad,
    sample: report.sample,
    serverCpu: load(serverCpu0, serverCpu1),
    // Robust to a busy machine: what one delivery costs the server, whatever else runs.
    serverCpuUsPerDelivery: +((cpuSeconds(serverCpu0, serverCpu1) * 1e6) / report.total).toFixed(2),
    clientsCpu: load(clientCpu0, report.cpu),
  };
}

async function runGateway() {
  // The publish rate limit is per connection; this one publisher stands for many (the measure is delivery).
  const server = await startServer('gateway', { gatewayConfig: { EVENTFLOW_MAX_PUBLISH_RATE: 0 } });
  const clients = await startClients();
  const publisher = createNodeClient(server.url, { clientName: 'bench-publisher', requestTimeout: 60_000 });
  try {
    const connected = await clients.ask({ cmd: 'connect', url: server.url, count: SUBSCRIBERS, hello: true, subscribe: { domain: DOMAIN, name: NAME }, measure: 'count' });
    console.log(`gateway: ${connected.connected} subscribers connected and subscribed in ${connected.ms} ms`);
    const positions = new Set();
    let acked = 0;
    const result = await measure(server, clients, async (i) => {
      const { position } = await publisher.call('publish', { event: { domain: DOMAIN, name: NAME, pid: `p${i % 100}`, data: dataFor(i) } });
      positions.add(position);
      acked++;
    });
    // Every publish was acknowledged with its own stored position: the durable path, not a shortcut.
    result.storedPositions = positions.size;
    result.acked = acked;
    return result;
  } finally {
    await publisher.close().catch(() => {});
    await clients.close();
    await server.stop();
  }
}

async function runBaseline(kind, sampleFrame, n = N) {
  const server = await startServer(kind);
  const clients = await startClients();
  const socket = new WebSocket(server.url, { perMessageDeflate: false });
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const acks = [];
  socket.on('message', () => acks.shift()?.());
  const template = JSON.parse(sampleFrame);
  try {
    const connected = await clients.ask({ cmd: 'connect', url: server.url, count: SUBSCRIBERS, hello: false, measure: 'count' });
    console.log(`${kind}: ${connected.connected} subscribers connected in ${connected.ms} ms`);
    let frameBytes = 0;
    const result = await measure(server, clients, (i) => {
      // The gateway's own frame shape and size, with this event's sequence number and position.
      template.event.data.seq = i;
      template.event.position = 1_000_000 + i;
      const frame = JSON.stringify(template);
      frameBytes = frame.length;
      return new Promise((resolve) => {
        acks.push(resolve);
        socket.send(frame);
      });
    }, n);
    result.frameBytes = frameBytes;
    return result;
  } finally {
    socket.terminate();
    await clients.close();
    await server.stop();
  }
}

const gateway = await runGateway();
if (!gateway.sample) throw new Error('fan-out: the subscribers checked no gateway frame');
gateway.frameBytes = gateway.sample.length;
const baseline = await runBaseline('ceiling', gateway.sample);
const relay = WITH_RELAY ? await runBaseline('relay', gateway.sample, N_RELAY) : undefined;
const ratio = +(gateway.deliveriesPerSecond / baseline.deliveriesPerSecond).toFixed(2);
// < 1: the gateway spends more CPU per delivery than the ceiling.
const cpuRatio = +(baseline.serverCpuUsPerDelivery / gateway.serverCpuUsPerDelivery).toFixed(2);

console.log(`${SUBSCRIBERS} subscribers, ${N} events (after ${WARMUP} warm-up), data ${dataBytes} bytes JSON, event frame ${gateway.frameBytes} bytes; window ${WINDOW}, lead ${AHEAD} events`);
console.table(
  [
    ['gateway (SQLite, durable)', gateway],
    ['baseline: ceiling (frame once, write to all, cork per tick)', baseline],
    ...(relay ? [['reference: naive ws relay (send per client)', relay]] : []),
  ].map(([name, r]) => ({ server: name, deliveries: r.deliveries, 's': r.seconds, 'deliveries/s': r.deliveriesPerSecond, 'frame bytes': r.frameBytes, 'server cpu': r.serverCpu, 'server cpu µs/delivery': r.serverCpuUsPerDelivery, 'clients cpu': r.clientsCpu, checked: r.checkedFrames, bad: r.badFrames, 'timed out': r.timedOut })),
);
console.log(`gateway stored ${gateway.storedPositions} distinct positions for ${gateway.acked} acknowledged publishes`);
console.log(`ratio gateway / ceiling: ${ratio}x deliveries/s (target >= ${TARGET}x: ${ratio >= TARGET ? 'meets' : 'BELOW'} target); CPU per delivery ceiling / gateway: ${cpuRatio}x`);
console.log(`server CPU per delivery: gateway ${gateway.serverCpuUsPerDelivery} µs, ceiling ${baseline.serverCpuUsPerDelivery} µs${relay ? `, naive relay ${relay.serverCpuUsPerDelivery} µs` : ''}`);
for (const [name, r] of [['gateway', gateway], ['ceiling', baseline], ['relay', relay]]) {
  if (!r) continue;
  if (r.badFrames) console.log(`${name}: ${r.badFrames} checked frames were not events with data, first: ${r.firstBad}`);
  if (r.timedOut) console.log(`${name}: stopped at the ${RUN_BUDGET_MS / 1000} s budget after ${r.deliveries} of ${r.expected} deliveries`);
}
// A run stopped by its time budget still measured a sustained rate over what it delivered.
const ok = !gateway.badFrames && !baseline.badFrames && gateway.checkedFrames > 0 && gateway.storedPositions === gateway.acked;
writeResult('fan-out', {
  subscribers: SUBSCRIBERS, events: N, dataBytes, frameBytes: gateway.frameBytes, gateway: { ...gateway, sample: undefined }, baseline: { ...baseline, sample: undefined }, relay: relay && { ...relay, sample: undefined }, ratio, cpuRatio,
  summary: [
    { measure: `gateway deliveries/s, ${SUBSCRIBERS} subscribers`, value: gateway.deliveriesPerSecond, baseline: `ceiling ${baseline.deliveriesPerSecond}`, ratio: `${ratio}x`, target: `>= ${TARGET}x`, meets: ok && ratio >= TARGET, note: ok ? (gateway.timedOut ? 'time budget reached' : '') : 'bad frames or lost publishes, see output' },
    { measure: 'server CPU µs per delivery', value: gateway.serverCpuUsPerDelivery, baseline: `ceiling ${baseline.serverCpuUsPerDelivery}`, ratio: `${(gateway.serverCpuUsPerDelivery / baseline.serverCpuUsPerDelivery).toFixed(2)}x the ceiling's`, target: '' },
    ...(relay ? [{ measure: 'reference: naive ws relay (send per client) deliveries/s (CPU µs/delivery)', value: `${relay.deliveriesPerSecond} (${relay.serverCpuUsPerDelivery})`, ratio: `gateway ${(gateway.deliveriesPerSecond / relay.deliveriesPerSecond).toFixed(2)}x`, target: '' }] : []),
  ],
});
