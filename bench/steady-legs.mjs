#!/usr/bin/env node
// bench steady-legs: where work.mjs's steady row spends a job's enqueue → handler start, leg by leg,
// and which leg makes its tail. Ours at a steady 500 jobs/s with two workers, as in work.mjs; the
// publisher (this process), the gateway and the workers load bench/seq-probe.mjs, which finds each job
// in the frames, so that every job is cut at: its publish encoded (after `t`, the time its latency
// counts from) → the gateway parses it → the gateway writes its delivery → a worker reads it.
// For the slowest 1.5% of the jobs: the mean of each leg, the leg that was longest, and for the
// publisher → gateway leg how much was the publisher's socket write and how much the gateway's wait
// to read what had arrived (a process waiting for a core, or busy with something else).
// Usage: node bench/steady-legs.mjs [--store=sqlite|mysql] [--seconds=N]   (after npm run build)
// Not part of `npm run bench`: a probe for a profile, not a target.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const RATE = 500;
const WARMUP_S = 1;
const probe = fileURLToPath(new URL('./seq-probe.mjs', import.meta.url));
const { values: args } = parseArgs({ options: { store: { type: 'string', default: 'sqlite' }, seconds: { type: 'string', default: '10' } } });

if (!process.env.BENCH_SEQ_PROBE_DIR) {
  // Again with the probe loaded here, and so in the workers this process forks (they take its execArgv).
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-steady-legs-'));
  const env = { ...process.env, BENCH_SEQ_PROBE_DIR: dir, BENCH_GATEWAY_IMPORT: probe };
  const run = spawnSync(process.execPath, [`--import=${probe}`, fileURLToPath(import.meta.url), ...process.argv.slice(2)], { env, stdio: 'inherit' });
  if (run.status === 0) report(dir);
  rmSync(dir, { recursive: true, force: true });
  process.exit(run.status ?? 1);
}

const total = Math.round((WARMUP_S + Number(args.seconds)) * RATE);
const { startOurs } = await import('./work-systems.mjs');
const { startWorkers } = await import('./work-worker.mjs');
const system = await startOurs(args.store);
const workers = await startWorkers(2, { ...system.workerConnect, mode: 'steady', jobs: total, concurrency: 64 });
await workers.go();
const payload = 'x'.repeat(200);
const start = performance.now();
for (let seq = 0; seq < total; ) {
  const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * RATE) + 1);
  // `w` 1 marks the warm-up's jobs, which the report leaves out.
  for (; seq < due; seq++) void system.publish({ seq, t: Number(process.hrtime.bigint()), w: seq < WARMUP_S * RATE ? 1 : 0, payload }, `p${seq % 1000}`);
  await sleep(1);
}
await workers.watch();
while (workers.handled() < total) await sleep(20);
console.log(`${args.store}: ${total} jobs at ${RATE}/s, the first ${WARMUP_S * RATE} left out`);
await workers.close();
await system.close();

/** Cuts each job at its frames and prints the legs (see the header). */
function report(dir) {
  const jobs = new Map();
  const plain = { publisher: [], gateway: [] };
  for (const file of readdirSync(dir)) {
    const { role, events } = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    for (const [at, kind, seq, t] of events) {
      if (seq < 0) {
        plain[role]?.push([at, kind]);
        continue;
      }
      let job = jobs.get(seq);
      if (job === undefined) jobs.set(seq, (job = { seq, t }));
      job[kind] ??= at;
    }
  }
  const times = (role, kind) => plain[role].filter(([, k]) => k === kind).map(([at]) => at).sort((a, b) => a - b);
  const publisherWrites = times('publisher', 'w');
  const gatewayReads = times('gateway', 'r');
  /** The first of `sorted` at or after `at`. */
  const after = (sorted, at) => {
    let lo = 0;
    for (let hi = sorted.length; lo < hi; ) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid] < at) lo = mid + 1;
      else hi = mid;
    }
    return sorted[lo];
  };
  const legs = [
    ['t → publish encoded (client)', (j) => j.S - j.t],
    ['→ gateway parses it', (j) => j.P - j.S],
    ['→ gateway writes the delivery', (j) => j.W - j.P],
    ['→ worker reads it', (j) => j.R - j.W],
    ['t → worker reads it (all)', (j) => j.R - j.t],
  ];
  const cut = [...jobs.values()].filter((j) => j.seq >= WARMUP_S * RATE && j.S && j.P && j.W && j.R).sort((a, b) => a.R - a.t - (b.R - b.t));
  const quantile = (values, p) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(p * values.length))];
  const mean = (values) => values.reduce((sum, v) => sum + v, 0) / values.length;
  const tail = cut.slice(Math.floor(cut.length * 0.985));
  console.table(
    legs.map(([leg, of]) => {
      const all = cut.map(of);
      return { leg, 'p50 ms': +quantile(all, 0.5).toFixed(3), 'p90 ms': +quantile(all, 0.9).toFixed(3), 'p99 ms': +quantile(all, 0.99).toFixed(3), 'tail mean ms': +mean(tail.map(of)).toFixed(3) };
    }),
  );
  const longest = new Map();
  for (const job of tail) {
    const [leg] = legs.slice(0, 4).reduce((a, b) => (b[1](job) > a[1](job) ? b : a));
    longest.set(leg, (longest.get(leg) ?? 0) + 1);
  }
  console.log(`${cut.length} jobs cut; the slowest ${tail.length}, by their longest leg: ${[...longest].map(([leg, n]) => `${leg.replace('→ ', '')} ${n}`).join(', ')}`);
  // The publisher → gateway leg of the tail: the publisher's write, then the gateway's wait to read it.
  const split = tail.filter((j) => j.P - j.S > 1).map((j) => {
    const written = after(publisherWrites, j.S);
    const read = after(gatewayReads, written);
    return { write: written - j.S, wait: read - written, parse: j.P - read };
  });
  if (split.length > 0) {
    console.log(`tail jobs with publisher → gateway over 1 ms: ${split.length}; mean ms: encoded → written ${mean(split.map((s) => s.write)).toFixed(3)}, written → gateway read ${mean(split.map((s) => s.wait)).toFixed(3)}, read → parsed ${mean(split.map((s) => s.parse)).toFixed(3)}`);
  }
}
