/**
 * Consume leases on the MariaDB store (the SQLite suite is leases.test.ts): an unsettled delivery
 * is revoked and redelivered to the other consumer, and after the last attempt the event is failed
 * and recorded as a dead letter; the gateway holding a delivery revokes it when its lease runs out
 * in the store, before another gateway on the database hands the event out again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { connect } from '@eventflow/test-support/raw-socket';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
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

  it('an extend answered late (the database slow to write it) still expires at the deadline it wrote: revoked before another gateway hands the event out', async () => {
    const db = await fresh();
    const env = { ...mysqlGatewayEnv(db.options), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off', EVENTFLOW_CONSUME_LEASE_MS: 1_000 };
    const [a, b] = [await startGateway(env), await startGateway(env)] as [Gateway, Gateway];
    const publisher = createClient(a.url, { onError: () => undefined });
    const holder = await connect(a.url);
    const other = await connect(b.url);
    try {
      // Its one slot taken by the delivery: the holder's gateway makes no claim that could take the lease over itself.
      expect((await holder.request('consume', { consumer: 'c1', domain: 'slow', name: 'job', group: 'g', concurrency: 1 })).type).toBe('result');
      const id = await publisher.publish({ domain: 'slow', name: 'job', pid: 'p' });
      const first = await holder.next((frame) => frame.type === 'delivery', 5_000);
      expect((await other.request('consume', { consumer: 'c2', domain: 'slow', name: 'job', group: 'g' })).type).toBe('result');
      // The delivery's row locked for a while: the extend's UPDATE waits for it.
      const lock = await db.connect();
      await lock.query('BEGIN');
      await lock.query('SELECT event_id FROM eventflow_delivery WHERE event_id = ? FOR UPDATE', [id]);
      const extending = holder.sendRequest('extend', { delivery: first.delivery, ms: 1_000 });
      // Time is what is tested: the write waits this long.
      await sleep(500);
      await lock.query('COMMIT');
      expect((await holder.answer(extending)).type).toBe('result');
      await holder.next((frame) => frame.type === 'revoked' && frame.delivery === first.delivery, 5_000);
      // Revoked by its gateway at the deadline in the store, not a lease after the extend's answer
      // (half a second later: the other gateway had handed the event out again meanwhile).
      expect(other.frames.filter((frame) => frame.type === 'delivery')).toEqual([]);
      const again = await Promise.race([holder.next((frame) => frame.type === 'delivery', 5_000), other.next((frame) => frame.type === 'delivery', 5_000)]);
      expect(again).toMatchObject({ attempt: 2 });
    } finally {
      holder.ws.close();
      other.ws.close();
      await publisher.close();
      await Promise.all([a.close(), b.close()]);
    }
  });
  // Before: B's claim, held past its lease on its way to the database, committed leases already run out; A's claim took
  // them over as expired before B's hand-back could take the attempt back, so on a single attempt the job became a dead
  // letter that never ran (with more attempts, its one run was attempt 2).
  it('a claim held past its lease on its way to the database leases and counts nothing: the job runs once on the other gateway, as attempt 1', async () => {
    const db = await fresh();
    const env = { ...mysqlGatewayEnv(db.options), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off', EVENTFLOW_CONSUME_LEASE_MS: 1_000, EVENTFLOW_CONSUME_MAX_ATTEMPTS: 1 };
    const [a, b] = [await startGateway(env), await startGateway(env)] as [Gateway, Gateway];
    // The fault, on B's link to the database: one claim reaches the database after its lease ran out, and its answer
    // comes back only once A has claimed.
    const ledger = b.store.ledger();
    const claim = ledger.claim.bind(ledger);
    let claiming = 0;
    let fault: { reached: () => void; answer: Promise<void> } | undefined;
    ledger.claim = async (request) => {
      const held = fault;
      fault = undefined;
      claiming += 1;
      try {
        if (!held) return await claim(request);
        // Time is what the fault is: the lease (1 s) runs out before the claim's statements reach the database.
        await sleep(1_300);
        const settled = await claim(request).then((result) => ({ result }), (error: unknown) => ({ error }));
        held.reached();
        await held.answer;
        if ('error' in settled) throw settled.error;
        return settled.result;
      } finally {
        claiming -= 1;
      }
    };
    const publisher = createClient(a.url, { onError: () => undefined });
    const onB = await connect(b.url);
    const onA = await connect(a.url);
    try {
      expect((await onB.request('consume', { consumer: 'b', domain: 'late', name: 'job', group: 'g', concurrency: 1 })).type).toBe('result');
      await eventually(() => claiming === 0, 5_000, "B's claims of the empty group");
      let reached = (): void => undefined;
      let answer = (): void => undefined;
      const atDatabase = new Promise<void>((resolve) => (reached = resolve));
      fault = { reached, answer: new Promise<void>((resolve) => (answer = resolve)) };
      const id = await publisher.publish({ domain: 'late', name: 'job', pid: 'p' });
      await atDatabase;
      const row = async () => (await db.query<{ attempts: number; outcome: string | null }>(`SELECT attempts, outcome FROM eventflow_delivery WHERE event_id = ? AND grp = 'g'`, [id]))[0];
      expect((await onA.request('consume', { consumer: 'a', domain: 'late', name: 'job', group: 'g' })).type).toBe('result');
      await eventually(async () => onA.frames.some((frame) => frame.type === 'delivery') || (await row())?.outcome === 'dead', 8_000, "A's claim");
      answer();
      expect(await row()).toMatchObject({ outcome: null, attempts: 1 });
      const delivery = await onA.next((frame) => frame.type === 'delivery', 1_000);
      expect(delivery).toMatchObject({ attempt: 1 });
      expect(await onA.request('settle', { delivery: delivery.delivery, outcome: 'success' })).toMatchObject({ type: 'result' });
      expect(await row()).toMatchObject({ outcome: 'success', attempts: 1 });
      // B's claim, answered now, hands its member nothing.
      await eventually(() => claiming === 0, 5_000, "B's claim answered");
      expect(onB.frames.filter((frame) => frame.type === 'delivery')).toEqual([]);
      expect(await a.store.ledger().deadLetters({ limit: 10, offset: 0 })).toEqual([]);
    } finally {
      onA.ws.close();
      onB.ws.close();
      await publisher.close();
      await Promise.all([a.close(), b.close()]);
    }
  });
});
