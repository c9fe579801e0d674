#!/usr/bin/env node
// Benchmarks against baselines measured in the same run are not written yet (planned: fan-out,
// latency, throughput, composition, warm/cold browser open, memory per connection, resume).
// Until then this runs the one measurement the project has: the browser bundle size.
import { spawnSync } from 'node:child_process';

console.log('bench: no speed benchmarks yet; measuring the browser client size (scripts/size.mjs)');
const result = spawnSync(process.execPath, ['scripts/size.mjs'], { stdio: 'inherit' });
process.exit(result.status ?? 1);
