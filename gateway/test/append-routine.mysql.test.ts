/**
 * The append routine (store/mysql/append-routine.ts): a batch's INSERTs in one CALL on MariaDB. It
 * writes what the statements write, row for row, in every table a batch touches (leases at append
 * included); a database user who may not make or run it appends as before; and a routine that goes
 * away while the store runs (dropped, EXECUTE revoked) costs no append.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '@eventflow/core';
import { mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';
import type { MysqlStore } from '../src/store/mysql/mysql.js';
import { APPEND_ROUTINE } from '../src/store/mysql/append-routine.js';
import type { AppendClaimer, Claimed } from '../src/store/ledger.js';
import { routines, storeOpener } from './mysql-stores.js';

/** The rows a batch writes, without what differs from run to run (times, delivery ids). */
const TABLES = {
  event: 'SELECT id, domain, rid, pid, name, data FROM event ORDER BY id',
  eventflow_position: 'SELECT position, event_id, traceparent, tracestate FROM eventflow_position ORDER BY position',
  event_published: 'SELECT event_id, publisher, hub, consumer, consumed_hub IS NULL AS unrouted, consumed_spoke IS NULL AS unclaimed FROM event_published ORDER BY event_id',
  event_scheduled: 'SELECT event_id, scheduled FROM event_scheduled ORDER BY event_id',
  eventflow_schedule: 'SELECT event_id, due FROM eventflow_schedule ORDER BY event_id',
  eventflow_delivery: 'SELECT event_id, domain, gname, grp, position, pid, name, attempts, delivery IS NULL AS free, owner, deadline FROM eventflow_delivery ORDER BY event_id, grp',
};

describe.skipIf(mysqlUnavailable !== undefined)('the append routine (MariaDB)', () => {
  const databases = useTestDatabases();
  const open = storeOpener(databases);

  /** One workload: plain, traced, scheduled and referring events, a retried id, and a group's leases at append. */
  async function workload(store: MysqlStore): Promise<void> {
    const ledger = store.ledger();
    const group = await ledger.ensureGroup({ domain: 'jobs', name: 'run', group: 'billing' });
    const leased: Claimed[] = [];
    const claimer: AppendClaimer = {
      lease: () => (leased.length < 2 ? { owner: 'gw-1', consumer: 'GW', deadline: 4_102_444_800_000, now: 1 } : undefined),
      committed: (claimed) => void leased.push(...claimed),
      abandoned: () => undefined,
    };
    ledger.claimAtAppend?.(group, claimer);
    const first = await Promise.all([
      store.append({ id: 'a', domain: 'jobs', name: 'run', pid: 'p1', data: { n: 1, text: 'é 😀' } }, { publisher: 'pub' }),
      store.append({ id: 'b', domain: 'jobs', name: 'run', pid: 'p2', data: {}, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'k=v' }, { publisher: 'pub' }),
      store.append({ id: 'c', domain: 'jobs', name: 'run', pid: 'p3', data: {} }, { publisher: 'pub' }),
    ]);
    expect(first.map((written) => written.event.id)).toEqual(['a', 'b', 'c']);
    await store.append({ id: 'd', domain: 'jobs', name: 'other', pid: 'p1', rid: 'a', data: { big: 'x'.repeat(5_000) } }, { publisher: 'pub', routedBy: 'hub-1' });
    await store.append({ id: 's', domain: 'jobs', name: 'later', pid: 'p1', data: {} }, { publisher: 'pub', scheduledAt: new Date(Date.UTC(2030, 0, 1, 12, 0, 0, 500)) });
    // Persisted: no event_published row.
    await store.append({ id: 'q', domain: 'jobs', name: 'quiet', pid: 'p1', data: {} });
    // A retry of a stored event stores nothing; another event under its id is refused.
    expect((await store.append({ id: 'a', domain: 'jobs', name: 'run', pid: 'p1', data: { n: 1, text: 'é 😀' } }, { publisher: 'pub' })).created).toBe(false);
    await expect(store.append({ id: 'a', domain: 'jobs', name: 'run', pid: 'p1', data: { n: 2 } }, { publisher: 'pub' })).rejects.toMatchObject({ code: 'E_EVENTFLOW_DUPLICATE_ID' });
    expect(leased.length).toBeGreaterThan(0);
    ledger.claimAtAppend?.(group, undefined);
  }

  const rows = async (db: TestDatabase): Promise<Record<string, unknown[]>> =>
    Object.fromEntries(await Promise.all(Object.entries(TABLES).map(async ([table, sql]) => [table, await db.query(sql)] as const)));

  it('writes what the statements write, row for row, and stamps events with the time the database stored', async () => {
    const [withRoutine, without] = [await databases.fresh(), await databases.fresh()];
    const routed = await open(withRoutine);
    const plain = await open(without, { appendRoutine: false });
    expect(await routines(withRoutine, 'eventflow_append')).toEqual([APPEND_ROUTINE]);
    expect(await routines(without, 'eventflow_append')).toEqual([]);
    for (const store of [routed, plain]) await workload(store);
    const [a, b] = [await rows(withRoutine), await rows(without)];
    expect(a.event).toHaveLength(6);
    expect(a.eventflow_delivery?.length).toBeGreaterThan(0);
    expect(a).toEqual(b);
    // The timestamp an append answers is the stored one.
    const stored = (await routed.readEventlog('jobs', 'p2')).find((event) => event.id === 'b') as StoredEvent;
    const [row] = await withRoutine.query<{ timestamp: string }>(`SELECT timestamp FROM event WHERE id = 'b'`);
    expect(stored.timestamp).toBe(`${row?.timestamp.replace(' ', 'T')}Z`);
  });

  it('a database user without CREATE ROUTINE or EXECUTE appends with the statements, where the routine exists or not', async () => {
    const user = `ef_plain_${randomBytes(4).toString('hex')}`;
    const password = randomBytes(8).toString('hex');
    const [fresh, made] = [await databases.fresh(), await databases.fresh()];
    // Made by a user who may (root); the other database has none.
    await open(made);
    expect(await routines(made, 'eventflow_append')).toEqual([APPEND_ROUTINE]);
    await fresh.query(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}'`);
    databases.onCleanup(() => fresh.query(`DROP USER IF EXISTS '${user}'@'%'`));
    for (const db of [fresh, made]) await db.query(`GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP, REFERENCES ON \`${db.name}\`.* TO '${user}'@'%'`);
    for (const db of [fresh, made]) {
      const store = await open(db, { user, password });
      await workload(store);
      expect((await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM event'))[0]?.n).toBe(6);
    }
    expect(await routines(fresh, 'eventflow_append')).toEqual([]);
  });
  it('the routine dropped or its EXECUTE revoked while the store runs: no append fails, and the routine is made again', async () => {
    const user = `ef_all_${randomBytes(4).toString('hex')}`;
    const password = randomBytes(8).toString('hex');
    const db = await databases.fresh();
    await db.query(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}'`);
    databases.onCleanup(() => db.query(`DROP USER IF EXISTS '${user}'@'%'`));
    await db.query(`GRANT ALL ON \`${db.name}\`.* TO '${user}'@'%'`);
    const store = await open(db, { user, password });
    const publish = (id: string): Promise<unknown> => store.append({ id, domain: 'jobs', name: 'run', pid: 'p', data: {} }, { publisher: 'pub' });
    await publish('before');
    // An operator's clean-up, or a database restored from a dump made without --routines.
    await db.query(`DROP PROCEDURE ${APPEND_ROUTINE}`);
    await publish('dropped-1');
    await publish('dropped-2');
    await expect.poll(() => routines(db, 'eventflow_append')).toEqual([APPEND_ROUTINE]);
    await publish('made-again');
    // A store that proved the routine at its start (no race with the one made again above).
    const other = await open(db, { user, password });
    await db.query(`REVOKE EXECUTE ON \`${db.name}\`.* FROM '${user}'@'%'`);
    for (const id of ['revoked-1', 'revoked-2']) await other.append({ id, domain: 'jobs', name: 'run', pid: 'p', data: {} }, { publisher: 'pub' });
    expect((await db.query<{ id: string }>('SELECT id FROM event ORDER BY id')).map((row) => row.id)).toEqual(['before', 'dropped-1', 'dropped-2', 'made-again', 'revoked-1', 'revoked-2']);
  });
});
