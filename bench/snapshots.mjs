#!/usr/bin/env node
// bench snapshots: readEventlogState of one process with 100,000 events (plus 50 after the latest
// snapshot), asked through @eventflow/node of two gateways (gateway/dist, each in its own process)
// on the same SQLite file in the same run: one with EVENTFLOW_SNAPSHOT_EVERY=100 (the default: the
// latest snapshot plus the events after it) and one with EVENTFLOW_SNAPSHOT_EVERY=0 (snapshots off:
// the full fold of the eventlog, what every read cost before). Both answers must be identical
// (JSON text, key order included) before anything is timed. Target: >= 50x faster.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createNodeClient } from '@eventflow/node';
import { SqliteStore } from '../gateway/dist/store/sqlite/sqlite.js';
import { startServer } from './server-support.mjs';
import { printEnvironment, prng, writeResult } from './results.mjs';

const N = Number(process.env.BENCH_SNAPSHOT_EVENTS ?? 100_000);
const AFTER = 50;
const TARGET = 50;
const BUDGET_MS = 30_000;
printEnvironment('snapshots');

const random = prng(0x5a9);
const pick = (list) => list[Math.floor(random() * list.length)];
const statuses = ['new', 'open', 'paid', 'shipped', 'closed'];
const tags = Array.from({ length: 40 }, (_, i) => `tag-${i}`);
/** Order-like data: status changes, growing tag sets, lines by key, counters. */
const eventData = (i) => {
  const data = {};
  if (random() < 0.4) data.status = pick(statuses);
  if (random() < 0.3) data.tags = [pick(tags), pick(tags)];
  if (random() < 0.3) data.lines = { [`line-${i % 50}`]: { sku: `sku-${Math.floor(random() * 200)}`, qty: 1 + (i % 5) } };
  if (random() < 0.2) data.counters = { [`c${i % 20}`]: i };
  if (Object.keys(data).length === 0) data.touched = i;
  return data;
};

const dir = mkdtempSync(join(tmpdir(), 'eventflow-bench-snapshots-'));
const path = join(dir, 'snapshots.db');
const t0 = performance.now();
const store = new SqliteStore({ path });
await store.init();
for (let start = 0; start < N; start += 1000) {
  const batch = Array.from({ length: Math.min(1000, N - start) }, (_, i) => ({ event: { id: `e${start + i}`, domain: 'orders', name: 'updated', pid: 'long', data: eventData(start + i) } }));
  await store.appendBatch(batch);
}
await store.close();
console.log(`${N} events written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

// One gateway per SQLite file (a second one on a held file does not start): each gets a copy.
const fullPath = join(dir, 'snapshots-full.db');
copyFileSync(path, fullPath);
// The full fold's answer is one large frame: give both gateways room for it.
const common = { EVENTFLOW_MAX_BUFFERED_BYTES: 256 * 1024 * 1024 };
const withSnapshots = await startServer('gateway', { gatewayConfig: { ...common, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_SNAPSHOT_EVERY: 100 } });
const fullFold = await startServer('gateway', { gatewayConfig: { ...common, EVENTFLOW_SQLITE_PATH: fullPath, EVENTFLOW_SNAPSHOT_EVERY: 0 } });
const a = createNodeClient(withSnapshots.url);
const b = createNodeClient(fullFold.url);
try {
  // The first read folds everything and stores the snapshot; then events arrive after it.
  const firstStarted = performance.now();
  await a.readEventlogState('orders', 'long');
  const firstMs = performance.now() - firstStarted;
  for (let i = 0; i < AFTER; i++) {
    // The same events (ids and data) into both copies.
    const event = { id: `after-${i}`, domain: 'orders', name: 'updated', pid: 'long', data: eventData(N + i) };
    await a.publish(event);
    await b.publish(event);
  }

  const snapshotState = JSON.stringify(await a.readEventlogState('orders', 'long'));
  const fullState = JSON.stringify(await b.readEventlogState('orders', 'long'));
  if (snapshotState !== fullState) {
    console.error('snapshots: the snapshot path and the full fold differ; not timing');
    process.exit(1);
  }
  console.log(`results identical (${(snapshotState.length / 1e3).toFixed(1)} kB of state JSON); first read (full fold + snapshot stored): ${firstMs.toFixed(0)} ms`);

  const samples = { snapshot: [], full: [] };
  const started = performance.now();
  for (let round = 0; round < 15 && performance.now() - started < BUDGET_MS; round++) {
    let t = performance.now();
    await b.readEventlogState('orders', 'long');
    samples.full.push(performance.now() - t);
    for (let i = 0; i < 5; i++) {
      t = performance.now();
      await a.readEventlogState('orders', 'long');
      samples.snapshot.push(performance.now() - t);
    }
  }
  const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  const snapshotMs = median(samples.snapshot);
  const fullMs = median(samples.full);
  const ratio = fullMs / snapshotMs;
  console.table([
    { path: 'full fold (EVENTFLOW_SNAPSHOT_EVERY=0, baseline)', 'median ms': +fullMs.toFixed(2), 'min ms': +Math.min(...samples.full).toFixed(2), runs: samples.full.length },
    { path: `snapshot + ${AFTER} events (EVENTFLOW_SNAPSHOT_EVERY=100)`, 'median ms': +snapshotMs.toFixed(2), 'min ms': +Math.min(...samples.snapshot).toFixed(2), runs: samples.snapshot.length },
  ]);
  console.log(`snapshot path: ${ratio.toFixed(1)}x faster (target >= ${TARGET}x: ${ratio >= TARGET ? 'meets' : 'BELOW'} target)`);
  writeResult('snapshots', {
    events: N + AFTER,
    snapshotMs: +snapshotMs.toFixed(3),
    fullFoldMs: +fullMs.toFixed(2),
    firstReadMs: +firstMs.toFixed(1),
    speedup: +ratio.toFixed(1),
    samples,
    summary: [
      { measure: `readEventlogState ms (${N + AFTER} events, snapshot + ${AFTER}, median)`, value: +snapshotMs.toFixed(2), baseline: `full fold ${+fullMs.toFixed(1)}`, ratio: `${ratio.toFixed(1)}x faster`, target: `>= ${TARGET}x`, meets: ratio >= TARGET },
    ],
  });
} finally {
  await a.close();
  await b.close();
  await withSnapshots.stop();
  await fullFold.stop();
  rmSync(dir, { recursive: true, force: true });
}
