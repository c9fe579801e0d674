#!/usr/bin/env node
// bench request-legs: where a sequential request() spends its time, leg by leg. The requester (this
// process), the gateway and the two workers of bench/work.mjs's request mode each load
// bench/socket-probe.mjs, which records every socket read and write on one clock; a request's round
// trip is then cut at its frames: requester write → gateway read → the job's delivery written →
// worker read → its `success` publish written → gateway read → `waited` written → requester read.
// Also the gateway's CPU (all its threads) and the requester's (this process: the client) per request, and the reads per request here.
// Usage: node bench/request-legs.mjs [--store=sqlite|mysql] [--requests=N]   (after npm run build)
// Not part of `npm run bench`: a probe for a profile, not a target (its writes cost a few µs each).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/**
 * Requests before the measured ones (the first cut round trips are left out as well): as many as
 * work.mjs's request row warms up with, since a gateway just spawned runs V8's unoptimized code for
 * its first thousands of requests (bench/README.md › work, sixth session of 12-06).
 */
const WARMUP = 5_000;
const probe = fileURLToPath(new URL('./socket-probe.mjs', import.meta.url));
const { values: args } = parseArgs({ options: { store: { type: 'string', default: 'sqlite' }, requests: { type: 'string', default: '1500' } } });

if (!process.env.BENCH_SOCKET_PROBE_DIR) {
  // Again with the probe loaded here, and so in the workers this process forks (they take its execArgv).
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-request-legs-'));
  const env = { ...process.env, BENCH_SOCKET_PROBE_DIR: dir, BENCH_GATEWAY_IMPORT: probe };
  const run = spawnSync(process.execPath, [`--import=${probe}`, fileURLToPath(import.meta.url), ...process.argv.slice(2)], { env, stdio: 'inherit' });
  if (run.status === 0) report(dir);
  rmSync(dir, { recursive: true, force: true });
  process.exit(run.status ?? 1);
}

const requests = WARMUP + Number(args.requests);
const { startOurs } = await import('./work-systems.mjs');
const { startWorkers } = await import('./work-worker.mjs');
const system = await startOurs(args.store);
const workers = await startWorkers(2, { ...system.workerConnect, mode: 'request', jobs: requests, concurrency: 64 });
await workers.go();
let cpu0 = 0;
let own0 = process.cpuUsage();
for (let seq = 0; seq < requests; seq++) {
  if (seq === WARMUP) [cpu0, own0] = [system.cpuUs(), process.cpuUsage()];
  await system.request({ seq, t: 0, w: seq < WARMUP ? 1 : 0, payload: 'x'.repeat(200) }, `r${seq}`);
}
const own = process.cpuUsage(own0);
const measured = requests - WARMUP;
console.log(`${args.store}: ${measured} requests measured; gateway CPU ${Math.round((system.cpuUs() - cpu0) / measured)} µs a request, the requester's (this process) ${Math.round((own.user + own.system) / measured)}`);
await workers.close();
await system.close();

/** Cuts each round trip at its frames (see the header) and prints each leg's p50 and mean. */
function report(dir) {
  const all = [];
  for (const file of readdirSync(dir)) {
    const { role, events } = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    for (const [at, kind, bytes, took] of events) all.push({ at, who: role, kind, bytes, took });
  }
  all.sort((a, b) => a.at - b.at);
  const next = (from, test) => {
    for (let i = from; i < all.length; i++) if (test(all[i])) return i;
    return -1;
  };
  const is = (who, kind, min, max = Infinity) => (event) => event.who === who && event.kind === kind && event.bytes >= min && event.bytes < max;
  // Frame sizes: the requester's wait + publish (> 500 B), a delivery (> 400 B), the worker's publish (150–300 B), waited (> 200 B: 200–300, more with the publish's answer in the same write).
  const steps = [
    ['requester write → gateway read', is('gateway', 'R', 500)],
    ['gateway read → delivery written', is('gateway', 'W', 400)],
    ['→ worker read', is('worker', 'R', 400)],
    ['worker read → its publish written', is('worker', 'W', 150, 300)],
    ['→ gateway read', is('gateway', 'R', 150, 400)],
    ['gateway read → waited written', is('gateway', 'W', 200)],
    ['→ requester read', is('requester', 'R', 200)],
  ];
  const legs = steps.map(() => []);
  const totals = [];
  let reads = 0;
  let cycles = 0;
  /** Per role: socket writes, and the time their calls took, in the round trips cut. */
  const writes = new Map();
  for (let start = next(0, is('requester', 'W', 500)); start >= 0; ) {
    const following = next(start + 1, is('requester', 'W', 500));
    const at = [start];
    for (const [, test] of steps) at.push(at.at(-1) < 0 ? -1 : next(at.at(-1) + 1, test));
    // A round trip the probe cut short (a frame of another size in between): not counted.
    if (!at.includes(-1) && (following < 0 || at.at(-1) < following) && cycles++ >= WARMUP) {
      steps.forEach((_, i) => legs[i].push(all[at[i + 1]].at - all[at[i]].at));
      totals.push(all[at.at(-1)].at - all[start].at);
      for (let i = start; i < (following < 0 ? all.length : following); i++) {
        const event = all[i];
        if (event.who === 'requester' && event.kind === 'R') reads++;
        if (event.kind !== 'W') continue;
        const count = writes.get(event.who) ?? { calls: 0, ms: 0 };
        count.calls += 1;
        count.ms += event.took;
        writes.set(event.who, count);
      }
    }
    start = following;
  }
  const p50 = (values) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? NaN;
  const mean = (values) => values.reduce((sum, value) => sum + value, 0) / values.length;
  console.table([...steps.map(([name], i) => ({ leg: name, 'p50 ms': +p50(legs[i]).toFixed(3), 'mean ms': +mean(legs[i]).toFixed(3) })), { leg: 'round trip (first write → waited read)', 'p50 ms': +p50(totals).toFixed(3), 'mean ms': +mean(totals).toFixed(3) }]);
  console.log(`${totals.length} round trips cut; the requester read ${(reads / totals.length).toFixed(2)} times a request`);
  for (const [who, { calls, ms }] of writes) console.log(`${who}: ${(calls / totals.length).toFixed(2)} socket writes a request, ${((1000 * ms) / calls).toFixed(0)} µs a call`);
}
