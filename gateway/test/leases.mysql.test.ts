/**
 * Consume leases on the MariaDB store (the SQLite suite is leases.test.ts): an unsettled delivery
 * is revoked and redelivered to the other consumer, and after the last attempt the event is failed
 * and recorded as a dead letter.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { LEASE, stuck } from './lease-support.js';

describe.skipIf(mysqlUnavailable !== undefined)('consume leases (MariaDB)', () => {
  const { fresh } = useTestDatabases();
  let gateway: Gateway | undefined;
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });

  it('revoke, redeliver to the other consumer, then dead-letter after the last attempt', async () => {
    const db = await fresh();
    const { options } = db;
    gateway = await startGateway({
      EVENTFLOW_PORT: 0,
      EVENTFLOW_LOG_LEVEL: 'silent',
      EVENTFLOW_STORE: 'mysql',
      EVENTFLOW_MYSQL_HOST: options.host ?? '127.0.0.1',
      EVENTFLOW_MYSQL_PORT: options.port ?? 3306,
      EVENTFLOW_MYSQL_USER: options.user ?? 'root',
      EVENTFLOW_MYSQL_PASSWORD: options.password ?? '',
      EVENTFLOW_MYSQL_DATABASE: options.database ?? db.name,
      EVENTFLOW_CONSUME_LEASE_MS: LEASE,
      EVENTFLOW_CONSUME_MAX_ATTEMPTS: 3,
    });
    const clients = [0, 1].map(() => createClient(gateway!.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined }));
    try {
      const a = stuck();
      const b = stuck();
      await clients[0]!.consume('jobs', 'run', a.handler);
      await clients[1]!.consume('jobs', 'run', b.handler);
      const id = await clients[0]!.publish({ domain: 'jobs', name: 'run', pid: 'p' });
      const row = async () => (await db.query<{ success: string | null; failed: string | null }>('SELECT success, failed FROM event_published WHERE event_id = ?', [id]))[0];
      await eventually(async () => (await row())?.failed ?? undefined, 8_000, 'failed');
      const attempts = [...a.seen, ...b.seen].map((s) => s.attempt).sort();
      expect(attempts).toEqual([1, 2, 3]);
      // Each redelivery went to the other consumer.
      expect(Math.abs(a.seen.length - b.seen.length)).toBe(1);
      await eventually(() => [...a.seen, ...b.seen].every((s) => s.signal.aborted), 5_000, 'every delivery revoked');
      expect((await row())?.success).toBeNull();
      expect(await gateway.store.deadLetters()).toMatchObject([{ eventId: id, domain: 'jobs', name: 'run', pid: 'p', attempts: 3, reason: 'lease expired' }]);
    } finally {
      await Promise.allSettled(clients.map((client) => client.close({ drainTimeout: 0 })));
    }
  });
});
