import { expect, it } from 'vitest';
import { openDB, type IDBPDatabase } from 'idb';
import { CACHE_VERSION } from '../src/index.js';
import { CHUNK } from '../src/cache.js';
import { browserClient, type CacheSchema, cacheName, gateway, ids, otherClient, publishAll, record, spyReads, stored, storedAt } from './helpers.js';

async function usage(name: string, pid: string): Promise<{ bytes: number; used: number } | undefined> {
  const db = await openDB<CacheSchema>(name);
  try {
    return await db.get('usage', `d\u001f${pid}`);
  } finally {
    db.close();
  }
}

/** The layouts of older schema versions, as those versions wrote them (whole events as JSON). */
const oldLayouts = {
  1: (db: IDBPDatabase) => {
    db.createObjectStore('streams', { keyPath: 'key' });
    db.createObjectStore('events');
  },
  2: (db: IDBPDatabase) => {
    oldLayouts[1](db);
    db.createObjectStore('usage', { keyPath: 'key' }).createIndex('used', 'used');
  },
  // Version 3 had version 2's stores; its events were packed, one segment per write.
  3: (db: IDBPDatabase) => oldLayouts[2](db),
};

it.each([1, 2, 3] as const)('upgrades a version-%i cache to the current schema, dropping its eventlogs (they are fetched again)', async (version) => {
  const { url } = await gateway();
  const name = cacheName();
  const other = otherClient(url);
  await publishAll(other, 'd', 'p', [{ n: 1 }, { m: 2 }]);
  const events = await other.readEventlog('d', 'p');
  const position = events[1]?.position ?? 0;

  const old = await openDB(name, version, { upgrade: oldLayouts[version] });
  await old.put('streams', { key: 'd\u001fp', domain: 'd', pid: 'p', position, count: 2, state: { n: 1, m: 2 }, segments: 1, eventBytes: 400, bytes: 420, used: 7 });
  await old.put('events', JSON.stringify(version === 3 ? events.map((e) => [e.id, e.name, e.data, e.timestamp, e.rid, e.position]) : events), ['d\u001fp', 0]);
  if (version >= 2) await old.put('usage', { key: 'd\u001fp', bytes: 420, used: 7 });
  old.close();

  const client = browserClient(url, name);
  expect(await client.readCached('d', 'p')).toBeUndefined();
  const db = await openDB<CacheSchema>(name);
  expect(db.version).toBe(CACHE_VERSION);
  expect(CACHE_VERSION).toBe(4);
  expect([...db.objectStoreNames].sort()).toEqual(['events', 'streams', 'usage']);
  expect([await db.count('streams'), await db.count('events'), await db.count('usage')]).toEqual([0, 0, 0]);
  db.close();

  // Fetched in full, then cached in the current layout.
  const reads = spyReads(client);
  expect(await client.readEventlog('d', 'p')).toEqual(events);
  expect(reads()).toEqual([{ domain: 'd', pid: 'p' }]);
  await storedAt(name, 'd', 'p', position);
  expect((await browserClient(url, name).readCached('d', 'p'))?.events).toEqual(events);
});

it('stores events packed (no field names, domain or pid) and reads them back as the gateway has them', async () => {
  const { url } = await gateway();
  const name = cacheName();
  const other = otherClient(url);
  await publishAll(other, 'orders', 'o-1', [{ lines: { a: { qty: 1, title: 'Mug "blue"' } } }, { note: null, tags: ['x', 'é'] }]);
  await other.publish({ domain: 'orders', name: 'shipped', pid: 'o-1', data: { n: 3 } });
  const client = browserClient(url, name);
  const first = await client.readEventlog('orders', 'o-1');
  await storedAt(name, 'orders', 'o-1', first[2]?.position);
  await other.publish({ domain: 'orders', name: 'changed', pid: 'o-1', data: { n: 4 } });
  const all = await client.readEventlog('orders', 'o-1'); // appended to the newest chunk
  await storedAt(name, 'orders', 'o-1', all[3]?.position);

  const db = await openDB<CacheSchema>(name);
  const chunks = await db.getAll('events');
  db.close();
  expect(chunks).toHaveLength(1);
  expect(chunks.flatMap((chunk) => JSON.parse(chunk) as unknown[])).toEqual(all.map((e) => [e.id, e.name, e.data, e.timestamp, e.rid, e.position]));

  const gatewayEvents = await other.readEventlog('orders', 'o-1');
  const reloaded = browserClient(url, name);
  expect((await reloaded.readCached('orders', 'o-1'))?.events).toStrictEqual(gatewayEvents);
  const read = await reloaded.readEventlog('orders', 'o-1'); // a lazy list
  expect(read).toStrictEqual(gatewayEvents);
  expect(JSON.parse(JSON.stringify(read))).toStrictEqual(gatewayEvents);
  // Each read's list is its own: changing one changes no other read.
  read.reverse();
  read.length = 1;
  expect(await reloaded.readEventlog('orders', 'o-1')).toStrictEqual(gatewayEvents);
});

it('runs without a cache when IndexedDB holds a newer schema than it knows', async () => {
  const { url } = await gateway();
  const name = cacheName();
  (await openDB(name, CACHE_VERSION + 1)).close();
  const errors: unknown[] = [];
  const client = browserClient(url, name, { cache: { name }, onError: (error) => errors.push(error) });
  await client.publish({ domain: 'd', name: 'x', pid: 'p', data: { n: 1 } });
  expect(await client.readEventlogState('d', 'p')).toEqual({ n: 1 });
  expect(await client.readCached('d', 'p')).toBeUndefined();
  expect(errors.map((error) => (error as Error).name)).toContain('VersionError');
});

it('gives way to another tab opening a newer schema, then runs without the cache', async () => {
  const { url } = await gateway();
  const name = cacheName();
  const errors: unknown[] = [];
  const client = browserClient(url, name, { cache: { name }, onError: (error) => errors.push(error) });
  await client.publish({ domain: 'd', name: 'x', pid: 'p', data: { n: 1 } });
  const events = await client.readEventlog('d', 'p');
  await storedAt(name, 'd', 'p', events[0]?.position);

  // The newer release's open would wait forever if this client kept its connection.
  const newer = await openDB(name, CACHE_VERSION + 1);
  expect(newer.version).toBe(CACHE_VERSION + 1);
  newer.close();
  expect(await client.readCached('d', 'p')).toBeUndefined();
  expect(await client.readEventlogState('d', 'p')).toEqual({ n: 1 });
  expect(errors.map((error) => (error as Error).name)).toContain('VersionError');
});

it('works without the cache while a connection to an older schema does not let go, and with it once it does', async () => {
  const { url } = await gateway();
  const name = cacheName();
  // An older release's tab that ignores version changes: the upgrade waits for it to close.
  const old = await openDB(name, 2, { upgrade: oldLayouts[2] });
  const client = browserClient(url, name);
  await client.publish({ domain: 'd', name: 'x', pid: 'p', data: { n: 1 } });
  expect(await client.readEventlogState('d', 'p')).toEqual({ n: 1 });
  expect(await client.readCached('d', 'p')).toBeUndefined();

  old.close();
  await expect
    .poll(async () => {
      const events = await client.readEventlog('d', 'p');
      return (await stored(name, 'd', 'p'))?.position === events[0]?.position;
    })
    .toBe(true);
  expect(await client.readCached('d', 'p')).toMatchObject({ state: { n: 1 }, stale: true });
});

it('evicts the least recently used eventlogs when over the size budget', async () => {
  const { url } = await gateway();
  const name = cacheName();
  const other = otherClient(url);
  const text = 'x'.repeat(2000);
  for (const pid of ['p1', 'p2', 'p3']) await other.publish({ domain: 'd', name: 'x', pid, data: { text } });
  // Each eventlog takes about 4.3 kB (event JSON plus state JSON): two fit, three do not.
  const client = browserClient(url, name, { cache: { name, maxBytes: 10_000 } });

  const p1 = await client.readEventlog('d', 'p1');
  await storedAt(name, 'd', 'p1', p1[0]?.position);
  const p2 = await client.readEventlog('d', 'p2');
  await storedAt(name, 'd', 'p2', p2[0]?.position);
  expect((await usage(name, 'p1'))?.bytes).toBeGreaterThan(4000);

  await client.readEventlog('d', 'p1'); // p1 is used again: p2 becomes the least recently used
  await expect.poll(async () => ((await usage(name, 'p1'))?.used ?? 0) > ((await usage(name, 'p2'))?.used ?? 0)).toBe(true);

  const p3 = await client.readEventlog('d', 'p3');
  await expect.poll(() => stored(name, 'd', 'p2')).toBeUndefined();
  expect(await usage(name, 'p2')).toBeUndefined();
  expect((await stored(name, 'd', 'p1'))?.position).toBe(p1[0]?.position);
  await storedAt(name, 'd', 'p3', p3[0]?.position);
  expect(await client.readCached('d', 'p2')).toBeUndefined();
  // An evicted eventlog is simply fetched again.
  expect(ids(await client.readEventlog('d', 'p2'))).toEqual(ids(p2));
});

it('clearCache() empties the cache; the next read fetches everything', async () => {
  const { url } = await gateway();
  const name = cacheName();
  const client = browserClient(url, name);
  await publishAll(client, 'd', 'p1', [{ n: 1 }]);
  await publishAll(client, 'd', 'p2', [{ n: 2 }]);
  const p1 = await client.readEventlog('d', 'p1');
  const p2 = await client.readEventlog('d', 'p2');
  await storedAt(name, 'd', 'p1', p1[0]?.position);
  await storedAt(name, 'd', 'p2', p2[0]?.position);

  await client.clearCache();
  expect(await stored(name, 'd', 'p1')).toBeUndefined();
  expect(await stored(name, 'd', 'p2')).toBeUndefined();
  const other = browserClient(url, name); // the same cache, as another tab sees it
  expect(await other.readCached('d', 'p1')).toBeUndefined();

  const reads = spyReads(client);
  expect(await client.readEventlogState('d', 'p1')).toEqual({ n: 1 });
  expect(reads()).toEqual([{ domain: 'd', pid: 'p1' }]);
});

it('works without a cache (cache: false)', async () => {
  const { url } = await gateway();
  const client = browserClient(url, 'unused', { cache: false });
  await publishAll(client, 'd', 'p', [{ n: 1 }]);
  expect(await client.readEventlogState('d', 'p')).toEqual({ n: 1 });
  expect(await client.readCached('d', 'p')).toBeUndefined();
  const watch = record(client, 'd', 'p');
  await expect.poll(() => watch.last()).toMatchObject({ state: { n: 1 }, stale: false });
  await client.publish({ domain: 'd', name: 'x', pid: 'p', data: { n: 2 } });
  await expect.poll(() => watch.last()?.state).toEqual({ n: 2 });
  expect(await client.readEventlogState('d', 'p')).toEqual({ n: 2 }); // from the live watch
  const events = await client.readEventlog('d', 'p');
  expect(await client.readEventlog('d', 'p', { limit: 1 })).toEqual(events.slice(0, 1));
  expect(await client.readEventlog('d', 'p', { after: events[0]?.position, limit: 5 })).toEqual(events.slice(1));
});

it(`keeps events in chunks of ${CHUNK}, appends to the newest, and reads a page from the chunks that hold it`, async () => {
  const { url } = await gateway();
  const name = cacheName();
  const other = otherClient(url);
  const publish = async (from: number, to: number): Promise<void> => {
    for (let i = from; i < to; i += 250) {
      await Promise.all(Array.from({ length: Math.min(250, to - i) }, (_, j) => other.publish({ domain: 'd', name: 'n', pid: 'p', data: { [`k${(i + j) % 7}`]: i + j } })));
    }
  };
  const chunkSizes = async (): Promise<number[]> => {
    const db = await openDB<CacheSchema>(name);
    try {
      return (await db.getAll('events')).map((chunk) => (JSON.parse(chunk) as unknown[]).length);
    } finally {
      db.close();
    }
  };
  await publish(0, CHUNK + 300);
  const client = browserClient(url, name);
  let events = await client.readEventlog('d', 'p');
  await storedAt(name, 'd', 'p', events.at(-1)?.position);
  expect(await chunkSizes()).toEqual([CHUNK, 300]);

  await publish(CHUNK + 300, 2 * CHUNK + 100);
  events = await client.readEventlog('d', 'p'); // fills the newest chunk, then starts one
  await storedAt(name, 'd', 'p', events.at(-1)?.position);
  expect(await chunkSizes()).toEqual([CHUNK, CHUNK, 100]);
  const gatewayEvents = await other.readEventlog('d', 'p');
  expect(events).toEqual(gatewayEvents);

  // Pages from a reloaded client: the cached chunks plus the delta, whatever chunks they span.
  await other.publish({ domain: 'd', name: 'n', pid: 'p', data: { last: true } });
  const latest = await other.readEventlog('d', 'p');
  const reloaded = browserClient(url, name);
  const reads = spyReads(reloaded);
  expect(await reloaded.readEventlog('d', 'p', { limit: 10 })).toEqual(latest.slice(0, 10));
  const at = (i: number): number => latest[i]!.position;
  expect(await reloaded.readEventlog('d', 'p', { after: at(CHUNK - 2), limit: 5 })).toEqual(latest.slice(CHUNK - 1, CHUNK + 4));
  expect(await reloaded.readEventlog('d', 'p', { after: at(500), limit: 1200 })).toEqual(latest.slice(501, 1701));
  expect(await reloaded.readEventlog('d', 'p', { after: at(2 * CHUNK + 50), limit: 100 })).toEqual(latest.slice(2 * CHUNK + 51)); // reaches the delta
  expect(await reloaded.readEventlog('d', 'p', { after: at(2 * CHUNK + 100), limit: 3 })).toEqual(latest.slice(2 * CHUNK + 101));
  // Every page asked the gateway only for what came after the cached copy.
  expect(new Set(reads().map((read) => read.after))).toEqual(new Set([gatewayEvents.at(-1)?.position, latest.at(-1)?.position]));
  await expect(reloaded.readEventlog('d', 'p', { limit: 0 })).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT' });

  // A page reads no chunk beyond the ones that hold it: with the newest chunk unreadable, the
  // first page is still served (a full read would fail to parse it).
  const db = await openDB<CacheSchema>(name);
  const keys = await db.getAllKeys('events');
  await db.put('events', 'not JSON', keys.at(-1)!);
  db.close();
  expect(await browserClient(url, name).readEventlog('d', 'p', { limit: 10 })).toEqual(latest.slice(0, 10));

  // A full read, and a watch's cached snapshot, parse a chunk when one of its events is first
  // used: all but the unreadable chunk's events are there; those fail when used.
  const full = await browserClient(url, name).readEventlog('d', 'p');
  expect(full).toHaveLength(latest.length);
  expect(full.slice(0, 10)).toEqual(latest.slice(0, 10));
  expect(full[2 * CHUNK - 1]).toEqual(latest[2 * CHUNK - 1]);
  expect(() => full[2 * CHUNK]).toThrow(SyntaxError);
  expect(() => full.at(-1)).toThrow(SyntaxError);
  const watch = record(browserClient(url, name), 'd', 'p');
  await expect.poll(() => watch.snapshots.length).toBeGreaterThan(0);
  const [first] = watch.snapshots;
  expect(first).toMatchObject({ stale: true, position: latest.at(-1)?.position });
  expect(first?.events).toHaveLength(latest.length);
  expect(first?.events.slice(CHUNK, CHUNK + 10)).toEqual(latest.slice(CHUNK, CHUNK + 10));
  expect(() => first?.events.at(-1)).toThrow(SyntaxError);
});
