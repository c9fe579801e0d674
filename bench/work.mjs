#!/usr/bin/env node
// bench work: the work half (publish a job → a worker handles it → its outcome) against a NATS
// JetStream pull consumer on the NATS server at 127.0.0.1:4222, in the same run (issue 22). Three
// measures, each with two worker processes (bench/work-worker.mjs) for every system:
//   drain:   10,000 jobs of 256 B queued first, then both workers told to go at once; jobs/s from
//            `go` until the system itself says nothing is pending or in flight (ours: listGroups;
//            JetStream: the consumer's num_pending and num_ack_pending; polled once every job was
//            handled). No-op handler.
//   steady:  500 jobs/s for 1 s of warm-up, then 10 s measured; enqueue → handler start p50/p99/max,
//            the publisher stamping process.hrtime (one clock for all processes) just before its
//            publish call, the worker reading it on its handler's first line; and the CPU a job
//            costs the server, the workers and the publisher (this process): on two cores every
//            process's CPU is another's wait, which is most of a p99.
//   request: sequential round trips from this process: ours client.request() against a consumer that
//            publishes `success` (rid = the event's id) before it resolves; JetStream: publish the
//            job (PubAck awaited), a pull consumer in a worker process handles it, publishes the
//            answer on the requester's core inbox and acks; the requester awaits that answer.
// Every row also counts, job by job, how often each was handled: a duplicate or a job never handled
// is a FAIL (the step exits 1 after writing its results).
// Systems: ours on SQLite (a gateway process on a temp file) and on MariaDB (127.0.0.1:3306 root, a
// fresh database), the gateway started through gateway/bin/eventflow-gateway.js; JetStream; BullMQ on
// the machine's Redis as a reference row when the package is installed and Redis answers.
// Per measure the systems run one after the other, the baseline between ours (SQLite, JetStream,
// MariaDB, then BullMQ), for --rounds rounds (default 1: A B A … with more); with more rounds each
// figure is the round with the median figure, and `rounds` lists them all.
// Usage: node bench/work.mjs [--store=sqlite,mysql] [--only=drain,steady,request]
//          [--baseline=jetstream,bullmq|none] [--concurrency=N] [--rounds=N]
//   (or BENCH_WORK_STORES, BENCH_WORK_ONLY, BENCH_WORK_BASELINES, BENCH_WORK_CONCURRENCY,
//   BENCH_WORK_ROUNDS). --concurrency (default 64) is passed to ours as consume(…, { concurrency })
//   (0: not passed) and to JetStream as the pull's max_messages per worker, and BullMQ's Worker
//   concurrency: the open jobs one worker process may hold. BENCH_CPU_PROF=<dir> profiles the gateways
//   (BENCH_CPU_PROF_INTERVAL=<µs> samples more often than the 1 ms default, for one short path),
//   BENCH_WORKER_PROF=<dir> the worker processes (every system's).
//   BENCH_WORK_WARMUP_MS: the steady row's warm-up (default 1000), for a probe of a longer one;
//   BENCH_WORK_REQUEST_WARMUP: the request row's warm-up requests (default 5000).
//   BENCH_WORK_RATE: the steady row's jobs a second (default 500, the target's), for a probe of a busier gateway.
// Each row is bounded in time (drain 20 s; steady 11 s + 5 s to catch up; request up to 15 s of
// warm-up, then 8 s once 50 are measured, 20 s at most; then up to 5 s for the system to say all is
// settled; the gateways stop with a 1 s drain), so the step stays under ~3 minutes even with today's
// MariaDB figures (110 s at 12-06 17:20).
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startWorkers } from './work-worker.mjs';
import { bullmqUnavailable, jetstreamUnavailable, startBullMQ, startJetStream, startOurs } from './work-systems.mjs';
import { mariadbUnavailable } from './v4-support.mjs';
import { printEnvironment, writeResult } from './results.mjs';

const { values: args } = parseArgs({
  options: { store: { type: 'string' }, only: { type: 'string' }, baseline: { type: 'string' }, concurrency: { type: 'string' }, rounds: { type: 'string' } },
});
const list = (value) => value.split(',').map((s) => s.trim()).filter(Boolean);
const STORES = list(args.store ?? process.env.BENCH_WORK_STORES ?? 'sqlite,mysql');
const ONLY = list(args.only ?? process.env.BENCH_WORK_ONLY ?? 'drain,steady,request');
const BASELINES = list(args.baseline ?? process.env.BENCH_WORK_BASELINES ?? 'jetstream,bullmq').filter((b) => b !== 'none');
const CONCURRENCY = Number(args.concurrency ?? process.env.BENCH_WORK_CONCURRENCY ?? 64);
const ROUNDS = Number(args.rounds ?? process.env.BENCH_WORK_ROUNDS ?? 1);
for (const [what, values, known] of [['--store', STORES, ['sqlite', 'mysql']], ['--only', ONLY, ['drain', 'steady', 'request']], ['--baseline', BASELINES, ['jetstream', 'bullmq']]]) {
  const unknown = values.filter((v) => !known.includes(v));
  if (unknown.length) {
    console.error(`bench work: unknown ${what} ${unknown.join(', ')}; known: ${known.join(', ')}`);
    process.exit(2);
  }
}
if (!(Number.isInteger(CONCURRENCY) && CONCURRENCY >= 0) || !(Number.isInteger(ROUNDS) && ROUNDS >= 1)) {
  console.error('bench work: --concurrency must be an integer >= 0 and --rounds an integer >= 1');
  process.exit(2);
}

const WORKERS = 2;
const DRAIN_JOBS = Number(process.env.BENCH_WORK_DRAIN_JOBS ?? 10_000);
const DRAIN_BUDGET_MS = 20_000;
const ENQUEUE_IN_FLIGHT = 500;
const RATE = Number(process.env.BENCH_WORK_RATE ?? 500);
const WARMUP_MS = Number(process.env.BENCH_WORK_WARMUP_MS ?? 1_000);
const STEADY_MS = Number(process.env.BENCH_WORK_STEADY_MS ?? 10_000);
const CATCH_UP_MS = 5_000;
const REQUESTS = Number(process.env.BENCH_WORK_REQUESTS ?? 1_000);
/**
 * Warm-up before any request is measured, the same for every system: REQUEST_WARMUP requests (at
 * most REQUEST_WARMUP_MAX_MS of them: MariaDB's ~7 ms a request). A gateway spawned for the row runs
 * V8's unoptimized code for its first thousands of requests (its p50 2.5 ms over the first 500, 0.94
 * ms after 5,000: bench/README.md › work), where the JetStream row's server has run for hours; the
 * clients of every row warm up alike, by count, not by time. The p50 of the first FIRST_REQUESTS is
 * reported as well.
 */
const REQUEST_WARMUP = Number(process.env.BENCH_WORK_REQUEST_WARMUP ?? 5_000);
const REQUEST_WARMUP_MAX_MS = 15_000;
const FIRST_REQUESTS = 200;
/** The measured requests stop at REQUEST_BUDGET_MS once REQUEST_MIN are done, and at REQUEST_CAP_MS in any case. */
const REQUEST_BUDGET_MS = 8_000;
const REQUEST_MIN = 50;
const REQUEST_CAP_MS = 20_000;
const SETTLE_BUDGET_MS = 5_000;
/** The targets of issue 22, each against the JetStream row of the same run (MariaDB's steady p99 is absolute). */
const TARGETS = {
  drain: { sqlite: 1.0, mysql: 0.5 },
  steadyP99: { sqlite: 1.5 },
  steadyP99MariadbMs: 25,
  requestP50: 2.0,
};

printEnvironment('work');
const payload = 'x'.repeat(200);
const hrNow = () => Number(process.hrtime.bigint());
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** JSON ≈ 256 bytes: { seq, t, w, payload }. */
const job = (seq, warm = 0) => ({ seq, t: hrNow(), w: warm, payload });
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
const round = (x, digits = 2) => (Number.isFinite(x) ? +x.toFixed(digits) : x);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
/** The machine's load average: figures from a shared machine are read with it. */
const readLoad = () => (existsSync('/proc/loadavg') ? readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ') : 'n/a');
const loadAtStart = readLoad();

/** Waits until `done()` or the deadline; polls every `everyMs`. Resolves with whether it got there. */
async function until(done, deadline, everyMs = 5) {
  while (!(await done())) {
    if (performance.now() >= deadline) return false;
    await sleep(everyMs);
  }
  return true;
}

/** Calls fire(i, warm) RATE times a second: WARMUP_MS marked warm-up, then STEADY_MS; a late timer fires every job that is due. */
async function paced(fire) {
  const total = Math.round(((WARMUP_MS + STEADY_MS) / 1000) * RATE);
  const warm = Math.round((WARMUP_MS / 1000) * RATE);
  const start = performance.now();
  let i = 0;
  while (i < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * RATE) + 1);
    while (i < due) fire(i, i < warm ? 1 : 0), i++;
    await sleep(1);
  }
  return total;
}

/** Folds the workers' reports: how often each of the first `sent` jobs was handled, and by whom. */
function exactlyOnce(reports, sent) {
  let duplicates = 0;
  let missing = 0;
  let extra = 0;
  for (let seq = 0; seq < sent; seq++) {
    const times = reports.reduce((sum, r) => sum + (r.counts[seq] ?? 0), 0);
    if (times === 0) missing++;
    else if (times > 1) duplicates += times - 1;
  }
  for (const r of reports) {
    extra += r.outOfRange;
    for (let seq = sent; seq < r.counts.length; seq++) extra += r.counts[seq];
  }
  const perWorker = reports.map((r) => r.handled);
  return { sent, duplicates, missing, extra, perWorker, ok: duplicates === 0 && missing === 0 && extra === 0 };
}

/** complete: every job was handled within the time budget, so a missing one is lost, not late. */
const onceNote = (once, complete = true) => {
  const perWorker = `per worker ${once.perWorker.join(' / ')}`;
  if (once.ok) return `each of ${once.sent} handled exactly once (${perWorker})`;
  const extra = once.extra ? `, ${once.extra} handled that were never sent` : '';
  if (!complete) return `${once.duplicates || extra ? 'FAIL: ' : ''}${once.duplicates} duplicates${extra}; ${once.missing} of ${once.sent} not handled within the time budget (${perWorker})`;
  return `FAIL: ${once.duplicates} duplicates, ${once.missing} of ${once.sent} never handled${extra} (${perWorker})`;
};

const starters = { sqlite: () => startOurs('sqlite'), mysql: () => startOurs('mysql'), jetstream: startJetStream, bullmq: startBullMQ };

/** Starts `system`, its two workers (connected, not consuming yet), runs `body`, and stops them all. */
async function withSystem(name, mode, jobs, body) {
  const system = await starters[name]();
  let workers;
  try {
    workers = await startWorkers(WORKERS, { ...system.workerConnect, mode, jobs, concurrency: CONCURRENCY });
    return await body(system, workers);
  } finally {
    await workers?.close();
    await system.close();
  }
}

async function drain(name) {
  return withSystem(name, 'drain', DRAIN_JOBS, async (system, workers) => {
    // Enqueue: ENQUEUE_IN_FLIGHT publishes in flight, each awaited (stored) before its lane goes on.
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: ENQUEUE_IN_FLIGHT }, async () => {
        while (next < DRAIN_JOBS) {
          const seq = next++;
          await system.publish(job(seq, 1), `p${seq % 1000}`);
        }
      }),
    );
    const enqueuePerSecond = Math.round(DRAIN_JOBS / ((performance.now() - t0) / 1000));
    await workers.watch();
    const cpu0 = system.cpuUs();
    const start = performance.now();
    const go = hrNow();
    await workers.go();
    const deadline = start + DRAIN_BUDGET_MS;
    const handledAll = await until(() => workers.handled() >= DRAIN_JOBS, deadline);
    const settled = handledAll && (await until(() => system.settled(), performance.now() + SETTLE_BUDGET_MS, 2));
    const elapsed = performance.now() - start;
    const cpu1 = system.cpuUs();
    const reports = await workers.report();
    const once = exactlyOnce(reports, DRAIN_JOBS);
    const handled = reports.reduce((sum, r) => sum + r.handled, 0);
    const lastAt = Math.max(...reports.map((r) => r.lastAt));
    return {
      jobs: DRAIN_JOBS,
      handled,
      complete: handledAll && settled,
      timedOut: !handledAll,
      settled,
      seconds: round(elapsed / 1000, 3),
      jobsPerSecond: Math.round((settled ? DRAIN_JOBS : handled) / (elapsed / 1000)),
      handledPerSecond: Math.round(handled / ((lastAt - go) / 1e9)),
      enqueuePerSecond,
      serverCpuUsPerJob: round((cpu1 - cpu0) / Math.max(1, handled), 1),
      workersCpuUsPerJob: round(reports.reduce((sum, r) => sum + r.cpuUs.user + r.cpuUs.system, 0) / Math.max(1, handled), 1),
      once,
    };
  });
}

async function steady(name) {
  const total = Math.round(((WARMUP_MS + STEADY_MS) / 1000) * RATE);
  return withSystem(name, 'steady', total, async (system, workers) => {
    await workers.go();
    let errors = 0;
    let firstError;
    const cpu0 = system.cpuUs();
    const own0 = process.cpuUsage();
    const sent = await paced((seq, warm) => {
      system.publish(job(seq, warm), `p${seq % 1000}`).catch((error) => {
        errors++;
        firstError ??= String(error?.code ?? error?.message ?? error);
      });
    });
    const afterPublish = performance.now();
    await workers.watch();
    const handledAll = await until(() => workers.handled() >= sent, afterPublish + CATCH_UP_MS);
    const catchUpMs = performance.now() - afterPublish;
    const settled = handledAll && (await until(() => system.settled(), performance.now() + SETTLE_BUDGET_MS, 10));
    const cpu1 = system.cpuUs();
    const own = process.cpuUsage(own0);
    const reports = await workers.report();
    const once = exactlyOnce(reports, sent);
    const sorted = Float64Array.from(reports.flatMap((r) => r.latencies)).sort();
    return {
      sent,
      errors,
      firstError,
      samples: sorted.length,
      complete: handledAll && settled && errors === 0,
      catchUpMs: Math.round(catchUpMs),
      p50: round(percentile(sorted, 0.5)),
      p90: round(percentile(sorted, 0.9)),
      p99: round(percentile(sorted, 0.99)),
      max: round(sorted[sorted.length - 1]),
      serverCpuUsPerJob: round((cpu1 - cpu0) / sent, 1),
      // The whole machine's share: 500 jobs/s on two cores, where every process's CPU is another's wait.
      workersCpuUsPerJob: round(reports.reduce((sum, r) => sum + r.cpuUs.user + r.cpuUs.system, 0) / Math.max(1, sent), 1),
      publisherCpuUsPerJob: round((own.user + own.system) / Math.max(1, sent), 1),
      once,
    };
  });
}

async function request(name) {
  const total = REQUEST_WARMUP + REQUESTS;
  return withSystem(name, 'request', total, async (system, workers) => {
    await workers.go();
    const latencies = [];
    /** The first FIRST_REQUESTS round trips (warm-up), reported as they are: what a gateway just started does. */
    const first = [];
    let wrong = 0;
    let sent = 0;
    let warmup;
    let budget = Infinity;
    let cap = Infinity;
    const warmUntil = performance.now() + REQUEST_WARMUP_MAX_MS;
    for (let seq = 0; seq < total && latencies.length < REQUESTS; seq++) {
      const now = performance.now();
      if (warmup === undefined && (seq >= REQUEST_WARMUP || now >= warmUntil)) [warmup, budget, cap] = [seq, now + REQUEST_BUDGET_MS, now + REQUEST_CAP_MS];
      if (now >= cap || (now >= budget && latencies.length >= REQUEST_MIN)) break;
      const warming = warmup === undefined;
      const t0 = performance.now();
      sent++;
      const answer = await system.request(job(seq, warming ? 1 : 0), `r${seq}`);
      const ms = performance.now() - t0;
      // Ours: the `success` event (data.seq); JetStream: the answer message; BullMQ: the job's return value.
      const seqBack = answer?.data?.seq ?? answer?.json?.().seq ?? answer?.seq;
      if (seqBack !== seq) wrong++;
      if (!warming) latencies.push(ms);
      else if (first.length < FIRST_REQUESTS) first.push(ms);
    }
    await workers.watch();
    const handledAll = await until(() => workers.handled() >= sent, performance.now() + 2_000);
    const reports = await workers.report();
    const once = exactlyOnce(reports, sent);
    const sorted = latencies.sort((a, b) => a - b);
    return {
      sent,
      warmup: warmup ?? sent,
      firstP50: round(percentile(first.sort((a, b) => a - b), 0.5)),
      requests: sorted.length,
      wrong,
      complete: handledAll && wrong === 0,
      p50: round(percentile(sorted, 0.5)),
      p90: round(percentile(sorted, 0.9)),
      p99: round(percentile(sorted, 0.99)),
      max: round(sorted.at(-1)),
      once,
    };
  });
}

const measures = { drain, steady, request };
const medianRun = (runs, key) => runs.reduce((best, r) => (Math.abs(r[key] - median(runs.map((x) => x[key]))) < Math.abs(best[key] - median(runs.map((x) => x[key]))) ? r : best));

// Which systems run, and why a skipped one cannot.
const skipped = {};
if (STORES.includes('mysql')) skipped.mysql = await mariadbUnavailable();
if (BASELINES.includes('jetstream')) skipped.jetstream = await jetstreamUnavailable();
if (BASELINES.includes('bullmq')) skipped.bullmq = await bullmqUnavailable();
for (const [name, reason] of Object.entries(skipped)) if (reason) console.log(`skipping ${name}: ${reason}`);
// The baseline between ours: SQLite, JetStream, MariaDB; the reference last.
const order = ['sqlite', 'jetstream', 'mysql', 'bullmq'].filter((name) => (STORES.includes(name) || BASELINES.includes(name)) && !skipped[name]);
const sortKey = { drain: 'jobsPerSecond', steady: 'p99', request: 'p50' };
console.log(`systems: ${order.join(', ')}; measures: ${ONLY.join(', ')}; ${WORKERS} worker processes, concurrency ${CONCURRENCY || '(not passed)'}, ${ROUNDS} round(s); load average ${loadAtStart}`);

const results = {};
const failures = [];
for (const measure of ONLY) {
  const runs = Object.fromEntries(order.map((name) => [name, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of order) {
      try {
        const t0 = performance.now();
        const result = await measures[measure](name);
        runs[name].push(result);
        console.log(`${measure} ${name} (${((performance.now() - t0) / 1000).toFixed(1)} s with set-up): ${JSON.stringify({ ...result, once: undefined })} ${onceNote(result.once, result.complete)}`);
      } catch (error) {
        console.error(`${measure} ${name} failed: ${error?.stack ?? error}`);
        failures.push(`${measure} ${name}: ${error?.message ?? error}`);
      }
    }
  }
  results[measure] = Object.fromEntries(Object.entries(runs).filter(([, list]) => list.length).map(([name, list]) => [name, { ...medianRun(list, sortKey[measure]), rounds: list.map((x) => x[sortKey[measure]]) }]));
}
const loadAtEnd = readLoad();

// ── report ──
const label = { sqlite: 'ours, SQLite', mysql: 'ours, MariaDB', jetstream: 'JetStream pull consumer', bullmq: 'BullMQ (Redis), reference' };
const tables = {
  drain: (r) => ({ 'jobs/s': r.jobsPerSecond, 'handled/s': r.handledPerSecond, 's': r.seconds, 'enqueue/s': r.enqueuePerSecond, 'server µs/job': r.serverCpuUsPerJob, 'workers µs/job': r.workersCpuUsPerJob, complete: r.complete }),
  steady: (r) => ({ p50: r.p50, p90: r.p90, p99: r.p99, max: r.max, samples: r.samples, 'catch-up ms': r.catchUpMs, 'server µs/job': r.serverCpuUsPerJob, 'workers µs/job': r.workersCpuUsPerJob, 'publisher µs/job': r.publisherCpuUsPerJob, complete: r.complete }),
  request: (r) => ({ p50: r.p50, p90: r.p90, p99: r.p99, max: r.max, requests: r.requests, 'warm-up': r.warmup, [`first ${FIRST_REQUESTS} p50`]: r.firstP50, complete: r.complete }),
};
for (const measure of ONLY) {
  console.log(`\n${measure}${measure === 'drain' ? ` (${DRAIN_JOBS} jobs queued, ${WORKERS} workers)` : measure === 'steady' ? ` (${RATE} jobs/s, ${WARMUP_MS / 1000} s warm-up + ${STEADY_MS / 1000} s; enqueue → handler start, ms)` : ` (sequential, after ${REQUEST_WARMUP} warm-up requests, ${REQUEST_WARMUP_MAX_MS / 1000} s at most; round trip ms)`}`);
  console.table(Object.entries(results[measure] ?? {}).map(([name, r]) => ({ system: label[name], ...tables[measure](r), 'exactly once': onceNote(r.once, r.complete) })));
}

const summary = [];
const js = (measure) => results[measure]?.jetstream;
/** Lost (all were due and one never came), handled twice, or a request answered with another's outcome. */
const onceFailed = (r) => r.once.duplicates > 0 || r.once.extra > 0 || (r.complete && r.once.missing > 0) || r.wrong > 0;
const verdictNote = (r, extra = '') => [onceNote(r.once, r.complete), r.complete ? '' : 'incomplete (time budget hit or not settled; see output)', extra].filter(Boolean).join('; ');
for (const store of STORES) {
  const name = label[store];
  const d = results.drain?.[store];
  if (d) {
    const base = js('drain');
    const ratio = base ? d.jobsPerSecond / base.jobsPerSecond : NaN;
    summary.push({ measure: `drain ${DRAIN_JOBS} jobs, ${WORKERS} workers, jobs/s, ${name}`, value: d.jobsPerSecond, baseline: base ? `JetStream ${base.jobsPerSecond}` : 'no JetStream run', ratio: base ? `${ratio.toFixed(2)}x` : '', target: `>= ${TARGETS.drain[store].toFixed(1)}x JetStream`, meets: d.complete && d.once.ok && ratio >= TARGETS.drain[store], note: verdictNote(d) });
  }
  const s = results.steady?.[store];
  if (s) {
    const base = js('steady');
    const target = store === 'sqlite' ? `p99 <= ${TARGETS.steadyP99.sqlite}x JetStream` : `p99 <= ${TARGETS.steadyP99MariadbMs} ms`;
    const meets = store === 'sqlite' ? base && s.p99 <= TARGETS.steadyP99.sqlite * base.p99 : s.p99 <= TARGETS.steadyP99MariadbMs;
    summary.push({ measure: `steady ${RATE}/s, enqueue → handler p50 / p99 ms, ${name}`, value: `${s.p50} / ${s.p99}`, baseline: base ? `JetStream ${base.p50} / ${base.p99}` : 'no JetStream run', ratio: base ? `p99 ${(s.p99 / base.p99).toFixed(1)}x` : '', target, meets: Boolean(s.complete && s.once.ok && meets), note: verdictNote(s) });
  }
  const q = results.request?.[store];
  if (q) {
    const base = js('request');
    summary.push({ measure: `request() sequential p50 / p99 ms, ${name}`, value: `${q.p50} / ${q.p99}`, baseline: base ? `JetStream publish → consume → reply ${base.p50} / ${base.p99}` : 'no JetStream run', ratio: base ? `p50 ${(q.p50 / base.p50).toFixed(1)}x` : '', target: `p50 <= ${TARGETS.requestP50}x JetStream`, meets: Boolean(base && q.complete && q.once.ok && q.p50 <= TARGETS.requestP50 * base.p50), note: verdictNote(q) });
  }
}
for (const baseline of ['jetstream', 'bullmq']) {
  const figures = [results.drain?.[baseline] && `drain ${results.drain[baseline].jobsPerSecond} jobs/s`, results.steady?.[baseline] && `steady p50 / p99 ${results.steady[baseline].p50} / ${results.steady[baseline].p99} ms`, results.request?.[baseline] && `request p50 / p99 ${results.request[baseline].p50} / ${results.request[baseline].p99} ms`].filter(Boolean);
  if (!figures.length) continue;
  const runs = ONLY.map((m) => results[m]?.[baseline]).filter(Boolean);
  const bad = runs.find((r) => !r.once.ok || !r.complete);
  summary.push({ measure: `${label[baseline]}: its own figures`, value: figures.join('; '), baseline: '', ratio: '', target: '', note: bad ? verdictNote(bad) : 'every job handled exactly once' });
}
for (const name of Object.keys(skipped)) if (skipped[name]) summary.push({ measure: `work, ${label[name]}`, value: 'skipped', note: skipped[name] });
for (const failure of failures) summary.push({ measure: 'work (a run failed)', value: 'failed', note: failure });

const lossOrDuplicates = ONLY.flatMap((m) => Object.entries(results[m] ?? {}).filter(([, r]) => onceFailed(r)).map(([name]) => `${m} ${name}`));
writeResult('work', {
  workers: WORKERS, concurrency: CONCURRENCY, rounds: ROUNDS, drainJobs: DRAIN_JOBS, rate: RATE, steadyMs: STEADY_MS, requests: REQUESTS,
  loadAverage: { start: loadAtStart, end: loadAtEnd }, skipped, results, failures, lossOrDuplicates,
  summary,
});
if (lossOrDuplicates.length) console.log(`\nFAIL: jobs lost or handled twice in: ${lossOrDuplicates.join(', ')}`);
if (failures.length) console.log(`\nruns that failed: ${failures.join('; ')}`);
process.exit(lossOrDuplicates.length || failures.length ? 1 : 0);
