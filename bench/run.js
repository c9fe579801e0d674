#!/usr/bin/env node
// npm run bench: builds the packages and the gateway (tsc -b tsconfig.build.json), then runs
// the browser size budget (scripts/size.mjs), bench/compose.mjs and bench/publish-throughput.mjs,
// and prints a combined summary from bench/results.json and bench/size.json.
// Exits 1 if a step fails (a missed speed target is reported, not a failure).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const step = (label, command, args, timeoutMs) => {
  console.log(`\n── ${label} ──`);
  const t0 = Date.now();
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', timeout: timeoutMs });
  const ok = result.status === 0;
  console.log(`── ${label}: ${ok ? 'ok' : `FAILED (${result.error?.message ?? `exit ${result.status ?? result.signal}`})`} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return ok;
};

const status = {};
status.build = step('build (tsc -b tsconfig.build.json)', process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b', 'tsconfig.build.json'], 300_000);
if (!status.build) {
  console.error('bench: build failed; not running the benchmarks against a stale dist');
  process.exit(1);
}
status.size = step('size (scripts/size.mjs)', process.execPath, ['scripts/size.mjs'], 120_000);
status.compose = step('compose (bench/compose.mjs)', process.execPath, ['bench/compose.mjs'], 90_000);
status['publish-throughput'] = step('publish-throughput (bench/publish-throughput.mjs)', process.execPath, ['bench/publish-throughput.mjs'], 90_000);

const read = (file) => (existsSync(join(root, file)) ? JSON.parse(readFileSync(join(root, file), 'utf8')) : {});
const results = read('bench/results.json');
const size = read('bench/size.json');
const compose = results.compose;
const publish = results['publish-throughput'];
const env = compose?.environment ?? publish?.environment;

console.log('\n══ bench summary ══');
if (env) console.log(`cores: ${env.cores}  node: ${env.node}  cpu: ${env.cpu}`);
const rows = [];
const sizeGzip = size.client?.gzip;
rows.push({ bench: 'size', measure: 'browser client gzip bytes', value: sizeGzip ?? '(see bench/size.json)', target: '<= 15360', status: status.size ? 'ok' : 'FAILED' });
if (compose) {
  rows.push({ bench: 'compose', measure: 'v4 baseline ms (100k events)', value: compose.v4Ms, target: '', status: status.compose ? 'ok' : 'FAILED' });
  rows.push({ bench: 'compose', measure: 'composeEventlogState ms', value: compose.coreMs, target: '', status: '' });
  rows.push({ bench: 'compose', measure: 'speed-up vs v4 (x)', value: compose.speedup, target: '>= 5', status: compose.meetsTarget ? 'meets' : 'BELOW' });
  rows.push({ bench: 'compose', measure: 'applyEvent ns/event', value: compose.applyEventNsPerEvent, target: '', status: '' });
}
if (publish) {
  for (const r of publish.runs) {
    rows.push({ bench: 'publish-throughput', measure: `events/s, ${r.inFlight} in flight`, value: r.eventsPerSecond, target: '>= 20000', status: r.eventsPerSecond >= 20_000 ? 'meets' : 'BELOW' });
    rows.push({ bench: 'publish-throughput', measure: `ack p50 / p99 ms, ${r.inFlight} in flight`, value: `${r.p50Ms} / ${r.p99Ms}`, target: '', status: r.errors ? `${r.errors} errors` : '' });
  }
}
console.table(rows);
console.log('Not covered yet: fan-out vs plain ws, latency at 1k/s with 100 subscribers, MariaDB throughput vs v4, browser warm vs cold open, memory per idle connection, resume of 10k events (see bench/README.md).');
process.exit(Object.values(status).every(Boolean) ? 0 : 1);
