// Shared helpers: environment header and merging results into bench/results.json by bench name.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const resultsPath = join(dirname(fileURLToPath(import.meta.url)), 'results.json');

export function environment() {
  const cores = typeof availableParallelism === 'function' ? availableParallelism() : cpus().length;
  return { cores, node: process.version, cpu: cpus()[0]?.model ?? 'unknown', platform: `${process.platform}-${process.arch}` };
}

export function printEnvironment(name) {
  const env = environment();
  console.log(`\n== bench ${name} ==  cores: ${env.cores}  node: ${env.node}  cpu: ${env.cpu}`);
  return env;
}

export function writeResult(name, result) {
  let all = {};
  if (existsSync(resultsPath)) {
    try { all = JSON.parse(readFileSync(resultsPath, 'utf8')); } catch { all = {}; }
  }
  all[name] = { date: new Date().toISOString(), environment: environment(), ...result };
  writeFileSync(resultsPath, JSON.stringify(all, null, 2) + '\n');
}

/** Canonical JSON: object keys sorted, so key order (which v4 does not define) is ignored. */
export function canonical(value) {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]])) : v,
  );
}

/** mulberry32: a small seeded PRNG. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Every bench passes `summary: [{ measure, value, target, meets?, note? }]` to writeResult; run.js
// prints those rows, in step order, as the one summary table of `npm run bench`.
