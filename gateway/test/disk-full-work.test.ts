/**
 * The work half on the SQLite store when its disk fills up (a 12 MB tmpfs, filled by a file of the
 * test's), with no publish to find it out first:
 *  - a settle the store could not record (SQLITE_FULL) is answered E_EVENTFLOW_STORE_FAILED, in a
 *    settleMany too, so the client sends it again; once space is freed it is recorded, within the
 *    lease, without the handler running again or an attempt counted;
 *  - /readyz answers 503 while the ledger cannot write (claims, settles), and 200 once it can;
 *  - scheduled events that came due meanwhile fire once space is freed, within seconds;
 *  - a settle still not recorded when its lease runs out is written by the gateway once space is
 *    back: the handler does not run again, and a last attempt that succeeded is no dead letter;
 *  - an ordered group and a group with a retry policy drain through it: in order, each handler run
 *    once per attempt, the dead letters with their last error, the metrics equal to the store;
 *  - a consumer whose registration on a new connection the full disk refused is registered again
 *    by the client once space is back, not only at its next connection.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, isEventflowError, type EventflowClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { metric, readyz } from '@eventflow/test-support/gateway-http';
import { mountSmallDisk, smallDiskUnavailable, type SmallDisk } from '@eventflow/test-support/small-disk';
import { startPartitionProxy, type PartitionProxy } from './partition-proxy.js';

let disk: SmallDisk | undefined;
let gateway: Gateway | undefined;
let client: EventflowClient | undefined;
let worker: EventflowClient | undefined;
let proxy: PartitionProxy | undefined;
afterEach(async () => {
  await worker?.close({ drainTimeout: 100 });
  await proxy?.close();
  worker = proxy = undefined;
  await client?.close({ drainTimeout: 100 });
  await gateway?.close();
  disk?.dispose();
  client = gateway = disk = undefined;
});

const LEASE = 10_000;

async function start(lease = LEASE): Promise<{ gateway: Gateway; path: string; disk: SmallDisk }> {
  disk = mountSmallDisk(12);
  const path = join(disk.dir, 'events.db');
  gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off', EVENTFLOW_CONSUME_LEASE_MS: lease });
  return { gateway, path, disk };
}

/**
 * Leaves the store no room to write: the WAL checkpointed and cut to nothing (by a connection of the
 * test's; the gateway is idle), then the disk filled. Its next commit needs a new WAL page and fails.
 */
function leaveNoRoom(path: string, small: SmallDisk): void {
  const db = new Database(path);
  try {
    db.pragma('busy_timeout = 5000');
    const [result] = db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
    expect(result?.busy).toBe(0);
  } finally {
    db.close();
  }
  small.fill(0);
}

/** The group's rows by outcome and attempts, read from the file. */
function rows(path: string, group: string): Array<{ outcome: string | null; attempts: number }> {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT outcome, attempts FROM eventflow_delivery WHERE grp = ? ORDER BY position`).all(group) as Array<{ outcome: string | null; attempts: number }>;
  } finally {
    db.close();
  }
}

describe.skipIf(smallDiskUnavailable !== undefined)('the work half on a full disk (SQLite)', () => {
  it('a settle the full disk refused is sent again by the client and recorded once space is back: within the lease, the handler run once, no attempt counted', async () => {
    const { gateway, path, disk } = await start();
    client = createClient(gateway.url, { onError: () => undefined });
    const runs = new Map<string, number>();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    await client.consume(
      'full',
      'job',
      async (event) => {
        runs.set(event.id, (runs.get(event.id) ?? 0) + 1);
        await gate;
      },
      { group: 'workers', concurrency: 4 },
    );
    for (let i = 0; i < 4; i++) await client.publish({ domain: 'full', name: 'job', pid: `p${i}` });
    await eventually(() => runs.size === 4, 5_000, 'four deliveries open');

    leaveNoRoom(path, disk);
    release();
    // The handlers' settles (one settleMany) reach a store that cannot record them.
    await eventually(async () => (await metric(gateway, 'eventflow_store_errors_total{operation="ledger.apply"}')) >= 1, 5_000, 'a settle batch to fail');
    expect(rows(path, 'workers').map((row) => row.outcome)).toEqual([null, null, null, null]);

    disk.free();
    const freed = Date.now();
    // Sent again by the client (E_EVENTFLOW_STORE_FAILED) until recorded: well within the lease, not after it ran out.
    await eventually(() => rows(path, 'workers').every((row) => row.outcome === 'success'), LEASE / 2, 'the settles to be recorded');
    expect(Date.now() - freed).toBeLessThan(LEASE);
    expect(rows(path, 'workers').map((row) => row.attempts)).toEqual([1, 1, 1, 1]);
    expect([...runs.values()]).toEqual([1, 1, 1, 1]);
    expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}')).toBe(4);
    expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="revoked"}')).toBe(0);
  }, 60_000);

  it('/readyz is 503 while the ledger cannot write, with no publish to find it out, and 200 again once space is freed', async () => {
    const { gateway, path, disk } = await start();
    client = createClient(gateway.url, { onError: () => undefined });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let runs = 0;
    await client.consume('full', 'job', async () => void (runs += 1, await gate), { group: 'workers', concurrency: 2 });
    for (let i = 0; i < 2; i++) await client.publish({ domain: 'full', name: 'job', pid: `p${i}` });
    await eventually(() => runs === 2, 5_000, 'two deliveries open');
    expect((await readyz(gateway)).status).toBe(200);

    leaveNoRoom(path, disk);
    release();
    await eventually(async () => (await metric(gateway, 'eventflow_store_errors_total{operation="ledger.apply"}')) >= 1, 5_000, 'a settle batch to fail');
    // Reads work; the ledger's writes do not: not ready, and the reason says why.
    expect(await readyz(gateway)).toEqual({ status: 503, store: { kind: 'sqlite', ready: false, reason: expect.stringMatching(/^writes fail: .*SQLITE_FULL/) } });

    disk.free();
    await eventually(async () => (await readyz(gateway)).status === 200, 5_000, '/readyz 200 once space is freed');
    await eventually(() => rows(path, 'workers').every((row) => row.outcome === 'success'), LEASE / 2, 'the settles to be recorded');
  }, 60_000);

  it('scheduled events that came due while the disk was full fire, and reach their group, within seconds of space being freed (not at the 30 s poll)', async () => {
    const { gateway, path, disk } = await start();
    client = createClient(gateway.url, { onError: () => undefined });
    const handled: string[] = [];
    await client.consume('full', 'reminder', async (event) => void handled.push(event.pid), { group: 'reminders' });
    const due = Date.now() + 1_000;
    for (let i = 0; i < 3; i++) await client.schedule(due, { domain: 'full', name: 'reminder', pid: `r${i}` });

    leaveNoRoom(path, disk);
    // They come due; the store cannot fire them.
    await eventually(async () => (await metric(gateway, 'eventflow_store_errors_total{operation="claimDueScheduled"}')) >= 1, 5_000, 'a run of the scheduler to fail');
    expect(handled).toEqual([]);

    disk.free();
    const freed = Date.now();
    await eventually(() => handled.length === 3, 10_000, 'the reminders to be handled');
    expect(Date.now() - freed).toBeLessThan(3_000);
    expect(handled.sort()).toEqual(['r0', 'r1', 'r2']);
    await eventually(() => rows(path, 'reminders').length === 3 && rows(path, 'reminders').every((row) => row.outcome === 'success'), 5_000, 'their outcomes');
  }, 60_000);

  it('a settle the store could not record before the lease ran out is written by the gateway once space is back: the last attempt\'s success is no dead letter, and the handler does not run again', async () => {
    const { gateway, path, disk } = await start(1_500);
    client = createClient(gateway.url, { onError: () => undefined });
    const attempts: number[] = [];
    await client.consume(
      'full',
      'job',
      async (_event, { attempt }) => {
        attempts.push(attempt);
        if (attempt === 1) throw new Error('the first attempt fails');
        // The last attempt succeeds; its settle meets a full disk.
        leaveNoRoom(path, disk);
      },
      { group: 'workers', retry: { attempts: 2, backoff: 'fixed', delayMs: 100 } },
    );
    await client.publish({ domain: 'full', name: 'job', pid: 'p' });
    await eventually(async () => (await metric(gateway, 'eventflow_store_errors_total{operation="ledger.apply"}')) >= 1, 10_000, 'the settle to fail');
    // Time is what is tested: the lease (1.5 s) runs out with the settle not recorded, so the client
    // stops sending it again, and what the gateway writes then fails too.
    const failedBefore = await metric(gateway, 'eventflow_store_errors_total{operation="ledger.apply"}');
    await sleep(2_000);
    expect(await metric(gateway, 'eventflow_store_errors_total{operation="ledger.apply"}')).toBeGreaterThan(failedBefore);

    disk.free();
    await eventually(() => rows(path, 'workers')[0]?.outcome != null, 5_000, 'an outcome');
    expect(rows(path, 'workers')).toEqual([{ outcome: 'success', attempts: 2 }]);
    expect(attempts).toEqual([1, 2]);
    expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}')).toBe(1);
    expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="dead_lettered"}')).toBe(0);
  }, 60_000);

  it('an ordered group and a retry policy drain through a full disk: in order, no run twice, dead letters with their last error, metrics equal to the store', async () => {
    const { gateway, path, disk } = await start();
    client = createClient(gateway.url, { onError: () => undefined });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const ordered: Array<{ pid: string; n: number }> = [];
    const retried: Array<{ n: number; attempt: number }> = [];
    await client.consume('full', 'job', async (event) => void (await gate, ordered.push({ pid: event.pid, n: Number(event.data.n) })), { group: 'ordered', ordered: true, concurrency: 8 });
    await client.consume(
      'full',
      'job',
      async (event, { attempt }) => {
        await gate;
        retried.push({ n: Number(event.data.n), attempt });
        if (Number(event.data.n) % 5 === 0) throw new Error(`fail ${String(event.data.n)} ${attempt}`);
      },
      { group: 'retried', concurrency: 8, retry: { attempts: 3, backoff: 'fixed', delayMs: 200 } },
    );
    const EVENTS = 200;
    for (let i = 0; i < EVENTS; i += 50) await Promise.all(Array.from({ length: 50 }, (_, k) => client!.publish({ domain: 'full', name: 'job', pid: `p${(i + k) % 10}`, data: { n: i + k } })));

    leaveNoRoom(path, disk);
    release();
    // The first settles meet the full disk (and hold the members' credit until they are recorded).
    await eventually(async () => (await metric(gateway, 'eventflow_store_errors_total{operation="ledger.apply"}')) >= 1, 5_000, 'a settle batch to fail');

    disk.free();
    const db = new Database(path, { readonly: true });
    try {
      const count = (where: string): number => (db.prepare(`SELECT COUNT(*) AS n FROM eventflow_delivery WHERE ${where}`).get() as { n: number }).n;
      await eventually(() => count(`outcome IS NOT NULL`) === 2 * EVENTS, 20_000, 'every event of both groups to reach an outcome');
      // Ordered: each event once, per pid in the order published.
      expect(ordered.length).toBe(EVENTS);
      for (let pid = 0; pid < 10; pid++) {
        const ns = ordered.filter((run) => run.pid === `p${pid}`).map((run) => run.n);
        expect(ns).toEqual([...ns].sort((a, b) => a - b));
      }
      expect(count(`grp = 'ordered' AND outcome = 'success' AND attempts = 1`)).toBe(EVENTS);
      // Retried: one run per attempt; the failing ones dead after three, with the third's error.
      expect(retried.length).toBe(EVENTS + (EVENTS / 5) * 2);
      expect(count(`grp = 'retried' AND outcome = 'success' AND attempts = 1`)).toBe(EVENTS - EVENTS / 5);
      const dead = db.prepare(`SELECT last_error AS error, attempts FROM eventflow_delivery WHERE grp = 'retried' AND outcome = 'dead'`).all() as Array<{ error: string; attempts: number }>;
      expect(dead.length).toBe(EVENTS / 5);
      for (const letter of dead) expect(letter).toEqual({ error: expect.stringMatching(/^fail \d+ 3$/), attempts: 3 });
      // The metrics say what the store holds.
      expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}')).toBe(count(`outcome = 'success'`));
      expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="dead_lettered"}')).toBe(EVENTS / 5);
      expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="retried"}')).toBe((EVENTS / 5) * 2);
      expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="revoked"}')).toBe(0);
    } finally {
      db.close();
    }
  }, 60_000);

  it('a consumer registered again on a new connection while the disk is full is registered once space is back, not at its next connection', async () => {
    const { gateway, path, disk } = await start();
    proxy = await startPartitionProxy(Number(new URL(gateway.url).port));
    const errors: unknown[] = [];
    worker = createClient(`ws://127.0.0.1:${proxy.port}/`, { reconnect: { minDelay: 20, maxDelay: 100 }, onError: (error) => errors.push(error) });
    const handled: string[] = [];
    await worker.consume('full', 'job', async (event) => void handled.push(event.pid), { group: 'workers', ordered: true });
    // Another member sets the group unordered and leaves: the worker's registration again writes the group.
    client = createClient(gateway.url, { onError: () => undefined });
    await (await client.consume('full', 'job', async () => undefined, { group: 'workers', ordered: false })).remove();

    leaveNoRoom(path, disk);
    proxy.cut();
    await eventually(async () => (await metric(gateway, 'eventflow_store_errors_total{operation="ledger.ensureGroup"}')) >= 1, 5_000, 'the registration again to fail');
    expect(errors.some((error) => isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED'))).toBe(true);

    disk.free();
    await client.publish({ domain: 'full', name: 'job', pid: 'after' });
    await eventually(() => handled.includes('after'), 10_000, 'the worker to get the event published once space was back');
  }, 60_000);
});
