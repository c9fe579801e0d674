#!/usr/bin/env node
// bench start: how long the gateway process takes from spawn to listening on the embedded store,
// and its RSS then.
//   gateway:  `node gateway/bin/eventflow-gateway.js` (what `npx eventflow-gateway` and `npm start`
//             run: gateway/bundle/main.cjs, scripts/bundle-gateway.mjs) with a fresh temp SQLite file
//             and EVENTFLOW_PORT=0; timed from spawn() to the banner's `clients:` line on stdout
//             (printed once it listens), then checked by a GET /healthz on the printed address.
//             RSS: VmRSS of the process right after the banner. The bundle is made first when it is
//             missing or older than dist/ (scripts/bundle-gateway.mjs --if-stale).
//   reference: `node gateway/dist/main.js`, the same code unbundled (~700 modules to resolve, read
//             and compile), as it started before the bundle.
//   baseline: `node -e` starting an empty http server on port 0 and printing a line once it
//             listens: the honest floor, Node itself starting and binding a port.
// Alternating runs (default 7 of each), medians; each run bounded by a kill timeout.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gatewayMain } from './v4-support.mjs';
import { printEnvironment, writeResult } from './results.mjs';

const RUNS = Number(process.env.BENCH_START_RUNS ?? 7);
const gatewayBin = fileURLToPath(new URL('../gateway/bin/eventflow-gateway.js', import.meta.url));
// What the bin runs must be current: the bundle is rebuilt when a build of dist/ is newer (the bin's rule).
execFileSync(process.execPath, [fileURLToPath(new URL('../scripts/bundle-gateway.mjs', import.meta.url)), '--if-stale'], { stdio: 'inherit' });
const TIMEOUT_MS = 15_000;
/**
 * The gateway's start against the same run's empty Node server (issue 22: an absolute bound in ms
 * does not hold from one machine to the next; the floor moves with the machine as the gateway does).
 * 300 ms was the absolute target before; it is printed as a reference.
 */
const TARGET_RATIO = 2.5;
const REFERENCE_MS = 300;
printEnvironment('start');

const FLOOR = "require('node:http').createServer((q, s) => s.end('ok')).listen(0, '127.0.0.1', function () { console.log('  clients:   ws://127.0.0.1:' + this.address().port + '/'); })";

const rssKb = (pid) => {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
};

/** Spawns `args`, resolves with ms until the `clients:` line, the RSS then, and the port. */
function timeStart(args, env) {
  const childEnv = { ...process.env, ...env };
  delete childEnv.NODE_OPTIONS;
  // Where it is set (a proxy's CA, say), every Node process reads and parses those certificates as
  // it starts (~75 ms here): the same time added to the floor and the gateway, which brings the
  // ratio towards 1 (bench/README.md › start).
  delete childEnv.NODE_EXTRA_CA_CERTS;
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (chunk) => (err += chunk));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`${args.join(' ')}: no "clients:" line within ${TIMEOUT_MS} ms\n${out}\n${err}`));
    }, TIMEOUT_MS);
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /clients:\s+ws:\/\/[^:]+:(\d+)\//.exec(out);
      if (!match || child.listening) return;
      child.listening = true;
      const ms = performance.now() - t0;
      const rss = rssKb(child.pid);
      clearTimeout(timer);
      resolve({ ms, rssKb: rss, port: Number(match[1]), stop });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (!child.listening) reject(new Error(`${args.join(' ')} exited (${code ?? signal}) before listening\n${out}\n${err}`));
    });
  });
}

async function gatewayRun(main = gatewayBin) {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-bench-start-'));
  try {
    const run = await timeStart([main], { EVENTFLOW_PORT: '0', EVENTFLOW_SQLITE_PATH: join(dir, 'start.db'), EVENTFLOW_LOG_LEVEL: 'warn' });
    try {
      const health = await fetch(`http://127.0.0.1:${run.port}/healthz`, { signal: AbortSignal.timeout(5_000) });
      if (!health.ok) throw new Error(`/healthz answered ${health.status}`);
    } finally {
      await run.stop();
    }
    return run;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function floorRun() {
  const run = await timeStart(['-e', FLOOR], {});
  await run.stop();
  return run;
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

// One of each first, not counted: the disk cache holds the files after it.
await gatewayRun();
await gatewayRun(gatewayMain);
await floorRun();
const gateway = [];
const unbundled = [];
const floor = [];
for (let i = 0; i < RUNS; i++) {
  gateway.push(await gatewayRun());
  unbundled.push(await gatewayRun(gatewayMain));
  floor.push(await floorRun());
}
const summarise = (runs) => ({
  runs: runs.length,
  medianMs: +median(runs.map((r) => r.ms)).toFixed(1),
  minMs: +Math.min(...runs.map((r) => r.ms)).toFixed(1),
  maxMs: +Math.max(...runs.map((r) => r.ms)).toFixed(1),
  medianRssMb: +(median(runs.map((r) => r.rssKb)) / 1024).toFixed(1),
});
const g = summarise(gateway);
const u = summarise(unbundled);
const f = summarise(floor);
console.log(`spawn → "clients:" line (listening), ${RUNS} alternating runs after one of each not counted`);
console.table([
  { process: 'gateway (bin → gateway/bundle/main.cjs, SQLite temp file)', ...g },
  { process: 'reference: gateway/dist/main.js, unbundled', ...u },
  { process: 'baseline: node -e empty http server', ...f },
]);
const ratio = g.medianMs / f.medianMs;
console.log(`gateway start median ${g.medianMs} ms, ${ratio.toFixed(2)}x the floor (target <= ${TARGET_RATIO}x: ${ratio <= TARGET_RATIO ? 'meets' : 'BELOW'} target; the former absolute ${REFERENCE_MS} ms: ${g.medianMs <= REFERENCE_MS ? 'within' : 'above'}); RSS ${g.medianRssMb} MB (floor ${f.medianRssMb} MB)`);
writeResult('start', {
  runs: RUNS, gateway: g, unbundled: u, floor: f,
  summary: [
    { measure: 'gateway start → listening ms, SQLite (median)', value: `${g.medianMs} (${g.minMs}–${g.maxMs})`, baseline: `node -e http server ${f.medianMs}`, ratio: `${ratio.toFixed(2)}x`, target: `<= ${TARGET_RATIO}x the baseline`, meets: ratio <= TARGET_RATIO, note: `former absolute target ${REFERENCE_MS} ms: ${g.medianMs <= REFERENCE_MS ? 'within' : 'above'}` },
    { measure: 'reference: unbundled gateway/dist/main.js start ms (median)', value: `${u.medianMs} (${u.minMs}–${u.maxMs})`, baseline: `bundle ${g.medianMs}`, ratio: `${(u.medianMs / g.medianMs).toFixed(1)}x`, target: '' },
    { measure: 'gateway RSS MB at start', value: g.medianRssMb, baseline: `node -e http server ${f.medianRssMb}`, ratio: `${(g.medianRssMb / f.medianRssMb).toFixed(1)}x`, target: '' },
  ],
});
