// The bench page (bundled by vite in bench/browser-open.mjs): opens one process through
// @eventflow/browser as an app does, timing the open with performance.now() in the page.
import { createBrowserClient } from '@eventflow/browser';

const CACHE = 'eventflow-bench';

/** The cache's record of an eventlog, read straight from IndexedDB (to know its write is done). */
function storedPosition(key) {
  return new Promise((resolve) => {
    const opening = indexedDB.open(CACHE);
    opening.onerror = () => resolve(undefined);
    opening.onsuccess = () => {
      const db = opening.result;
      const done = (value) => {
        db.close();
        resolve(value);
      };
      if (!db.objectStoreNames.contains('streams')) return done(undefined);
      const get = db.transaction('streams').objectStore('streams').get(key);
      get.onsuccess = () => done(get.result?.position);
      get.onerror = () => done(undefined);
    };
  });
}

const connected = (client) =>
  new Promise((resolve) => {
    if (client.state === 'open') return resolve();
    const stop = client.onStateChange((state) => state === 'open' && (stop(), resolve()));
  });

/** Reads a field of every event, in order, as a view listing them does (`result.sum` checks them). */
function touch(events, result) {
  let sum = 0;
  for (const event of events) sum += event.position;
  result.sum = sum;
}

/** Runs one open; `op`: 'state' | 'eventlog' | 'page' | 'watch' | 'watchEvents'. Resolves with its timings and what it read. */
async function timedOpen({ op, domain, pid, position, clear, profile }) {
  const client = createBrowserClient(new URL('/', location.href.replace(/^http/, 'ws')), { cache: { name: CACHE } });
  // The readEventlog requests this open sends (after: the cached position it asked from).
  const requests = [];
  const call = client.call.bind(client);
  client.call = (name, params, options) => {
    if (name === 'readEventlog') requests.push(params.after ?? null);
    return call(name, params, options);
  };
  try {
    await connected(client); // the WebSocket handshake is the same for both: not timed
    if (clear) await client.clearCache();
    const result = { op, requests };
    if (profile) console.profile('open'); // only the timed part (see BENCH_BROWSER_PROFILE)
    const t0 = performance.now();
    if (op === 'state') {
      const state = await client.readEventlogState(domain, pid);
      result.ms = performance.now() - t0;
      result.check = JSON.stringify(state).length;
    } else if (op === 'eventlog') {
      const events = await client.readEventlog(domain, pid);
      result.ms = performance.now() - t0;
      // Then every event used (a lazy list parses its chunks now): what a view of all of them pays.
      if (profile) {
        console.profileEnd('open'); // profiled apart
        console.profile('touch');
      }
      touch(events, result);
      result.touchedMs = performance.now() - t0;
      result.check = events.length;
      result.lastPosition = events.at(-1)?.position;
    } else if (op === 'page') {
      // A view that shows the first 100 events: the cache reads and parses only the chunk holding them.
      const events = await client.readEventlog(domain, pid, { limit: 100 });
      result.ms = performance.now() - t0;
      result.check = JSON.stringify(events).length;
    } else {
      // First snapshot (what a UI renders first), then the first one caught up with the gateway.
      await new Promise((resolve, reject) => {
        const stop = client.watchEventlogState(domain, pid, (snapshot) => {
          const ms = performance.now() - t0;
          if (result.ms === undefined) {
            result.ms = ms;
            result.firstStale = snapshot.stale;
            // Every event of the first snapshot used, in its own open (the touch would delay the catch-up).
            if (op === 'watchEvents') {
              touch(snapshot.events, result);
              result.touchedMs = performance.now() - t0;
            }
          }
          if (snapshot.stale) return;
          result.freshMs = ms;
          result.check = JSON.stringify(snapshot.state).length;
          stop();
          resolve();
        }, reject);
      });
    }
    if (profile) console.profileEnd(op === 'eventlog' ? 'touch' : 'open');
    // Reads store what they fetched in the background: wait for it, so the next page finds it.
    const deadline = performance.now() + 10_000;
    while ((await storedPosition(`${domain}\u001f${pid}`)) !== position) {
      if (performance.now() > deadline) throw new Error(`the cache did not reach position ${position}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return result;
  } finally {
    await client.close();
  }
}

window.benchOpen = timedOpen;
window.benchReady = true;
