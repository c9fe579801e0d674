/**
 * Chaos: kill -9 of a gateway process during sustained publishing with subscribers attached.
 * After a restart on the same port and store (SQLite file, or MariaDB database): no acknowledged event is lost, and every
 * subscriber saw every stored event of the domain exactly once, in position order (no gaps, no
 * duplicates).
 */
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createClient, generateEventId, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { chaosStores, mysqlGatewayEnv, useChaosLifecycle } from './support.js';
import { eventually, fence, FENCE_PID, isFence, sleep } from '@eventflow/test-support/wait';
import { freePort, kill9, startGatewayProcess, stop } from '@eventflow/test-support/gateway-process';

const PIDS = 20; // events spread over pids so that each readEventlog answer stays small

const { temp, clients } = useChaosLifecycle();

const databases = useTestDatabases();

describe.each(chaosStores)('chaos: kill -9 of the gateway ($store)', ({ store }) => {
  const skip = store === 'mysql' ? mysqlUnavailable : undefined;
  if (skip !== undefined) console.warn(`Skipping the MariaDB kill -9 chaos proof: ${skip}`);
  it.skipIf(skip !== undefined)('loses no acknowledged event; subscribers see no gap and no duplicate across the restart', async () => {
    const port = await freePort();
    const dbPath = join(temp.dir, `eventflow-${store}.db`);
    const mysql = store === 'mysql' ? await databases.fresh() : undefined;
    const storeEnv = mysql ? mysqlGatewayEnv(mysql.options) : {};
    let gateway: ChildProcess = (await startGatewayProcess(port, dbPath, storeEnv)).proc;
    // Killed before the test database is dropped (clean-ups run first).
    databases.onCleanup(() => kill9(gateway));
    const url = `ws://127.0.0.1:${port}/`;
    const client = (): EventflowClient => {
      const c = createClient(url, { reconnect: { minDelay: 20, maxDelay: 300 }, onError: () => undefined });
      clients.push(c);
      return c;
    };

    // Three subscribers, attached before the first publish: each must see every event of 'chaos'.
    const seen: Array<Array<{ id: string; position: number }>> = [];
    /** The id of a fence marker, once per subscriber that received it. */
    const fenced: string[] = [];
    for (let i = 0; i < 3; i++) {
      const log: Array<{ id: string; position: number }> = [];
      seen.push(log);
      await client().subscribe('chaos', '*', (event: StoredEvent) => void (isFence(event) ? fenced.push(event.id) : log.push({ id: event.id, position: Number(event.position) })));
    }

    const publisher = client();
    const acknowledged: string[] = [];
    let retries = 0;
    let running = true;
    const publishing = (async () => {
      for (let n = 0; running; n++) {
        const id = generateEventId();
        // Retries the same id until acknowledged: idempotent, so never stored twice.
        for (;;) {
          try {
            await publisher.publish({ id, domain: 'chaos', name: 'tick', pid: `p${n % PIDS}`, data: { n } }, { timeout: 3_000 });
            acknowledged.push(id);
            break;
          } catch {
            retries++;
            await sleep(20); // a retry's back-off
          }
        }
      }
    })();

    // Time is what is tested from here to the checks: publishing goes on for a while, across the
    // kill, the outage and the restart.
    await sleep(1_500);
    const beforeKill = acknowledged.length;
    await kill9(gateway);
    const atKill = acknowledged.length;
    await sleep(500);
    const beforeRestart = acknowledged.length;
    gateway = (await startGatewayProcess(port, dbPath, storeEnv)).proc;
    const afterRestart = acknowledged.length;
    // Publishing resumes after the restart: proven by acknowledgements, not by a fixed wait (a
    // loaded machine and the MySQL store take longer to reconnect and acknowledge).
    await eventually(() => acknowledged.length > afterRestart + 50, 30_000, 'publishing to resume after the restart');
    running = false;
    await publishing;
    // Nothing acknowledged while the gateway was down (but the answer already on its way at the kill).
    expect(beforeRestart).toBeLessThanOrEqual(atKill + 1);
    expect(acknowledged.length).toBeGreaterThan(atKill + 50); // publishing resumed after the restart

    // The store, through a fresh client: every acknowledged id is there.
    const reader = client();
    const stored: Array<{ id: string; position: number }> = [];
    for (let p = 0; p < PIDS; p++) {
      for (const event of await reader.readEventlog('chaos', `p${p}`)) stored.push({ id: event.id, position: Number(event.position) });
    }
    stored.sort((a, b) => a.position - b.position);
    const storedIds = new Set(stored.map((event) => event.id));
    expect(storedIds.size).toBe(stored.length);
    const lost = acknowledged.filter((id) => !storedIds.has(id));
    expect(lost).toEqual([]);
    expect(new Set(acknowledged).size).toBe(acknowledged.length);

    // Cross-check against the store itself (the SQLite file, or the MariaDB table).
    if (mysql) {
      const [row] = await mysql.query<{ n: number | string }>(`SELECT COUNT(*) AS n FROM event WHERE domain = 'chaos'`);
      expect(Number(row!.n)).toBe(stored.length);
    } else {
      const db = new Database(dbPath, { readonly: true });
      try {
        expect((db.prepare(`SELECT COUNT(*) AS n FROM event WHERE domain = 'chaos'`).get() as { n: number }).n).toBe(stored.length);
      } finally {
        db.close();
      }
    }

    // Every subscriber catches up to exactly the stored events, in order, each once.
    await eventually(() => seen.every((log) => log.length >= stored.length), 15_000, 'subscribers to catch up');
    // A marker after every stored event: a duplicate would reach the subscribers before it.
    await fence(
      () => publisher.publish({ domain: 'chaos', name: 'tick', pid: `${FENCE_PID}1` }),
      (id) => fenced.filter((seenId) => seenId === id).length === seen.length,
      15_000,
    );
    for (const log of seen) {
      const ids = log.map((event) => event.id);
      expect(new Set(ids).size).toBe(ids.length); // no duplicates
      for (let i = 1; i < log.length; i++) expect(log[i]!.position).toBeGreaterThan(log[i - 1]!.position); // strictly increasing
      expect(log.map((event) => event.position)).toEqual(stored.map((event) => event.position)); // no gaps
      expect(ids).toEqual(stored.map((event) => event.id));
    }

    console.log(
      `[chaos kill -9 ${store}] acknowledged ${acknowledged.length} (${beforeKill} before the kill, ${atKill} at it, ${acknowledged.length - afterRestart} after the restart), ` +
        `stored ${stored.length} (${stored.length - acknowledged.length} stored but not acknowledged), retries ${retries}, acknowledged while down ${beforeRestart - atKill}, ` +
        `subscribers saw ${seen.map((log) => log.length).join('/')}, lost 0, gaps 0, duplicates 0`,
    );
    await stop(gateway);
  }, 90_000);
});
