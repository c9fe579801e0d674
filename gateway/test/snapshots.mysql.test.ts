import { describe, expect, it } from 'vitest';
import { composeEventlogState } from '@eventflow/core';
import { MysqlStore } from '../src/store/mysql/mysql.js';
import { readEventlogState, snapshotsOf } from '../src/store/snapshots.js';
import { describeSnapshots, expectSameState } from './snapshot-suite.js';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';

describe.skipIf(mysqlUnavailable !== undefined)('MysqlStore snapshots', () => {
  const databases = useTestDatabases();
  describeSnapshots('mysql', async () => {
    const store = new MysqlStore((await databases.fresh()).options);
    await store.init();
    return store;
  }, 4);

  it('detects rows a v4 spoke wrote or deleted behind the gateway, and answers with the full fold', async () => {
    const db = await databases.fresh();
    const store = new MysqlStore(db.options);
    databases.onCleanup(() => store.close());
    await store.init();
    for (let i = 0; i < 30; i++) await store.append({ id: `m${i}`, domain: 'snap', name: 'n', pid: 'p1', data: { [`k${i % 4}`]: [i % 5], n: i } });
    const options = { every: 10 };
    await readEventlogState(snapshotsOf(store), 'snap', 'p1', options);
    expect((await snapshotsOf(store).readSnapshot('snap', 'p1')).snapshot?.count).toBe(30);

    // A v4 spoke's insert (no position; v4 stamps its own time) and a v4 delete of a covered event, straight in SQL.
    await db.query(`INSERT INTO event (id, domain, pid, name, data) VALUES ('v4-a', 'snap', 'p1', 'n', '{"k1":[9],"v4":true}')`);
    let read = await readEventlogState(snapshotsOf(store), 'snap', 'p1', options);
    expectSameState(read.state, composeEventlogState(await store.readEventlog('snap', 'p1')));
    expect(read.state).toMatchObject({ v4: true });
    await db.query(`DELETE FROM event WHERE id = 'm4'`);
    expect((await snapshotsOf(store).readSnapshot('snap', 'p1')).snapshot).toBeUndefined();
    read = await readEventlogState(snapshotsOf(store), 'snap', 'p1', options);
    const log = await store.readEventlog('snap', 'p1');
    expect(log).toHaveLength(30);
    expectSameState(read.state, composeEventlogState(log));

    // deleteEventlog takes the snapshot with it (foreign key on its last event).
    expect((await snapshotsOf(store).readSnapshot('snap', 'p1')).snapshot?.count).toBe(30);
    await store.deleteEventlog('snap', 'p1');
    const rows = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM eventflow_snapshot');
    expect(Number(rows[0]?.n)).toBe(0);
  });
});
