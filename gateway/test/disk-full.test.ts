/**
 * The SQLite store on a real disk that fills up (a 12 MB tmpfs, filled by a file of the test's):
 * publishes fail with E_EVENTFLOW_STORE_FAILED and `details.stored: false`, /readyz answers 503
 * with the reason while writes fail, and once the file is removed the same gateway, not restarted,
 * is ready again and publishes again, a publish made while the disk was full included (the client
 * sends it again, same id). The WAL stays bounded, so the space freed is the database's: in one
 * such run before, the WAL grew into it and every later publish failed.
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, isEventflowError, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { readyz } from '@eventflow/test-support/gateway-http';
import { mountSmallDisk, smallDiskUnavailable, type SmallDisk } from '@eventflow/test-support/small-disk';
import { connect } from '@eventflow/test-support/raw-socket';

let disk: SmallDisk | undefined;
let gateway: Gateway | undefined;
let client: EventflowClient | undefined;
afterEach(async () => {
  await client?.close();
  await gateway?.close();
  disk?.dispose();
  client = gateway = disk = undefined;
});

const data = { text: 'x'.repeat(1_000) };

describe.skipIf(smallDiskUnavailable !== undefined)('the SQLite store on a full disk', () => {
  it('fails publishes with stored: false and is not ready while full; ready and publishing again once space is freed, without a restart', async () => {
    disk = mountSmallDisk(12);
    const path = join(disk.dir, 'events.db');
    const wal = `${path}-wal`;
    let walMax = 0;
    const watchWal = (): void => void (walMax = Math.max(walMax, existsSync(wal) ? statSync(wal).size : 0));
    gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    client = createClient(gateway.url, { onError: () => undefined });
    const stored: string[] = [];
    const publish = async (pid: string, timeout?: number): Promise<string> => {
      const id = await client!.publish({ domain: 'disk', name: 'written', pid, data }, timeout === undefined ? undefined : { timeout });
      stored.push(id);
      watchWal();
      return id;
    };
    for (let i = 0; i < 300; i++) await publish(`warm-${i % 10}`);
    expect((await readyz(gateway)).status).toBe(200);

    disk.fill(32 * 1024);
    // The WAL's pages are reused for a while; then a publish needs space that is not there. The client sends a refused
    // write again until its timeout, so under load its last attempt may be on the wire when 300 ms run out: then the call
    // is E_EVENTFLOW_REQUEST_TIMEOUT, its fate unknown, and the refusal itself is read off the wire below.
    let failure: unknown;
    for (let i = 0; i < 5_000 && failure === undefined; i++) await publish(`full-${i % 10}`, 300).catch((error: unknown) => (failure = error));
    expect(isEventflowError(failure, 'E_EVENTFLOW_STORE_FAILED') || isEventflowError(failure, 'E_EVENTFLOW_REQUEST_TIMEOUT')).toBe(true);
    const unknownId = String((failure as { details: { id: string } }).details.id);
    // SQLite knows: nothing of it was stored.
    const raw = await connect(gateway.url, { client: 'disk-full-test' });
    const refused = await raw.request('publish', { event: { domain: 'disk', name: 'written', pid: 'raw', data } }).finally(() => raw.ws.terminate());
    expect(refused).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_STORE_FAILED', details: { id: expect.any(String), stored: false, retryable: true } });
    const failedId = String(refused.details?.id);
    const full = await readyz(gateway);
    expect(full.status).toBe(503);
    expect(full.store).toMatchObject({ ready: false, reason: expect.stringMatching(/^writes fail: .*SQLITE_FULL/) });

    // Made while the disk is full, with time to ride it out.
    const held = publish('held', 30_000);
    disk.free();
    const freedAt = Date.now();
    await eventually(async () => (await readyz(gateway!)).status === 200, 10_000, '/readyz 200 once space is freed');
    const readyMs = Date.now() - freedAt;
    const heldId = await held;
    const heldMs = Date.now() - freedAt;

    // The space freed stays usable: the WAL does not grow into it.
    for (let i = 0; i < 2_000; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => publish(`after-${(i + j) % 10}`)));
    console.info(`full disk: /readyz 200 ${readyMs} ms and the held publish stored ${heldMs} ms after the filler was removed; WAL at most ${(walMax / 2 ** 20).toFixed(1)} MB`);
    // On a disk this small the worker starts it over at 500 pages (2 MB); SQLite's own checkpoint at 1,000 (4 MB) is the backstop.
    expect(walMax).toBeLessThan(6 * 2 ** 20);
    expect((await readyz(gateway)).status).toBe(200);

    // Each resolved publish stored once; the failed one not at all.
    const db = new Database(path, { readonly: true });
    try {
      // The call that failed first may have been stored by an attempt still on the wire when it gave up, or not.
      const ids = (db.prepare(`SELECT id FROM event WHERE domain = 'disk'`).all() as Array<{ id: string }>).map((row) => row.id).filter((id) => id !== unknownId);
      expect(ids.length).toBe(stored.length);
      expect(new Set(ids)).toEqual(new Set(stored));
      expect(ids).toContain(heldId);
      expect(ids).not.toContain(failedId);
    } finally {
      db.close();
    }
  }, 120_000);
});
