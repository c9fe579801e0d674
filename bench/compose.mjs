#!/usr/bin/env node
// bench compose: composeEventlogState (@eventflow/core, built dist) over 100,000 events versus a
// faithful plain-JS re-implementation of v4's chunked deep merge (bench/v4-compose.mjs), plus the
// per-event cost of folding the same log with applyEvent. Results must be deep-equal (canonical
// JSON, sorted keys) before anything is timed. Bounded to ~45 s of timing.
import { applyEvent, composeEventlogState } from '@eventflow/core';
import { composeEventlogStateV4 } from './v4-compose.mjs';
import { canonical, printEnvironment, prng, writeResult } from './results.mjs';

const N = Number(process.env.BENCH_COMPOSE_EVENTS ?? 100_000);
const BUDGET_MS = 45_000;
const started = performance.now();
const env = printEnvironment('compose');

// ── realistic event data: nested objects, arrays with overlapping items, overwrites, nulls ──
const random = prng(0x5eed);
const pick = (list) => list[Math.floor(random() * list.length)];
const int = (n) => Math.floor(random() * n);
const statuses = ['new', 'open', 'pending', 'paid', 'shipped', 'closed', 'cancelled'];
const tags = Array.from({ length: 40 }, (_, i) => `tag-${i}`);
const cities = ['Oslo', 'Lund', 'Porto', 'Turin', 'Gent', 'Brno', 'Graz', 'Cork'];

function eventData(i) {
  const data = {};
  const r = random();
  if (r < 0.35) {
    data.status = pick(statuses);
    data.updatedAt = 1_700_000_000_000 + i * 1000;
  }
  if (random() < 0.3) data.tags = Array.from({ length: 1 + int(4) }, () => pick(tags)); // overlaps with earlier tags
  if (random() < 0.25) {
    data.customer = { name: `name-${int(500)}`, address: { city: pick(cities), zip: String(10000 + int(90000)) } };
    if (random() < 0.3) data.customer.address.lines = [`street ${int(100)}`];
  }
  if (random() < 0.25) {
    const line = `line-${int(30)}`;
    data.lines = { [line]: { sku: `sku-${int(200)}`, qty: 1 + int(5), price: Math.round(random() * 10000) / 100 } };
    if (random() < 0.2) data.lines[line].discounts = [pick(['ten', 'twenty', 'promo', 'vip'])];
  }
  if (random() < 0.15) data.counters = { [`c${int(20)}`]: int(1000), views: i };
  if (random() < 0.05) data.note = null; // clears by overwriting with null
  if (random() < 0.05) data.note = `note ${i}`;
  if (random() < 0.1) data.meta = { source: pick(['web', 'app', 'api']), trace: [i % 97, (i * 7) % 97] };
  if (Object.keys(data).length === 0) data.touched = i;
  return data;
}

const events = Array.from({ length: N }, (_, i) => ({ id: `e${i}`, domain: 'order', name: 'updated', pid: `p1`, data: eventData(i) }));
const eventBytes = JSON.stringify(events.map((e) => e.data)).length;

// ── correctness first ──
const v4Result = composeEventlogStateV4(events);
const coreResult = composeEventlogState(events);
let folded = {};
for (const event of events) folded = applyEvent(folded, event);
const v4Json = canonical(v4Result);
if (canonical(coreResult) !== v4Json) {
  console.error('compose: composeEventlogState result differs from the v4 baseline; not timing');
  process.exit(1);
}
// With all-object data and no type switches at a path, size-1 folding equals size 10 (state.ts docs).
const applyEqual = canonical(folded) === v4Json;
console.log(`events: ${N}, data JSON: ${(eventBytes / 1e6).toFixed(1)} MB, state JSON: ${(v4Json.length / 1e3).toFixed(1)} kB; results deep-equal: yes; applyEvent fold equal: ${applyEqual ? 'yes' : 'NO'}`);

// ── timing: alternate implementations, warm-up once, stop at the budget ──
function time(fn) {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}
const samples = { v4: [], core: [], apply: [] };
const runs = { v4: () => composeEventlogStateV4(events), core: () => composeEventlogState(events), apply: () => { let s = {}; for (const e of events) s = applyEvent(s, e); return s; } };
for (const fn of Object.values(runs)) fn(); // warm-up
const maxRounds = 7;
for (let round = 0; round < maxRounds; round++) {
  for (const [name, fn] of Object.entries(runs)) samples[name].push(time(fn));
  if (performance.now() - started > BUDGET_MS) break;
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const v4Ms = median(samples.v4);
const coreMs = median(samples.core);
const applyMs = median(samples.apply);
const ratio = v4Ms / coreMs;
const applyNs = (applyMs * 1e6) / N;

console.table([
  { implementation: 'v4 chunked deep merge (baseline)', 'median ms': +v4Ms.toFixed(1), 'min ms': +Math.min(...samples.v4).toFixed(1), runs: samples.v4.length },
  { implementation: 'composeEventlogState (core)', 'median ms': +coreMs.toFixed(1), 'min ms': +Math.min(...samples.core).toFixed(1), runs: samples.core.length },
  { implementation: 'applyEvent fold (core)', 'median ms': +applyMs.toFixed(1), 'min ms': +Math.min(...samples.apply).toFixed(1), runs: samples.apply.length },
]);
const verdict = ratio >= 5 ? 'meets' : 'BELOW';
console.log(`compose speed-up vs v4: ${ratio.toFixed(2)}x (target >= 5x: ${verdict} target)`);
console.log(`applyEvent: ${applyNs.toFixed(0)} ns/event`);
// What made the difference (bench/README.md): composeEventlogState assigns each event straight into
// one mutable state (no chunk MERGE, no clone of each chunk's result, array unions through a kept
// Set), and falls back to v4's own chunked algorithm only for input where that could differ.
if (ratio < 5) {
  console.log(
    'suspicion: below target. This log is plain JSON with no type switch inside a chunk, so the direct fold should not fall back to ' +
      'the chunked algorithm; compare min ms (a loaded machine inflates the allocation-heavy baseline and ours differently) and ' +
      'profile with `node --cpu-prof bench/compose.mjs`.',
  );
}

writeResult('compose', {
  events: N,
  v4Ms: +v4Ms.toFixed(2),
  coreMs: +coreMs.toFixed(2),
  speedup: +ratio.toFixed(3),
  target: '>= 5x faster than v4',
  meetsTarget: ratio >= 5,
  applyEventMs: +applyMs.toFixed(2),
  applyEventNsPerEvent: +applyNs.toFixed(1),
  applyEventEqualsCompose: applyEqual,
  samples,
  summary: [
    { measure: `composeEventlogState ms (${N} events, median)`, value: +coreMs.toFixed(1), baseline: `v4 chunked merge ${+v4Ms.toFixed(1)}`, ratio: `${ratio.toFixed(2)}x faster`, target: '>= 5x', meets: ratio >= 5 },
    { measure: 'applyEvent ns/event', value: +applyNs.toFixed(0), baseline: 'immer produce ~6,000 (earlier build, reference)', ratio: `${(6000 / applyNs).toFixed(1)}x cheaper`, target: '< 6,000', meets: applyNs < 6000 },
  ],
});
void env;
