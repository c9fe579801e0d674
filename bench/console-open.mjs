#!/usr/bin/env node
// bench console-open: first paint of the console's big views in real Chromium, against a gateway
// (gateway/dist, in-process, SQLite on a temp file) holding a domain of 100,000 processes and a
// process of 10,000 events. Timed in the page: performance.now() (from navigation start) when the
// first process row, and the first timeline row, is in the DOM (a MutationObserver installed
// before any script runs), each page cold (a new browser context: empty caches and IndexedDB).
// Target: each under 1 s on this machine (issue 14). Needs `npm run build` (gateway/dist).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { chromium } from 'playwright-core';
import { startGateway } from '../gateway/dist/index.js';
import { printEnvironment, writeResult } from './results.mjs';
import { findChromium, SKIPPED } from './chromium.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const PROCESSES = Number(process.env.BENCH_CONSOLE_PROCESSES ?? 100_000);
const EVENTS = Number(process.env.BENCH_CONSOLE_EVENTS ?? 10_000);
const REPS = Number(process.env.BENCH_CONSOLE_REPS ?? 5);
const TARGET_MS = 1_000;
const DOMAIN = 'big';
const LONG = 'long-process';
const found = findChromium();
if (found.missing) {
  console.log(`console-open: skipped: ${found.missing}`);
  process.exit(SKIPPED);
}
const chromiumArgs = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

printEnvironment('console-open');
const dir = mkdtempSync(join(tmpdir(), 'eventflow-bench-console-'));
const outDir = join(dir, 'console');
process.env.NODE_ENV = 'production';
await build({ configFile: join(here, '../packages/console/vite.config.ts'), root: join(here, '../packages/console'), mode: 'production', logLevel: 'warn', build: { outDir, emptyOutDir: true } });
const gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: join(dir, 'bench.db'), EVENTFLOW_LOG_LEVEL: 'warn', EVENTFLOW_CONSOLE_DIR: outDir });
let browser;
try {
  const fillStarted = performance.now();
  const batch = [];
  const flush = async () => {
    const outcomes = await gateway.store.appendBatch(batch.splice(0));
    const failed = outcomes.find((outcome) => !outcome.ok);
    if (failed) throw failed.error;
  };
  for (let i = 0; i < PROCESSES; i++) {
    batch.push({ event: { id: `p-${i}`, domain: DOMAIN, name: 'order-placed', pid: `order-${String(i).padStart(6, '0')}`, data: { item: `item ${i % 97}`, amount: i % 50 } }, options: { publisher: 'bench' } });
    if (batch.length === 2_000) await flush();
  }
  for (let i = 0; i < EVENTS; i++) {
    batch.push({ event: { id: `l-${i}`, domain: DOMAIN, name: i % 3 ? 'line-changed' : 'note-added', pid: LONG, data: { [`line${i % 40}`]: { qty: i % 7, note: `change ${i}` }, status: ['open', 'packed', 'shipped'][i % 3] } } });
    if (batch.length === 2_000) await flush();
  }
  await flush();
  console.log(`filled ${PROCESSES} processes + 1 of ${EVENTS} events in ${Math.round(performance.now() - fillStarted)} ms`);

  browser = await chromium.launch({ executablePath: found.path, args: chromiumArgs, headless: true });
  /** ms from navigation start until `selector` is first in the DOM, in a cold context. */
  const firstPaint = async (hash, selector) => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addInitScript((wanted) => {
      const observer = new MutationObserver(() => {
        if (document.querySelector(wanted)) {
          window.__painted = performance.now();
          observer.disconnect();
        }
      });
      observer.observe(document, { childList: true, subtree: true });
    }, selector);
    const page = await context.newPage();
    await page.goto(`${gateway.httpUrl}${hash}`, { waitUntil: 'load' });
    await page.waitForFunction(() => window.__painted !== undefined, undefined, { timeout: 30_000 });
    const ms = await page.evaluate(() => window.__painted);
    const rows = await page.locator(selector).count();
    await context.close();
    return { ms, rows };
  };
  const results = {};
  for (const [name, hash, selector] of [
    // The baseline: the app loaded, its client connected to the gateway, nothing read yet.
    ['connected', '#/gateway', '[data-testid="connection-state"][data-state="open"]'],
    ['processList', `#/d/${DOMAIN}`, '[data-testid="process-row"]'],
    ['timeline10k', `#/d/${DOMAIN}/p/${LONG}`, '[data-testid="timeline-row"]'],
  ]) {
    const times = [];
    let rows = 0;
    for (let rep = 0; rep < REPS; rep++) ({ ms: times[rep], rows } = await firstPaint(hash, selector));
    const sorted = [...times].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)];
    results[name] = { medianMs: Math.round(median), maxMs: Math.round(sorted.at(-1)), rowsRendered: rows, underTarget: sorted.at(-1) < TARGET_MS };
    console.log(`${name}: first paint median ${Math.round(median)} ms, max ${Math.round(sorted.at(-1))} ms over ${REPS} cold loads (${rows} rows in the DOM; target < ${TARGET_MS} ms)`);
  }
  writeResult('console-open', { processes: PROCESSES, events: EVENTS, reps: REPS, targetMs: TARGET_MS, ...results });
} finally {
  await browser?.close();
  await gateway.close();
  rmSync(dir, { recursive: true, force: true });
}
