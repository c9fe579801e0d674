/**
 * Chaos: four competing consumer processes, 10 000 events, one consumer SIGKILLed mid-run.
 *
 * Asserted:
 *  - in the SQLite file, every one of the 10 000 events has `success` set and `failed` NULL
 *    (the outcome columns are written once: exactly one success per event);
 *  - every event id was handled successfully by at least one consumer process (the union of the
 *    per-process files covers all 10 000);
 *  - among the three surviving processes, no event id was handled successfully twice (neither
 *    by two of them nor twice by one): redelivery happened only for the killed process;
 *  - ids the killed process handled but could not settle before it died may be handled again by a
 *    survivor (at-least-once); those overlaps are counted and printed, not forbidden.
 */
import { join } from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type EventflowClient } from '@eventflow/core';
import { buildOnce, chaosDir, eventually, freePort, kill9, killAllChildren, sleep, spawnNode, startGatewayProcess, stop, tempDir } from './support.js';

const EVENTS = 10_000;
const PIPELINE = 200;
const CONSUMERS = 4;

const temp = tempDir();
const clients: EventflowClient[] = [];
beforeAll(() => buildOnce(), 120_000);
afterAll(async () => {
  await Promise.all(clients.map((client) => client.close({ drainTimeout: 100 }).catch(() => undefined)));
  await killAllChildren();
  temp.remove();
}, 30_000);

const lines = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);

function outcomes(dbPath: string): { total: number; success: number; failed: number } {
  const db = new Database(dbPath, { readonly: true, timeout: 5_000 });
  try {
    return db
      .prepare(
        `SELECT COUNT(*) AS total, COUNT(p.success) AS success, COUNT(p.failed) AS failed
         FROM event e JOIN event_published p ON p.event_id = e.id WHERE e.domain = 'jobs'`,
      )
      .get() as { total: number; success: number; failed: number };
  } finally {
    db.close();
  }
}

describe('chaos: competing consumer processes', () => {
  it('10 000 events, one of four consumers SIGKILLed mid-run: every event ends success exactly once', async () => {
    const port = await freePort();
    const dbPath = join(temp.dir, 'eventflow.db');
    const gateway = (await startGatewayProcess(port, dbPath, { EVENTFLOW_CONSUME_LEASE_MS: 2_000 })).proc;
    const url = `ws://127.0.0.1:${port}/`;

    const files = Array.from({ length: CONSUMERS }, (_, i) => join(temp.dir, `consumer-${i}.log`));
    const consumers: ChildProcess[] = await Promise.all(files.map(async (file) => (await spawnNode([join(chaosDir, 'consumer.mjs'), url, file], {}, 'consumer ready')).proc));

    const publisher = createClient(url, { reconnect: { minDelay: 20, maxDelay: 300 }, onError: () => undefined });
    clients.push(publisher);
    const ids: string[] = [];
    let next = 0;
    let killedAt = -1;
    const victim = consumers[0]!;
    const publishing = Promise.all(
      Array.from({ length: PIPELINE }, async () => {
        while (next < EVENTS) {
          const n = next++;
          ids[n] = await publisher.publish({ domain: 'jobs', name: 'run', pid: `job-${n}`, data: { n } });
        }
      }),
    );
    // Kill consumer 0 once it is busy and roughly a third of the events are published.
    await eventually(() => next >= EVENTS / 3 && lines(files[0]!).length > 50, 30_000, 'consumer 0 to be busy');
    killedAt = next;
    await kill9(victim);
    await publishing;
    const publishedAt = Date.now();

    await eventually(() => outcomes(dbPath).success + outcomes(dbPath).failed >= EVENTS, 60_000, 'an outcome for every event');
    const settledIn = Date.now() - publishedAt;
    await sleep(300); // a late duplicate handling would show up in the files now
    const result = outcomes(dbPath);
    expect(result).toEqual({ total: EVENTS, success: EVENTS, failed: 0 });

    const handled = files.map(lines);
    const all = new Set(ids);
    expect(all.size).toBe(EVENTS);
    const union = new Set(handled.flat());
    expect([...all].filter((id) => !union.has(id))).toEqual([]); // each handled successfully somewhere
    expect([...union].filter((id) => !all.has(id))).toEqual([]);
    const survivors = handled.slice(1).flat();
    expect(new Set(survivors).size).toBe(survivors.length); // no id succeeded twice among survivors
    const survivorSet = new Set(survivors);
    const redone = handled[0]!.filter((id) => survivorSet.has(id)).length;
    const killedOnly = handled[0]!.length - redone;
    expect(killedOnly + survivors.length).toBe(EVENTS);

    console.log(
      `[chaos consumers] ${EVENTS} events, consumer 0 SIGKILLed after ${killedAt} publishes; handled per process ${handled.map((h) => h.length).join('/')}; ` +
        `killed process handled ${handled[0]!.length} (${redone} of them handled again by a survivor after the kill); ` +
        `outcomes: ${result.success} success, ${result.failed} failed; all settled ${settledIn} ms after the last publish`,
    );
    await Promise.all(consumers.map((proc) => stop(proc)));
    await stop(gateway);
  }, 90_000);
});
