#!/usr/bin/env node
// npm run bench: builds the packages and the gateway (tsc -b tsconfig.build.json), then runs each
// step below in its own process with its own time bound, and prints one summary table from the
// `summary` rows every bench merges into bench/results.json (see results.mjs).
// `node bench/run.js compose fan-out` runs only the named steps.
// Exits 1 if a step fails (a missed speed target is reported, not a failure; a step that cannot run
// here, browser-open without Chromium, is reported skipped with its reason).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { environment } from './results.mjs';
import { SKIPPED } from './chromium.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** name → script and the time after which run.js kills it. Each script bounds its own work well below that. */
const STEPS = [
  { name: 'size', script: 'scripts/size.mjs', timeoutMs: 120_000 },
  { name: 'compose', script: 'bench/compose.mjs', timeoutMs: 90_000 },
  { name: 'snapshots', script: 'bench/snapshots.mjs', timeoutMs: 120_000 },
  { name: 'publish-throughput', script: 'bench/publish-throughput.mjs', timeoutMs: 90_000 },
  { name: 'browser-open', script: 'bench/browser-open.mjs', timeoutMs: 90_000 },
  { name: 'console-open', script: 'bench/console-open.mjs', timeoutMs: 180_000 },
  { name: 'fan-out', script: 'bench/fan-out.mjs', timeoutMs: 90_000 },
  { name: 'latency', script: 'bench/latency.mjs', timeoutMs: 150_000 },
  { name: 'latency-v4', script: 'bench/latency-v4.mjs', timeoutMs: 150_000 },
  { name: 'work', script: 'bench/work.mjs', timeoutMs: 300_000 },
  { name: 'idle-memory', script: 'bench/idle-memory.mjs', timeoutMs: 90_000 },
  { name: 'resume', script: 'bench/resume.mjs', timeoutMs: 90_000 },
  { name: 'start', script: 'bench/start.mjs', timeoutMs: 90_000 },
];

const step = (label, command, args, timeoutMs) => {
  console.log(`\n── ${label} ──`);
  const t0 = Date.now();
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', timeout: timeoutMs });
  const ok = result.status === 0;
  // A step that cannot run on this machine (no Chromium) printed why and exited SKIPPED: the others go on.
  const skipped = result.status === SKIPPED;
  console.log(`── ${label}: ${ok ? 'ok' : skipped ? 'skipped (see the reason above)' : `FAILED (${result.error?.message ?? `exit ${result.status ?? result.signal}`})`} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return ok ? true : skipped ? 'skipped' : false;
};

const only = process.argv.slice(2);
const unknown = only.filter((name) => !STEPS.some((s) => s.name === name));
if (unknown.length) {
  console.error(`bench: unknown step(s) ${unknown.join(', ')}; known: ${STEPS.map((s) => s.name).join(', ')}`);
  process.exit(2);
}
const selected = only.length ? STEPS.filter((s) => only.includes(s.name)) : STEPS;

const started = Date.now();
// The machine's load when the run starts and ends: benches on a shared machine are read with it.
const loadavg = () => (existsSync('/proc/loadavg') ? readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ') : 'n/a');
const loadAtStart = loadavg();
const status = {};
status.build =
  step('build (tsc -b tsconfig.build.json)', process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b', 'tsconfig.build.json'], 300_000) &&
  step('bundle (scripts/bundle-gateway.mjs, what the bin runs)', process.execPath, [join(root, 'scripts/bundle-gateway.mjs')], 120_000);
if (!status.build) {
  console.error('bench: build failed; not running the benchmarks against a stale dist');
  process.exit(1);
}
const startedAt = {};
for (const s of selected) {
  startedAt[s.name] = new Date().toISOString();
  status[s.name] = step(`${s.name} (${s.script})`, process.execPath, [s.script], s.timeoutMs);
}

const read = (file) => (existsSync(join(root, file)) ? JSON.parse(readFileSync(join(root, file), 'utf8')) : {});
const results = read('bench/results.json');
const size = read('bench/size.json');

const env = environment();
console.log('\n══ bench summary ══');
console.log(`cores: ${env.cores}  node: ${env.node}  cpu: ${env.cpu}  total: ${((Date.now() - started) / 1000).toFixed(0)} s  load average at start: ${loadAtStart}, at end: ${loadavg()}`);
const rows = [];
for (const s of selected) {
  if (status[s.name] === 'skipped') {
    rows.push({ bench: s.name, measure: '(skipped, see its output above)', value: '', baseline: '', ratio: '', target: '', status: 'SKIPPED' });
    continue;
  }
  // A failed step's own rows are shown too when it wrote them in this run (work: a job lost or handled twice).
  const wroteRows = (results[s.name]?.date ?? '') >= startedAt[s.name];
  if (!status[s.name]) {
    rows.push({ bench: s.name, measure: '(step failed, see its output above)', value: '', baseline: '', ratio: '', target: '', status: 'FAILED' });
    if (!wroteRows) continue;
  }
  if (s.name === 'size') {
    // One row per bundle with a budget, at its worst bundler (scripts/size.mjs measures vite, esbuild and webpack).
    const bundles = [...new Set((size.bundlers ?? []).map((b) => b.bundle))];
    for (const bundle of bundles) {
      const measured = size.bundlers.filter((b) => b.bundle === bundle);
      const worst = measured.reduce((a, b) => (b.gzip > a.gzip ? b : a));
      const budget = size.budgets?.[bundle];
      rows.push({
        bench: 'size',
        measure: `browser ${bundle} gzip bytes, worst bundler (${worst.bundler}, ${worst.via})`,
        value: worst.gzip,
        baseline: 'none (v4 has no browser client): a budget',
        ratio: budget ? `${(worst.gzip / budget).toFixed(2)}x the budget` : '',
        target: budget ? `<= ${budget}` : 'reported',
        status: budget ? (worst.gzip <= budget ? 'meets' : 'BELOW') : '',
      });
    }
    if (bundles.length === 0) rows.push({ bench: 'size', measure: 'browser client gzip bytes', value: '(see bench/size.json)', baseline: '', ratio: '', target: '', status: '' });
    continue;
  }
  for (const row of results[s.name]?.summary ?? []) {
    const verdict = row.meets === undefined ? '' : row.meets ? 'meets' : 'BELOW';
    rows.push({ bench: s.name, measure: row.measure, value: row.value, baseline: row.baseline ?? '', ratio: row.ratio ?? '', target: row.target ?? '', status: [verdict, row.note].filter(Boolean).join(' ') });
  }
}
console.table(rows);
process.exit(Object.values(status).every((value) => value !== false) ? 0 : 1);
