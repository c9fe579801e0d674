/**
 * Chaos: an ordered group with a retry policy, worked by several members while its gateways are
 * SIGKILLed and stopped with SIGTERM mid-handler and started again (SQLite: one gateway process and
 * several members; MariaDB: two gateway processes on one database). Handlers take random times, some
 * longer than the lease (they honour their signal), and throw at random. Then:
 *  - per pid, the handlers start in position order: an event that is retried or redelivered (a
 *    lease run out, a gateway gone) runs again before the next event of its pid, never after it;
 *  - every event reaches one outcome for the group: `success`, or a dead letter after exactly
 *    `attempts` deliveries carrying its last error; no attempt number above `attempts` is seen (a
 *    throw whose settle reached the restarted gateway was recorded `failed` at its first attempt,
 *    decided without the consumer's policy, before the clients waited for their registration).
 * Handlers of one pid may overlap for the moment a revoke takes to reach its client (counted, not
 * asserted: one delivery is open, not one execution).
 */
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createClient, generateEventId, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { freePort, kill9, startGatewayProcess, stop } from '@eventflow/test-support/gateway-process';
import { chaosStores, mysqlGatewayEnv, useChaosLifecycle } from './support.js';

const { temp, clients } = useChaosLifecycle();
const databases = useTestDatabases();

const PIDS = 16;
const ROUNDS = 30;
const ATTEMPTS = 4;
const LEASE_MS = 1_500;
const THROW_RATE = 0.3;

/** Whether (event, attempt) throws: decided by a hash, so that the test knows it afterwards. */
const throws = (id: string, attempt: number): boolean => createHash('sha256').update(`${id}:${attempt}`).digest()[0]! / 256 < THROW_RATE;

type Row = { id: string; outcome: string | null; attempts: number; lastError: string | null };

describe.each(chaosStores)('chaos: an ordered group with retries across gateway SIGKILL and SIGTERM ($store)', ({ store }) => {
  const skip = store === 'mysql' ? mysqlUnavailable : undefined;
  it.skipIf(skip !== undefined)('per pid in position order, retried events before the next; one outcome each, dead letters after exactly `attempts`', async () => {
    const mysql = store === 'mysql' ? await databases.fresh() : undefined;
    const dbPath = join(temp.dir, `ordered-${store}.db`);
    const env = { ...(mysql ? mysqlGatewayEnv(mysql.options) : {}), EVENTFLOW_CONSUME_LEASE_MS: LEASE_MS, EVENTFLOW_DRAIN_TIMEOUT_MS: 300 };
    const ports = await Promise.all((mysql ? [0, 1] : [0]).map(() => freePort()));
    const gateways: ChildProcess[] = [];
    for (const [i, port] of ports.entries()) gateways[i] = (await startGatewayProcess(port, dbPath, env)).proc;
    databases.onCleanup(() => Promise.all(gateways.map((gateway) => kill9(gateway))));
    const client = (i: number): EventflowClient => {
      const made = createClient(`ws://127.0.0.1:${ports[i % ports.length]}/`, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
      clients.push(made);
      return made;
    };

    /** Per pid, the round of each handler start, in the order they started. */
    const starts = new Map<string, number[]>();
    const maxAttempt = new Map<string, number>();
    const runsAfterOutcome: string[] = [];
    /** Handlers of one pid running at once (only where a revoked or lost delivery's handler had not seen its signal yet). */
    const running = new Set<string>();
    let overlaps = 0;
    const succeeded = new Set<string>();
    const handler = async (event: StoredEvent, { attempt, signal }: { attempt: number; signal: AbortSignal }): Promise<void> => {
      const round = (event.data as { round: number }).round;
      if (succeeded.has(event.id)) runsAfterOutcome.push(`${event.pid}:${round}`);
      starts.set(event.pid, [...(starts.get(event.pid) ?? []), round]);
      if (running.has(event.pid)) overlaps++;
      running.add(event.pid);
      maxAttempt.set(event.id, Math.max(maxAttempt.get(event.id) ?? 0, attempt));
      // Mostly short; now and then longer than the lease (revoked: the signal aborts it).
      const ms = Math.random() < 0.03 ? LEASE_MS + 1_000 : Math.floor(Math.random() * 20);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, ms);
        signal.addEventListener('abort', () => (clearTimeout(timer), reject(new Error('revoked'))), { once: true });
      }).finally(() => running.delete(event.pid));
      if (throws(event.id, attempt)) throw new Error(`failed ${event.id} at ${attempt}`);
      succeeded.add(event.id);
    };
    for (let m = 0; m < 4; m++) await client(m).consume('ordered-chaos', 'step', handler, { group: 'process', ordered: true, concurrency: 4, retry: { attempts: ATTEMPTS, backoff: 'fixed', delayMs: 100 } });

    const publisher = client(0);
    const published: string[] = [];
    const publishing = (async () => {
      for (let round = 0; round < ROUNDS; round++) {
        await Promise.all(
          Array.from({ length: PIDS }, async (_, p) => {
            const id = generateEventId();
            // The same id until acknowledged: stored once.
            for (;;) {
              try {
                await publisher.publish({ id, domain: 'ordered-chaos', name: 'step', pid: `pid-${p}`, data: { round } }, { timeout: 3_000 });
                published.push(id);
                return;
              } catch {
                await sleep(50);
              }
            }
          }),
        );
        await sleep(100);
      }
    })();

    // The faults, while events are published and handled.
    const restart = async (i: number, signal: NodeJS.Signals): Promise<void> => {
      await (signal === 'SIGKILL' ? kill9(gateways[i]!) : stop(gateways[i]!, signal));
      gateways[i] = (await startGatewayProcess(ports[i]!, dbPath, env)).proc;
    };
    await eventually(() => published.length >= PIDS * 5, 20_000, 'five rounds published');
    await restart(0, 'SIGKILL');
    await eventually(() => published.length >= PIDS * 12, 20_000, 'twelve rounds published');
    await restart(ports.length - 1, 'SIGTERM');
    await eventually(() => published.length >= PIDS * 20, 20_000, 'twenty rounds published');
    await restart(0, 'SIGKILL');
    await publishing;

    const rows = async (): Promise<Row[]> => {
      const sql = `SELECT event_id AS id, outcome, attempts, last_error AS lastError FROM eventflow_delivery WHERE grp = 'process'`;
      if (mysql) return (await mysql.query<Row>(sql)).map((row) => ({ ...row, attempts: Number(row.attempts) }));
      const db = new Database(dbPath, { readonly: true, timeout: 5_000 });
      try {
        return db.prepare(sql).all() as Row[];
      } finally {
        db.close();
      }
    };
    await eventually(async () => {
      const all = await rows();
      return all.length === PIDS * ROUNDS && all.every((row) => row.outcome !== null);
    }, 60_000, 'every event to reach an outcome');
    const all = await rows();
    expect(new Set(all.map((row) => row.id))).toEqual(new Set(published));

    // Per pid: the rounds start in order; a round may start again (a retry, a redelivery) only
    // before the next one has started.
    const disorder: string[] = [];
    for (const [pid, list] of starts) for (let i = 1; i < list.length; i++) if (list[i]! < list[i - 1]!) disorder.push(`${pid}: ${list.join(',')}`);
    expect(disorder).toEqual([]);
    for (const [pid, list] of starts) expect(new Set(list).size, pid).toBe(ROUNDS);

    const dead = all.filter((row) => row.outcome === 'dead');
    for (const row of dead) {
      expect(row.attempts, row.id).toBe(ATTEMPTS);
      expect(row.lastError, row.id).toMatch(/^failed .* at \d$|^lease expired$|^connection closed$/);
    }
    expect(all.filter((row) => row.outcome !== 'dead' && row.outcome !== 'success')).toEqual([]);
    expect([...maxAttempt.entries()].filter(([, attempt]) => attempt > ATTEMPTS)).toEqual([]);
    console.info(
      `[ordered chaos ${store}] ${all.length} events, ${dead.length} dead letters, ${[...maxAttempt.values()].filter((a) => a > 1).length} run more than once, ` +
        `max attempt ${Math.max(...maxAttempt.values())}, ${runsAfterOutcome.length} run again after a handler had returned (its settle not recorded in time), ${overlaps} overlaps`,
    );
    await Promise.all(gateways.map((gateway) => stop(gateway)));
  }, 180_000);
});
