/**
 * A consumer's settle the store cannot record before its lease runs out is written by the gateway
 * itself (leases.ts), again while the store fails (waiting-reports.ts): never given up (the DESIGN:
 * an event reaches its outcome once the store is back, with no restart), but with a growing backoff,
 * counted in /metrics and said in the log, and written at once when the store records a settle again.
 * The fault: the ledger's writes of outcomes fail while the test says so (a store that cannot write),
 * on a real gateway, SQLite file and WebSocket.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { createClient, EventflowError } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { connect, type Frame } from '@eventflow/test-support/raw-socket';
import { metric } from '@eventflow/test-support/gateway-http';
import { eventually, sleep } from '@eventflow/test-support/wait';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

// Before: each waiting report was written again every second for as long as the store failed, silently
// (no metric, no log line of its own), and one recorded settle did not hurry the others.
it('a settle the store cannot record is written again with a growing backoff, counted and logged, and all of them at once when the store takes one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-report-retry-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'events.db');
  const lines: string[] = [];
  const gateway: Gateway = await startGateway(
    { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'info', EVENTFLOW_CONSOLE_DIR: 'off', EVENTFLOW_CONSUME_LEASE_MS: 300 },
    { logDestination: (line) => lines.push(line) },
  );
  cleanup.push(() => gateway.close());
  const ledger = gateway.store.ledger();
  const apply = ledger.apply.bind(ledger);
  let failing = false;
  /** Each refused write of an outcome: when, and for which deliveries. */
  const refused: Array<{ at: number; deliveries: string[] }> = [];
  ledger.apply = async (actions) => {
    const outcomes = actions.filter((action) => action.kind === 'outcome').map((action) => action.delivery);
    if (failing && outcomes.length > 0) {
      refused.push({ at: Date.now(), deliveries: outcomes });
      throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the store cannot write (the test)');
    }
    return apply(actions);
  };

  const publisher = createClient(gateway.url, { onError: () => undefined });
  cleanup.push(() => publisher.close());
  const worker = await connect(gateway.url);
  cleanup.push(() => worker.ws.close());
  expect((await worker.request('consume', { consumer: 'w', domain: 'rep', name: 'job', group: 'g', concurrency: 3 })).type).toBe('result');
  for (const pid of ['p1', 'p2']) await publisher.publish({ domain: 'rep', name: 'job', pid });
  const deliveries: Frame[] = [];
  for (let i = 0; i < 2; i++) deliveries.push(await worker.next((frame) => frame.type === 'delivery', 5_000));
  const [first, second] = deliveries.map((frame) => frame.delivery as string) as [string, string];

  failing = true;
  for (const delivery of [first, second]) {
    expect(await worker.request('settle', { delivery, outcome: 'success' })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_STORE_FAILED' });
  }
  // The client does not send them again: from the lease's end (300 ms) the gateway writes them itself.
  await eventually(async () => (await metric(gateway, 'eventflow_consume_reports_waiting')) === 2, 5_000, 'the reports counted as waiting');
  await eventually(() => refused.filter((write) => write.deliveries.includes(first)).length >= 2, 5_000, "the gateway's first write of the report");
  const leaseEnd = refused.filter((write) => write.deliveries.includes(first))[1]?.at as number;
  // Time is what is tested: the store stays failing for 5 s after the lease's end.
  await sleep(5_000 - (Date.now() - leaseEnd));
  const writes = refused.filter((write) => write.deliveries.includes(first) && write.at >= leaseEnd).map((write) => write.at);
  // 1 s (half of it random), then 2 s, then 4 s: at most 3 writes after the first within 5 s (every second: 5).
  expect(writes.length, JSON.stringify(writes.map((at) => at - leaseEnd))).toBeLessThanOrEqual(4);
  expect(writes.length).toBeGreaterThanOrEqual(2);
  const gaps = writes.slice(1).map((at, i) => at - (writes[i] as number));
  for (const [i, gap] of gaps.entries()) expect(gap, JSON.stringify(gaps)).toBeGreaterThanOrEqual(500 * 2 ** i - 50);
  expect(lines.filter((line) => line.includes("consumers' reports wait for the store"))).toHaveLength(1);
  expect(await metric(gateway, 'eventflow_consume_reports_waiting')).toBe(2);

  // The store takes writes again: a settle recorded now has the two waiting ones written at once, not at their backoff's end.
  failing = false;
  await publisher.publish({ domain: 'rep', name: 'job', pid: 'p3' });
  const third = (await worker.next((frame) => frame.type === 'delivery', 5_000)).delivery as string;
  const back = Date.now();
  expect(await worker.request('settle', { delivery: third, outcome: 'success' })).toMatchObject({ type: 'result' });
  await eventually(async () => (await metric(gateway, 'eventflow_consume_reports_waiting')) === 0, 2_000, 'the waiting reports written');
  expect(Date.now() - back).toBeLessThan(1_000);
  const db = new Database(path, { readonly: true });
  try {
    expect(db.prepare(`SELECT outcome, attempts FROM eventflow_delivery WHERE grp = 'g' ORDER BY position`).all()).toEqual([
      { outcome: 'success', attempts: 1 },
      { outcome: 'success', attempts: 1 },
      { outcome: 'success', attempts: 1 },
    ]);
  } finally {
    db.close();
  }
  expect(await metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}')).toBe(3);
  await eventually(() => lines.some((line) => line.includes("the store recorded the consumers' reports that waited for it")), 2_000, 'the line saying so');
}, 20_000);

// Before: a report refused for its own row (another client's lock on it) while the store records the rest was
// written again at every settle recorded beside it, each waiting out the lock's bound on MariaDB.
it("a report refused for its own row is written again at most every quarter second while the group's other settles are recorded", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-report-row-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'events.db');
  const gateway: Gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off', EVENTFLOW_CONSUME_LEASE_MS: 300 });
  cleanup.push(() => gateway.close());
  const ledger = gateway.store.ledger();
  const apply = ledger.apply.bind(ledger);
  let held: string | undefined;
  const refused: number[] = [];
  ledger.apply = async (actions) => {
    const blocked = actions.map((action) => action.kind === 'outcome' && action.delivery === held);
    if (!blocked.includes(true)) return apply(actions);
    refused.push(Date.now());
    const rest = await apply(actions.filter((_, i) => !blocked[i]));
    let next = 0;
    return actions.map((_, i) => (blocked[i] ? new EventflowError('E_EVENTFLOW_STORE_FAILED', "another client's transaction holds the delivery's ledger row (the test)") : rest[next++]));
  };
  // A batch that would ride the appends' transaction (SQLite) goes through `apply` when it holds the report.
  const store = gateway.store;
  const withAppends = store.applyWithAppends?.bind(store);
  store.applyWithAppends = (actions) => (actions.some((action) => action.delivery === held) ? undefined : withAppends?.(actions));
  const publisher = createClient(gateway.url, { onError: () => undefined });
  cleanup.push(() => publisher.close());
  const worker = await connect(gateway.url);
  cleanup.push(() => worker.ws.close());
  expect((await worker.request('consume', { consumer: 'w', domain: 'rep', name: 'job', group: 'g', concurrency: 3 })).type).toBe('result');
  await publisher.publish({ domain: 'rep', name: 'job', pid: 'held' });
  held = (await worker.next((frame) => frame.type === 'delivery', 5_000)).delivery as string;
  expect(await worker.request('settle', { delivery: held, outcome: 'success' })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_STORE_FAILED' });
  await eventually(() => refused.length >= 2, 5_000, "the gateway's first write of the report, at the lease's end");
  const leaseEnd = refused[1] as number;
  // The group's other jobs go on, each settle recorded: ~10 ms apart.
  let recorded = 0;
  for (let i = 0; Date.now() - leaseEnd < 2_000; i++) {
    await publisher.publish({ domain: 'rep', name: 'job', pid: `p${i}` });
    const delivery = (await worker.next((frame) => frame.type === 'delivery', 5_000)).delivery as string;
    if ((await worker.request('settle', { delivery, outcome: 'success' })).type === 'result') recorded += 1;
  }
  const tries = refused.filter((at) => at > leaseEnd && at <= leaseEnd + 2_000);
  expect(recorded).toBeGreaterThan(30);
  // At most every 250 ms (before: at every recorded settle, 1,336–1,514 writes in these 2 s).
  expect(tries.length, JSON.stringify(tries.slice(0, 20).map((at) => at - leaseEnd))).toBeLessThanOrEqual(9);
  expect(tries.length).toBeGreaterThanOrEqual(3);
  held = undefined;
  await eventually(async () => (await metric(gateway, 'eventflow_consume_reports_waiting')) === 0, 2_000, 'the report written once its row is free');
  const db = new Database(path, { readonly: true });
  try {
    expect(db.prepare(`SELECT outcome, attempts FROM eventflow_delivery WHERE grp = 'g' AND outcome IS NOT 'success'`).all()).toEqual([]);
  } finally {
    db.close();
  }
}, 20_000);
