#!/usr/bin/env node
// How the size of IndexedDB values changes reading 10,000 packed events (1.6 MB of JSON) in Debian
// Chromium: the same JSON in 1, 10, 20 or 40 string records, five fresh-connection reads each;
// prints [getAll until the transaction completes, first access of the result (deserialisation)]
// in ms. It chose `CHUNK` in packages/browser/src/cache.ts (see bench/README.md, browser-open).
// Not a step of bench/run.js.
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { findChromium } from './chromium.mjs';
const server = createServer((q, r) => r.end('<html></html>')).listen(0);
await new Promise((r) => server.once('listening', r));
const browser = await chromium.launch({ executablePath: findChromium().path, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'], headless: true });
const context = await browser.newContext();
const page = await context.newPage();
await page.goto(`http://127.0.0.1:${server.address().port}/`);
const out = await page.evaluate(async () => {
  const total = 1_600_000;
  const results = {};
  const open = (name) => new Promise((r) => { const o = indexedDB.open(name, 1); o.onupgradeneeded = () => o.result.createObjectStore('s'); o.onsuccess = () => r(o.result); });
  const tx = (db, mode, fn) => new Promise((r) => { const t = db.transaction('s', mode); const v = fn(t.objectStore('s')); t.oncomplete = () => r(v); });
  const item = JSON.stringify(['evt-abcdefghijkl-mnopqrst', 'line-changed', { lines: { 'sku-0001': { title: 'Blue ceramic mug', qty: 3, price: 12.5 } }, by: 'user-101' }, '2026-12-01T10:00:00.000Z', null, 1]);
  for (const per of [10000, 1000, 500, 250]) {
    const n = 10000 / per;
    const chunk = '[' + Array(per).fill(item).join(',') + ']';
    const db = await open('t' + per);
    await tx(db, 'readwrite', (s) => { for (let i = 0; i < n; i++) s.put(chunk, i); });
    db.close();
    const times = [];
    for (let rep = 0; rep < 5; rep++) {
      const d = await open('t' + per);
      const t0 = performance.now();
      const req = await tx(d, 'readonly', (s) => s.getAll());
      const t1 = performance.now();
      const strings = req.result; const len = strings.reduce((a, s) => a + s.length, 0);
      const t2 = performance.now();
      times.push([+(t1 - t0).toFixed(1), +(t2 - t1).toFixed(1)]);
      d.close();
    }
    results[per] = { bytes: chunk.length, times };
  }
  return results;
});
console.log(JSON.stringify(out, null, 1));
await browser.close();
server.close();
