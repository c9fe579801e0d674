/**
 * An append that leases its event to a waiting group (append-leases.ts) whose COMMIT the server
 * carries out while the answer is lost (a KILL or a cut link at that moment; a proxy of the test's
 * own drops the answer and cuts the connection): the store reads back whether it committed, and
 * hands the lease out. It was given up: the lease ran out in the store with its attempt counted, so
 * the job ran a lease later on its second attempt, and one whose policy allows a single attempt was
 * a dead letter that never ran. The publish is answered `stored: 'unknown'`, and the client's retry
 * finds it stored (store-outage.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { createClient } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { metric } from '@eventflow/test-support/gateway-http';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { commitCuttingProxy } from './commit-cutting-proxy.js';

const LEASE = 4_000;

describe.skipIf(mysqlUnavailable !== undefined)('an append that leases its event, its COMMIT answer lost (MySQL)', () => {
  const databases = useTestDatabases();

  it('hands the lease out: the job runs at once, on its first attempt', async () => {
    const db = await databases.fresh();
    const proxy = await commitCuttingProxy();
    databases.onCleanup(() => proxy.close());
    const gateway = await startGateway({ ...mysqlGatewayEnv({ ...db.options, host: '127.0.0.1', port: proxy.port }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off', EVENTFLOW_CONSUME_LEASE_MS: LEASE });
    databases.onCleanup(() => gateway.close());
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close());
    const handled: Array<{ pid: string; attempt: number; at: number }> = [];
    await client.consume('jobs', 'run', (event, { attempt }) => void handled.push({ pid: event.pid, attempt, at: Date.now() }), { group: 'workers', concurrency: 1, retry: { attempts: 1 } });
    await client.publish({ domain: 'jobs', name: 'run', pid: 'warm-up' });
    await eventually(async () => (await db.query(`SELECT 1 FROM eventflow_delivery WHERE pid = 'warm-up' AND outcome = 'success'`)).length === 1, 5_000, 'the warm-up settled');
    await eventually(async () => (await db.query(`SELECT 1 FROM eventflow_delivery WHERE outcome IS NULL`)).length === 0, 5_000, 'nothing open');
    // Rounds: a group claim on its timer under way as a job is published may hold the member's credit, and the job
    // is claimed, not leased at its append; the rounds make that every time unlikely.
    const jobs = ['job-1', 'job-2', 'job-3'];
    for (const [round, pid] of jobs.entries()) {
      // The append that carries the job: its routine's CALL, which commits (the group's claims on its timer commit too).
      proxy.arm({ call: `"${pid}"` });
      const cutAt = Date.now();
      const id = await client.publish({ domain: 'jobs', name: 'run', pid });
      expect(proxy.cut).toBe(round + 1);
      const job = await eventually(() => handled.find((one) => one.pid === pid), LEASE, `${pid} handled`);
      expect(job.attempt).toBe(1);
      expect(job.at - cutAt).toBeLessThan(LEASE / 2);
      await eventually(async () => (await db.query(`SELECT 1 FROM eventflow_delivery WHERE event_id = ? AND outcome = 'success' AND attempts = 1`, [id])).length === 1, 5_000, `${pid}'s success in the store`);
      expect(await db.query('SELECT id FROM event WHERE id = ?', [id])).toHaveLength(1);
    }
    expect(handled.map((one) => one.pid)).toEqual(['warm-up', ...jobs]);
    await eventually(async () => (await metric(gateway, 'eventflow_consume_outcomes_total{outcome="success"}')) === 4, 5_000, 'the metrics equal to the store');
  }, 30_000);
});
