/**
 * A worker's settles always fit the gateway's frame limit (EVENTFLOW_MAX_FRAME_BYTES, announced in
 * welcome.limits.maxFrameBytes): handlers that throw at once with long or non-ASCII messages are
 * reported in as many settleMany frames as their bytes need, and a message that alone would not fit
 * a frame is cut. Before, settleMany was cut by count only: 300 handlers throwing 4,096 'é' (8 KiB
 * each in UTF-8) made a 2.5 MB frame, the gateway closed the connection (1009), every delivery went
 * out again, and the client sent the same frame on each new connection: 1,500 handler runs, 300
 * dead letters, and no failure recorded.
 */
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import type { EventflowClient } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** The outcomes and errors of group `g`'s rows, from the SQLite file. */
function ledger(dbPath: string): Array<{ outcome: string | null; attempts: number; lastError: string | null }> {
  const db = new Database(dbPath, { readonly: true, timeout: 5_000 });
  try {
    return db.prepare(`SELECT outcome, attempts, last_error AS lastError FROM eventflow_delivery WHERE grp = 'g'`).all() as Array<{ outcome: string | null; attempts: number; lastError: string | null }>;
  } finally {
    db.close();
  }
}

/** `count` deliveries open at once on one worker, whose handlers then all throw `message`; resolves with the worker's connection states and the runs. */
async function throwTogether(harness: Harness, count: number, message: string): Promise<{ states: string[]; runs: () => number; worker: EventflowClient }> {
  const worker = harness.client();
  const states: string[] = [];
  worker.onStateChange((state) => states.push(state));
  let go!: () => void;
  const gate = new Promise<void>((resolve) => (go = resolve));
  let runs = 0;
  await worker.consume(
    'jobs',
    'run',
    async () => {
      runs += 1;
      await gate;
      throw new Error(message);
    },
    { group: 'g', concurrency: count },
  );
  const publisher = harness.client();
  await Promise.all(Array.from({ length: count }, (_, i) => publisher.publish({ domain: 'jobs', name: 'run', pid: `p${i}` })));
  await eventually(() => runs === count, 10_000, 'every handler running');
  go();
  return { states, runs: () => runs, worker };
}

it('300 handlers throwing 8 KiB messages at once: their failures are recorded whole, once each, and the connection stays up', async () => {
  h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
  const message = 'é'.repeat(4096);
  const { states, runs } = await throwTogether(h, 300, message);
  const dbPath = h.dbPath;
  await eventually(() => ledger(dbPath).filter((row) => row.outcome === 'failed').length === 300, 10_000, 'every failure recorded');
  expect(ledger(dbPath).every((row) => row.attempts === 1 && row.lastError === message)).toBe(true);
  expect(runs()).toBe(300);
  expect(states).not.toContain('offline');
});

it('a message that alone would not fit a frame is cut to fit: the failure is recorded, the connection stays up', async () => {
  h = await startHarness({ EVENTFLOW_MAX_FRAME_BYTES: 4096 });
  const message = '\u0001'.repeat(4096); // 6 bytes each in JSON ("\u0001"): 24 KiB
  const { states, runs } = await throwTogether(h, 3, message);
  const dbPath = h.dbPath;
  await eventually(() => ledger(dbPath).filter((row) => row.outcome === 'failed').length === 3, 10_000, 'every failure recorded');
  for (const row of ledger(dbPath)) {
    expect(row.attempts).toBe(1);
    expect(message.startsWith(row.lastError ?? 'none')).toBe(true);
    expect(row.lastError?.length).toBeGreaterThan(64);
  }
  expect(runs()).toBe(3);
  expect(states).not.toContain('offline');
});
