/* The dashboard's service worker: the app shell (index.html and the built assets) answers from
 * its cache first, so the dashboard opens while the gateway is down; every answer from the cache
 * also asks the network, and a good response replaces the cached copy for the next load.
 * Data is not cached here: the browser client keeps eventlogs and states in IndexedDB.
 *
 * The build (demo/vite.config.ts) puts `VERSION` and `PRECACHE` (paths relative to this file)
 * above this text. */
/* global VERSION, PRECACHE */

const PREFIX = 'eventflow-demo-';
const CACHE = PREFIX + VERSION;
const scope = new URL('./', self.location.href);
const shell = new URL('index.html', scope).href;
const precached = new Set(PRECACHE.map((path) => new URL(path, scope).href));

self.addEventListener('install', (event) => {
  event.waitUntil(
    (async () => {
      const cache = await caches.open(CACHE);
      // `reload` skips the HTTP cache, so the shell stored is the one on the server now.
      await cache.addAll([...precached].map((url) => new Request(url, { cache: 'reload' })));
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    (async () => {
      for (const key of await caches.keys()) if (key.startsWith(PREFIX) && key !== CACHE) await caches.delete(key);
      await self.clients.claim();
    })(),
  );
});

self.addEventListener('fetch', (event) => {
  const { request } = event;
  if (request.method !== 'GET') return;
  const url = new URL(request.url);
  if (url.origin !== scope.origin) return;
  // The dashboard has one page; its state lives in the query (?domain=…&pid=…&gateway=…).
  // Other paths (/healthz, /metrics, …) always go to the network.
  if (request.mode === 'navigate') {
    if (url.pathname === scope.pathname || url.href.split('?')[0] === shell) event.respondWith(cacheFirst(event, shell));
    return;
  }
  const key = url.origin + url.pathname;
  if (precached.has(key) || url.pathname.startsWith(scope.pathname + 'assets/')) event.respondWith(cacheFirst(event, key));
});

/** The cached response for `key` if there is one, while the network refreshes it; else the network's. */
async function cacheFirst(event, key) {
  const cache = await caches.open(CACHE);
  const cached = await cache.match(key);
  const network = fetch(event.request.mode === 'navigate' ? key : event.request).then(async (response) => {
    if (response.ok && response.type === 'basic') await cache.put(key, response.clone());
    return response;
  });
  if (!cached) return network;
  event.waitUntil(network.catch(() => undefined)); // offline: the cached copy is all there is
  return cached;
}
