/**
 * The MySQL store on a server whose global sql_mode changes how SQL text reads
 * (NO_BACKSLASH_ESCAPES: `\'` no longer escapes a quote; ANSI_QUOTES: "x" is a name). Values travel
 * only in prepared statements and each session sets its own sql_mode, so names, pids, ids and data
 * made of quotes, backslashes and SQL round-trip exactly and no table is touched. A private
 * mariadbd (temp data directory, free port) is started for this file and stopped after it.
 */
import { createConnection, type RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MysqlStore } from '../src/store/mysql/mysql.js';
import { startPrivateMariadb, unavailable, type PrivateMariadb } from './private-mariadb.js';

if (unavailable !== undefined) console.warn(`Skipping the sql_mode tests: ${unavailable}`);

const hostile = {
  // Each closes a string under NO_BACKSLASH_ESCAPES if the driver escapes on the client, then runs its own SQL.
  pid: "x', 0x6e, 0x7b7d); DROP TABLE event_eid; #",
  name: "n\\'; DROP TABLE event; #",
  domain: "d\\' OR 1=1 #",
  id: "i'd\\\"; DELETE FROM event; #",
  eid: "e\\'); DROP TABLE event_cpid; #",
  cpid: "c'\\'); DROP TABLE hub; #",
  data: { quote: "'; DROP TABLE event; --", backslash: "\\'\\\\\\", double: '"; DROP TABLE log; --', nested: { "k'\\": ["\\", "'", '"'] } },
};

describe.skipIf(unavailable !== undefined)('MysqlStore on a server with sql_mode NO_BACKSLASH_ESCAPES,ANSI_QUOTES', () => {
  let server: PrivateMariadb;
  const stores: MysqlStore[] = [];
  let database = 0;

  beforeAll(async () => {
    server = await startPrivateMariadb(['--sql-mode=NO_BACKSLASH_ESCAPES,ANSI_QUOTES,STRICT_TRANS_TABLES']);
  }, 120_000);

  afterAll(async () => {
    await Promise.allSettled(stores.map((store) => store.close()));
    await server?.stop();
  }, 60_000);

  const open = async (): Promise<{ store: MysqlStore; tables: () => Promise<string[]>; count: (table: string) => Promise<number> }> => {
    const name = `eventflow_mode_${++database}`;
    const admin = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password });
    try {
      const [[mode]] = await admin.query<RowDataPacket[]>('SELECT @@GLOBAL.sql_mode AS mode');
      expect(String(mode?.mode)).toContain('NO_BACKSLASH_ESCAPES');
      await admin.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4`);
    } finally {
      await admin.end();
    }
    const store = new MysqlStore({ host: server.host, port: server.port, user: server.user, password: server.password, database: name });
    stores.push(store);
    await store.init();
    const inspect = async <T extends RowDataPacket>(sql: string): Promise<T[]> => {
      const connection = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password, database: name });
      try {
        return (await connection.query<T[]>(sql))[0];
      } finally {
        await connection.end();
      }
    };
    return {
      store,
      tables: async () => (await inspect<RowDataPacket>('SHOW TABLES')).map((row) => String(Object.values(row)[0])).sort(),
      count: async (table) => Number((await inspect<RowDataPacket>(`SELECT COUNT(*) AS n FROM \`${table}\``))[0]?.n),
    };
  };

  it('round-trips hostile names, pids, ids, eids, cpids and data exactly, and leaves every table intact', async () => {
    const { store, tables, count } = await open();
    const before = await tables();
    expect(before).toEqual(expect.arrayContaining(['event', 'event_cpid', 'event_eid', 'event_published', 'hub', 'log']));

    // Through the group commit (several appends in one batch) and alone.
    const first = { id: hostile.id, domain: hostile.domain, name: hostile.name, pid: hostile.pid, data: hostile.data, rid: undefined };
    const second = { id: `${hostile.id}2`, domain: hostile.domain, name: hostile.name, pid: hostile.pid, data: { again: hostile.data }, rid: hostile.id };
    const innocent = { id: 'innocent', domain: 'orders', name: 'placed', pid: 'p1', data: { secret: 1 }, rid: undefined };
    const [a, b, c] = await Promise.all([
      store.append(first, { publisher: 'g', expectedVersion: 0 }),
      store.append(second, { publisher: 'g' }),
      store.append(innocent, { publisher: 'g' }),
    ]);
    expect([a?.created, b?.created, c?.created]).toEqual([true, true, true]);
    // An idempotent retry finds the hostile id again.
    expect((await store.append(first, { publisher: 'g' })).created).toBe(false);

    await store.persistEntityAssociation(hostile.id, hostile.eid);
    await store.persistChildProcessAssociation(hostile.id, hostile.domain, hostile.cpid);
    await store.claimForRouting(hostile.id, "hub'\\");

    const log = await store.readEventlog(hostile.domain, hostile.pid);
    expect(log.map((event) => [event.id, event.domain, event.name, event.pid, event.rid])).toEqual([
      [hostile.id, hostile.domain, hostile.name, hostile.pid, null],
      [`${hostile.id}2`, hostile.domain, hostile.name, hostile.pid, hostile.id],
    ]);
    expect(log[0]?.data).toEqual(hostile.data);
    expect((await store.read(hostile.id))?.data).toEqual(hostile.data);
    expect((await store.readEventlogFilteredByNames(hostile.domain, hostile.pid, [hostile.name, "x'"])).length).toBe(2);
    expect((await store.readEventlogByEid(hostile.eid)).map((event) => event.id)).toEqual([hostile.id]);
    expect((await store.readEventlogByChildProcess(hostile.domain, hostile.cpid)).map((event) => event.id)).toEqual([hostile.id]);
    expect(await store.readDistinctPidByDomain(hostile.domain)).toEqual([hostile.pid]);
    expect((await store.readPublishedAfter({ domain: hostile.domain, name: hostile.name }, 0, 10)).length).toBe(2);
    expect(await store.countEventlog(hostile.domain, hostile.pid)).toBe(2);

    // A pid or domain that would widen a WHERE clause reads nothing of anybody else.
    expect(await store.readEventlog('orders', "x' OR 1=1 #")).toEqual([]);
    expect(await store.readEventlog("orders' OR '1'='1", "p1' OR '1'='1")).toEqual([]);
    expect(await store.readDistinctPidByDomain("x' OR 1=1 #")).toEqual([]);

    expect(await tables()).toEqual(before);
    expect(await count('event')).toBe(3);
    expect(await count('event_eid')).toBe(1);
    expect(await count('event_cpid')).toBe(1);

    expect(await store.deleteEventlog(hostile.domain, hostile.pid)).toBe(true);
    expect(await count('event')).toBe(1);
    expect((await store.read('innocent'))?.data).toEqual({ secret: 1 });
  }, 60_000);
});
