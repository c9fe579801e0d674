import { describe, expect, it } from 'vitest';
import { isEventflowError, type StoredEvent } from '@eventflow/core';
import { parseConfig } from '../src/config.js';
import { startGateway } from '../src/server/gateway.js';
import { MysqlStore, type MysqlStoreOptions } from '../src/store/mysql/mysql.js';
import { V4_TABLES } from '../src/store/mysql/schema.js';
import { describeEventStore, expectCode, newEvent } from './store-suite.js';
import { mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';
import { storeOpener } from './mysql-stores.js';

/** A DATETIME as stored (UTC text) → epoch milliseconds. */
const utc = (text: string): number => new Date(`${text.replace(' ', 'T')}Z`).getTime();
const ids = (events: readonly StoredEvent[]): string[] => events.map((event) => event.id);

describe.skipIf(mysqlUnavailable !== undefined)('MysqlStore', () => {
  const databases = useTestDatabases();
  const open = storeOpener(databases);
  const fresh = async (options: Partial<MysqlStoreOptions> = {}) => {
    const db = await databases.fresh();
    return { db, store: await open(db, options) };
  };
  /** What a v4 spoke's publish writes (eventflow-v4.md A.4), with v4's defaults for the times. */
  const v4Publish = async (db: TestDatabase, id: string, fields: Record<string, string> = {}) => {
    const event = { domain: 'orders', pid: 'p1', name: 'created', data: '{}', ...fields };
    await db.query('INSERT INTO event (id, domain, pid, name, data) VALUES (?, ?, ?, ?, ?)', [id, event.domain, event.pid, event.name, event.data]);
    await db.query('INSERT INTO event_published (event_id, publisher) VALUES (?, ?)', [id, 'SPOKE-1.EVENTFLOW-SPOKE']);
  };

  describeEventStore('mysql', async () => {
    const db = await databases.fresh();
    const store = new MysqlStore(db.options);
    await store.init();
    return store;
  });

  describe('schema', () => {
    type Column = { table: string; column: string; type: string; nullable: string; collation: string | null; dflt: string | null };
    const columns = async (db: TestDatabase, table: string): Promise<string[]> => {
      const rows = await db.query<Column>(
        `SELECT TABLE_NAME AS \`table\`, COLUMN_NAME AS \`column\`, COLUMN_TYPE AS type, IS_NULLABLE AS nullable, COLLATION_NAME AS collation
         FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
        [table],
      );
      // MariaDB shows integer display widths (smallint(5)); MySQL 8 does not.
      return rows.map((row) => [row.column, row.type.replace(/int\(\d+\)/, 'int'), row.nullable, row.collation ?? '-'].join(' '));
    };

    it("creates v4's eight tables with v4's columns, types and charsets", async () => {
      const { db } = await fresh();
      const tables = await db.query<{ name: string; engine: string; collation: string }>(
        `SELECT TABLE_NAME AS name, ENGINE AS engine, TABLE_COLLATION AS collation FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME`,
      );
      expect(tables.map((table) => table.name).sort()).toEqual([
        'certificate', 'event', 'event_cpid', 'event_eid', 'event_published', 'event_scheduled',
        'eventflow_dead_letter', 'eventflow_delivery', 'eventflow_group', 'eventflow_position', 'eventflow_schedule', 'eventflow_sequence', 'eventflow_snapshot', 'hub', 'log',
      ]);
      for (const table of tables) expect(table, table.name).toMatchObject({ engine: 'InnoDB', collation: 'ascii_bin' });

      const id = (name: string, nullable = 'NO') => `${name} varchar(64) ${nullable} ascii_bin`;
      const json = (await columns(db, 'event')).find((column) => column.startsWith('data '));
      // MySQL: a native JSON column; MariaDB: JSON is an alias of a checked utf8mb4 LONGTEXT.
      expect(['data json NO -', 'data longtext NO utf8mb4_bin']).toContain(json);
      expect(await columns(db, 'event')).toEqual([
        id('id'), 'timestamp datetime(3) NO -', id('domain'), id('rid', 'YES'), id('pid'), id('name'), json,
      ]);
      expect(await columns(db, 'event_cpid')).toEqual([id('event_id'), id('domain'), id('cpid')]);
      expect(await columns(db, 'event_eid')).toEqual([id('event_id'), id('eid')]);
      const at = (name: string) => `${name} datetime YES -`;
      expect(await columns(db, 'event_published')).toEqual([
        id('event_id'), 'published datetime NO -', id('publisher'), id('consumer', 'YES'), id('hub', 'YES'),
        at('consumed_hub'), at('consumed_spoke'), at('success'), at('failed'), at('orphan'),
      ]);
      expect(await columns(db, 'event_scheduled')).toEqual([
        id('event_id'), 'timestamp datetime NO -', 'scheduled datetime NO -', at('executed'), at('success'), at('failed'),
      ]);
      expect(await columns(db, 'hub')).toEqual([
        id('id'), 'timestamp datetime NO -', 'external_ip varchar(16) NO ascii_bin', 'external_port smallint unsigned NO -',
        'internal_ip varchar(16) NO ascii_bin', 'internal_port smallint unsigned NO -', at('quit'),
      ]);
      const log = await columns(db, 'log');
      expect(log.slice(0, 3)).toEqual(['timestamp datetime(3) NO -', id('agent'), 'message text NO utf8mb4_general_ci']);
      const blob = (name: string) => `${name} blob NO -`;
      const bytes = (name: string) => `${name} varbinary(16) NO -`;
      expect(await columns(db, 'certificate')).toEqual([
        'created datetime(3) NO -', 'updated datetime(3) NO -', 'version int unsigned NO -', id('id'), 'cert text NO ascii_bin',
        blob('key'), bytes('key_iv'), bytes('key_salt'), bytes('key_tag'), blob('pass'), bytes('pass_iv'), bytes('pass_salt'), bytes('pass_tag'),
        'validity datetime NO -', at('revoked'),
      ]);
    });

    it("has v4's defaults, indexes, foreign keys and partitions", async () => {
      const { db } = await fresh();
      const defaults = await db.query<{ name: string; dflt: string | null; extra: string }>(
        `SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME) AS name, LOWER(COLUMN_DEFAULT) AS dflt, LOWER(EXTRA) AS extra FROM information_schema.COLUMNS
         WHERE TABLE_SCHEMA = DATABASE() AND COLUMN_DEFAULT IS NOT NULL AND TABLE_NAME NOT LIKE 'eventflow%' ORDER BY name`,
      );
      // MariaDB reports the default of a nullable column as 'NULL', and MySQL CURRENT_TIMESTAMP() without parentheses.
      const explicit = defaults.filter((row) => row.dflt !== 'null').map((row) => [row.name, row.dflt?.replace(/\(\)$/, '')]);
      expect(Object.fromEntries(explicit)).toEqual({
        'certificate.created': 'current_timestamp(3)', 'certificate.updated': 'current_timestamp(3)', 'certificate.version': '0',
        'event.timestamp': 'current_timestamp(3)', 'event_published.published': 'current_timestamp',
        'event_scheduled.timestamp': 'current_timestamp', 'hub.timestamp': 'current_timestamp', 'log.timestamp': 'current_timestamp(3)',
      });
      expect(defaults.find((row) => row.name === 'certificate.updated')?.extra).toContain('on update current_timestamp(3)');

      const indexes = await db.query<{ name: string; cols: string }>(
        `SELECT CONCAT(TABLE_NAME, '.', INDEX_NAME) AS name, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS cols
         FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND INDEX_NAME LIKE 'idx%' GROUP BY TABLE_NAME, INDEX_NAME`,
      );
      expect(Object.fromEntries(indexes.map((row) => [row.name, row.cols]))).toMatchObject({
        'event.idx_rid': 'rid', 'event.idx_name': 'name,timestamp', 'event.idx_domain': 'domain,timestamp',
        'event.idx_domain_pid': 'domain,pid,timestamp', 'event_cpid.idx_domain_cpid': 'domain,cpid', 'event_eid.idx_eid': 'eid',
        'event_published.idx_published': 'published', 'event_published.idx_consumed_hub': 'consumed_hub',
        'event_published.idx_consumed_spoke': 'consumed_spoke', 'event_scheduled.idx_scheduled': 'scheduled',
        'event_scheduled.idx_executed': 'executed', 'hub.idx_external_ip_port': 'external_ip,external_port', 'log.idx_agent': 'agent',
      });

      const keys = await db.query<{ fk: string }>(
        // An unspecified rule reads RESTRICT on MariaDB and NO ACTION on MySQL: the same thing in InnoDB.
        `SELECT REPLACE(CONCAT(TABLE_NAME, '>', REFERENCED_TABLE_NAME, ' ', UPDATE_RULE, '/', DELETE_RULE), 'NO ACTION', 'RESTRICT') AS fk
         FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE() ORDER BY fk`,
      );
      expect(keys.map((row) => row.fk).sort()).toEqual([
        'event>event RESTRICT/SET NULL', 'event_cpid>event CASCADE/CASCADE', 'event_eid>event CASCADE/CASCADE',
        'event_published>event CASCADE/CASCADE', 'event_published>hub RESTRICT/RESTRICT', 'event_scheduled>event CASCADE/CASCADE',
        'eventflow_dead_letter>event CASCADE/CASCADE', 'eventflow_position>event CASCADE/CASCADE', 'eventflow_schedule>event CASCADE/CASCADE',
        'eventflow_snapshot>event CASCADE/CASCADE',
      ]);

      const partitions = await db.query<{ p: string }>(
        `SELECT CONCAT(TABLE_NAME, ' ', PARTITION_NAME, ' ', PARTITION_METHOD, ' ', LOWER(REPLACE(PARTITION_EXPRESSION, '\`', '')), ' ', PARTITION_DESCRIPTION) AS p
         FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND PARTITION_NAME IS NOT NULL ORDER BY TABLE_NAME, PARTITION_ORDINAL_POSITION`,
      );
      expect(partitions.map((row) => row.p)).toEqual([
        'certificate p_hot RANGE version 1',
        'certificate p_cold RANGE version MAXVALUE',
        'log p_hot RANGE to_days(timestamp) MAXVALUE',
      ]);
    });

    it('leaves an existing v4 database and its rows as they are, and positions its events in timestamp order', async () => {
      const db = await databases.fresh();
      for (const [, ddl] of V4_TABLES) await db.query(ddl);
      await db.query(`INSERT INTO hub (id, external_ip, external_port, internal_ip, internal_port) VALUES ('HUB-1', '10.0.0.1', 50001, '0.0.0.0', 50001)`);
      await db.query(`INSERT INTO event (id, timestamp, domain, pid, name, data) VALUES
        ('v4-late', '2024-01-01 00:00:02.000', 'orders', 'p1', 'paid', '{"n":2}'), ('v4-early', '2024-01-01 00:00:01.000', 'orders', 'p1', 'created', '{"n":1}')`);
      await db.query(`INSERT INTO event_published (event_id, publisher, hub, consumed_hub) VALUES ('v4-early', 'SPOKE-1', 'HUB-1', UTC_TIMESTAMP())`);
      await db.query(`INSERT INTO event_cpid (event_id, domain, cpid) VALUES ('v4-late', 'payments', 'cp1')`);
      await db.query(`INSERT INTO log (agent, message, error) VALUES ('HUB-1', 'connected › client', '{}')`);
      const snapshot = async () => {
        const state: Record<string, unknown> = {};
        for (const [table] of V4_TABLES) {
          state[table] = [await db.query(`SHOW CREATE TABLE ${table}`), await db.query(`SELECT * FROM ${table}`)];
        }
        return JSON.stringify(state);
      };
      const before = await snapshot();

      const store = await open(db);
      await open(db); // a second gateway starting on the same database changes nothing either
      expect(await snapshot()).toBe(before);
      const log = await store.readEventlog('orders', 'p1');
      expect(log.map((event) => [event.id, event.position, event.timestamp, event.data])).toEqual([
        ['v4-early', 1, '2024-01-01T00:00:01.000Z', { n: 1 }],
        ['v4-late', 2, '2024-01-01T00:00:02.000Z', { n: 2 }],
      ]);
      expect(await store.head()).toBe(2);
      expect(ids(await store.readEventlogByChildProcess('payments', 'cp1'))).toEqual(['v4-late']);
      expect(await store.claimForRouting('v4-early', 'GW-1')).toBe(false);
    });
  });

  describe('events written by v4 spokes', () => {
    it('are returned by every read with a position after the head', async () => {
      const { db, store } = await fresh();
      const ours = (await store.append(newEvent({ pid: 'p1' }), { publisher: 'GW' })).event;
      await v4Publish(db, 'v4-published', { data: '{"k":"v"}' });
      await db.query(`INSERT INTO event (id, domain, pid, name, data) VALUES ('v4-persisted', 'orders', 'p9', 'noted', '{}')`);
      await db.query(`INSERT INTO event_eid (event_id, eid) VALUES ('v4-persisted', 'customer-1')`);
      expect(await store.head()).toBe(ours.position);

      const [published] = await store.readPublishedAfter({ domain: 'orders', name: '*' }, ours.position, 10);
      expect(published).toMatchObject({ id: 'v4-published', position: ours.position + 1, data: { k: 'v' }, rid: null });
      expect(await store.head()).toBe(ours.position + 1);
      expect(await store.read('v4-published')).toEqual(published);
      expect(ids(await store.readEventlog('orders', 'p1'))).toEqual([ours.id, 'v4-published']);
      const [persisted] = await store.readEventlogByEid('customer-1');
      expect(persisted).toMatchObject({ id: 'v4-persisted', position: ours.position + 2 });
      expect(await store.findOutcome('orders', 'p1', ['created'], ours.position)).toEqual(published);
      // A caller-set timestamp far in the past: an eventlog read still finds and positions it.
      await v4Publish(db, 'v4-backdated', { pid: 'p3' });
      await db.query(`UPDATE event SET timestamp = '2020-01-01 00:00:00.000' WHERE id = 'v4-backdated'`);
      expect(await store.readEventlog('orders', 'p3')).toMatchObject([{ id: 'v4-backdated', position: ours.position + 3 }]);
      expect((await store.append(newEvent())).event.position).toBe(ours.position + 4);
    });

    it('get a position when the same event is appended again, without being written twice', async () => {
      const { db, store } = await fresh();
      await v4Publish(db, 'v4-retried', { data: '{"a":1,"b":[1,2]}' });
      const retry = await store.append({ id: 'v4-retried', domain: 'orders', pid: 'p1', name: 'created', data: { b: [1, 2], a: 1 } });
      expect(retry).toMatchObject({ created: false, event: { id: 'v4-retried', position: 1 } });
      expect(await store.read('v4-retried')).toEqual(retry.event);
      await expectCode(store.append({ id: 'v4-retried', domain: 'orders', pid: 'p2', name: 'created', data: {} }), 'E_EVENTFLOW_DUPLICATE_ID');
    });

    it('stored before an append to their eventlog come before it: eventlog order, positions and outcomes agree with timestamps', async () => {
      const { db, store } = await fresh({ v4Writers: true });
      // Ids in the order of writing: two rows stamped in the same millisecond are in (timestamp, id) order.
      await v4Publish(db, 'v4-placed', { data: '{"status":"placed"}' });
      await v4Publish(db, 'v4-refused', { name: 'failed' });
      await v4Publish(db, 'v4-other', { pid: 'p2' });
      const ours = (await store.append(newEvent({ pid: 'p1', data: { status: 'shipped' } }), { publisher: 'GW' })).event;
      const log = await store.readEventlog('orders', 'p1');
      expect(ids(log)).toEqual(['v4-placed', 'v4-refused', ours.id]);
      expect(log.map((event) => event.position)).toEqual([ours.position - 2, ours.position - 1, ours.position]);
      expect(await store.findOutcome('orders', 'p1', ['failed'], ours.position)).toBeUndefined();
      // Another eventlog's are positioned when read, after.
      expect(await store.readEventlog('orders', 'p2')).toMatchObject([{ id: 'v4-other', position: ours.position + 1 }]);

      // A batch that appends to the eventlog and retries a v4 event of it: each gets one position.
      await v4Publish(db, 'v4-retried', { data: '{}' });
      const [appended, retried] = await store.appendBatch([
        { event: newEvent({ pid: 'p1' }) },
        { event: { id: 'v4-retried', domain: 'orders', pid: 'p1', name: 'created', data: {} } },
      ]);
      expect(retried).toMatchObject({ ok: true, result: { created: false, event: { id: 'v4-retried', position: ours.position + 2 } } });
      expect(appended).toMatchObject({ ok: true, result: { created: true, event: { position: ours.position + 3 } } });
      expect((await store.readEventlog('orders', 'p1')).map((event) => event.position)).toEqual([1, 2, 3, 5, 6].map((n) => n + ours.position - 3));
    });

    it('are positioned before an append of their eventlog without v4Writers too, once the store has met one', async () => {
      const { db, store } = await fresh();
      await v4Publish(db, 'v4-first', { pid: 'p7' });
      await v4Publish(db, 'v4-second', { pid: 'p7' });
      // Not expected yet: this append does not look (the pure-gateway hot path), and a read positions them after it.
      const unexpected = (await store.append(newEvent({ pid: 'p7' }))).event;
      expect(ids(await store.readEventlog('orders', 'p7'))).toEqual([unexpected.id, 'v4-first', 'v4-second']);
      // Met now: from here on appends look.
      await v4Publish(db, 'v4-third', { pid: 'p7' });
      const ours = (await store.append(newEvent({ pid: 'p7' }))).event;
      expect(ids(await store.readEventlog('orders', 'p7'))).toEqual([unexpected.id, 'v4-first', 'v4-second', 'v4-third', ours.id]);
    });

    it('have JSON data parsed, whether the server returns it as text (MariaDB) or parsed (MySQL)', async () => {
      const { db, store } = await fresh();
      const values = ['"just a string"', '[1,2,{"a":null}]', '{"x":"héllo ✓ 😀","n":1.5,"t":true}', '42', 'null'];
      for (const [i, data] of values.entries()) {
        await db.query(`INSERT INTO event (id, domain, pid, name, data) VALUES (?, 'orders', 'json', 'raw', ?)`, [`json-${i}`, data]);
      }
      const log = await store.readEventlog('orders', 'json');
      expect(log.map((event) => event.data)).toEqual(values.map((text) => JSON.parse(text)));
      const unicode = (await store.append(newEvent({ data: { text: 'ünïcødé ✓ 😀', nested: { list: [1, 'two'] } } }))).event;
      expect((await store.read(unicode.id))?.data).toEqual(unicode.data);
    });
  });

  describe('several gateways on one database', () => {
    it('assign positions in commit order, and give each claim to exactly one of them', async () => {
      const db = await databases.fresh();
      const [a, b] = [await open(db), await open(db)];
      const any = { domain: 'orders', name: '*' };
      const seen: StoredEvent[] = [];
      let writing = true;
      // A reader resuming by position: if a position became visible before a lower one committed,
      // it would step over the lower one for good.
      const reader = (async () => {
        for (let last = 0; writing || last < (await a.head()); ) {
          const page = await a.readPublishedAfter(any, last, 1000);
          for (const event of page) {
            expect(event.position).toBeGreaterThan(last);
            last = event.position;
            seen.push(event);
          }
        }
      })();
      const writes = Array.from({ length: 120 }, (_, i) => (i % 2 ? a : b).append(newEvent({ pid: `p${i % 7}` }), { publisher: 'GW' }));
      const written = (await Promise.all(writes)).map((result) => result.event);
      writing = false;
      await reader;
      expect(new Set(written.map((event) => event.position)).size).toBe(120);
      expect(ids(seen).sort()).toEqual(ids(written).sort());

      for (const event of written.slice(0, 30)) {
        const routed = await Promise.all([a.claimForRouting(event.id, 'GW-A'), b.claimForRouting(event.id, 'GW-B')]);
        expect(routed.filter(Boolean)).toHaveLength(1);
        const consumed = await Promise.all([a.claimForConsumer(event.id, 'c1'), b.claimForConsumer(event.id, 'c2')]);
        expect(consumed.filter(Boolean)).toHaveLength(1);
      }

      const head = await a.head();
      for (let i = 0; i < 12; i += 1) await (i % 2 ? a : b).append(newEvent(), { publisher: 'GW', scheduledAt: new Date(0) });
      const fired = (await Promise.all([a.claimDueScheduled(new Date()), b.claimDueScheduled(new Date()), a.claimDueScheduled(new Date())])).flat();
      expect(new Set(ids(fired)).size).toBe(12);
      expect(fired).toHaveLength(12);
      expect(Math.min(...fired.map((event) => event.position))).toBeGreaterThan(head + 12);
      expect(await b.head()).toBe(Math.max(...fired.map((event) => event.position)));
    });
  });

  describe('overlapping batches', () => {
    it('take positions in the order the appends were made, batch after overlapping batch', async () => {
      const { store } = await fresh();
      const appends: Array<Promise<{ event: StoredEvent }>> = [];
      // Waves a turn of the event loop apart: each wave is cut as its own batch once the one before has sent its COMMIT.
      for (let wave = 0; wave < 8; wave += 1) {
        for (let i = 0; i < 60; i += 1) appends.push(store.append(newEvent({ pid: `p${i % 5}` }), { publisher: 'GW' }));
        await new Promise((resolve) => setImmediate(resolve));
      }
      const positions = (await Promise.all(appends)).map(({ event }) => event.position);
      const first = positions[0] as number;
      expect(positions).toEqual(positions.map((_, i) => first + i));
      const log = await store.readEventlog('orders', 'p0');
      expect(log.map((event) => event.position)).toEqual([...log.map((event) => event.position)].sort((x, y) => x - y));
    });

    it('claim early for routing: exactly one router wins, and the claim is stored once durable', async () => {
      const db = await databases.fresh();
      const [a, b] = [await open(db), await open(db)];
      for (let i = 0; i < 10; i += 1) {
        const { event } = await a.append(newEvent(), { publisher: 'SPOKE-1' });
        const [early, plain] = await Promise.all([a.claimForRoutingEarly(event.id, 'HUB-A'), b.claimForRouting(event.id, 'HUB-B')]);
        await early.durable;
        expect([early.won, plain].filter(Boolean)).toHaveLength(1);
        const [row] = await db.query<{ hub: string }>('SELECT hub FROM event_published WHERE event_id = ?', [event.id]);
        expect(row?.hub).toBe(early.won ? 'HUB-A' : 'HUB-B');
        expect((await b.claimForRoutingEarly(event.id, 'HUB-B')).won).toBe(false);
      }
    });
  });

  describe('time', () => {
    it('writes every DATETIME in UTC whatever the session time zone', async () => {
      const db = await databases.fresh();
      // Proof that the store's sessions really run at +05:00: a trigger records the session zone.
      const store = await open(db, { sessionTimeZone: '+05:00' });
      await db.query('CREATE TABLE zone_probe (zone VARCHAR(64))');
      await db.query('CREATE TRIGGER zone_probe AFTER INSERT ON event FOR EACH ROW INSERT INTO zone_probe VALUES (@@session.time_zone)');
      const due = new Date(Date.now() + 60_500);
      const { event } = await store.append(newEvent(), { publisher: 'GW', scheduledAt: due });
      await store.append(newEvent({ id: 'pending' }), { publisher: 'GW', scheduledAt: new Date(0) });
      expect(await store.claimForRouting(event.id, 'GW-1')).toBe(true);
      expect(await store.claimForConsumer(event.id, 'c1')).toBe(true);
      await store.settle(event.id, 'success');
      await store.markOrphan(event.id);
      await store.claimDueScheduled(new Date());
      await store.settleScheduled('pending', 'failed');
      expect(await db.query('SELECT zone FROM zone_probe')).toEqual([{ zone: '+05:00' }, { zone: '+05:00' }]);

      const raw = await db.connect();
      await raw.query(`SET time_zone = '+05:00'`);
      const [[row]] = (await raw.query(
        `SELECT e.timestamp, p.published, p.consumed_hub, p.consumed_spoke, p.success, p.orphan, s.timestamp AS created, s.scheduled, d.due,
                h.timestamp AS registered, h.quit, q.executed, q.failed
         FROM event e JOIN event_published p ON p.event_id = e.id JOIN event_scheduled s ON s.event_id = e.id
         JOIN eventflow_schedule d ON d.event_id = e.id JOIN hub h ON h.id = p.hub JOIN event_scheduled q ON q.event_id = 'pending' WHERE e.id = ?`,
        [event.id],
      )) as unknown as [[Record<string, string>]];
      const { timestamp, scheduled, due: exact, ...transitions } = row;
      expect(timestamp?.replace(' ', 'T')).toBe(event.timestamp.replace('Z', ''));
      for (const [column, value] of Object.entries(transitions)) {
        expect(Math.abs(utc(value) - Date.now()), `${column} = ${value}`).toBeLessThan(10_000);
      }
      // v4's seconds column holds the due time rounded up; the exact one is kept beside it.
      expect(utc(scheduled ?? '')).toBe(Math.ceil(due.getTime() / 1000) * 1000);
      expect(utc(exact ?? '')).toBe(due.getTime());
      expect((await store.nextScheduled())?.getTime()).toBe(due.getTime());

      // A v4 peer writing UTC explicitly from a +05:00 session is read back as UTC.
      await raw.query(`INSERT INTO event (id, timestamp, domain, pid, name, data) VALUES ('v4-utc', UTC_TIMESTAMP(3), 'orders', 'p1', 'x', '{}')`);
      const v4 = await store.read('v4-utc');
      expect(Math.abs(new Date(v4?.timestamp ?? 0).getTime() - Date.now())).toBeLessThan(10_000);
    });

    it('fires events a v4 spoke scheduled, at the due time of their seconds column', async () => {
      const { db, store } = await fresh();
      const ours = (await store.append(newEvent())).event;
      await v4Publish(db, 'v4-scheduled', { pid: 'p2' });
      await db.query(`INSERT INTO event_scheduled (event_id, scheduled) VALUES ('v4-scheduled', '2024-05-01 12:00:00')`);
      expect(await store.nextScheduled()).toEqual(new Date('2024-05-01T12:00:00.000Z'));
      expect(await store.readEventlog('orders', 'p2')).toEqual([]);
      expect(await store.claimDueScheduled(new Date('2024-05-01T11:59:59.999Z'))).toEqual([]);
      const [fired] = await store.claimDueScheduled(new Date());
      expect(fired).toMatchObject({ id: 'v4-scheduled', position: ours.position + 1 });
      expect(await store.readEventlog('orders', 'p2')).toEqual([fired]);
      const [row] = await db.query<{ executed: string | null }>(`SELECT executed FROM event_scheduled WHERE event_id = 'v4-scheduled'`);
      expect(row?.executed).not.toBeNull();
      expect(await store.claimDueScheduled(new Date())).toEqual([]);
    });
  });

  describe("v4's state columns", () => {
    it('records claims, the first outcome and the orphan time with the guarded updates', async () => {
      const { db, store } = await fresh();
      const { event } = await store.append(newEvent(), { publisher: 'SPOKE-1' });
      expect(await store.claimForRouting(event.id, 'GW-1')).toBe(true);
      expect(await store.claimForConsumer(event.id, 'c1')).toBe(true);
      await store.settle(event.id, 'failed');
      await store.settle(event.id, 'success');
      await store.releaseConsumerClaim(event.id);
      await store.markOrphan(event.id);
      const [row] = await db.query<Record<string, string | null>>('SELECT * FROM event_published WHERE event_id = ?', [event.id]);
      expect(row).toMatchObject({ publisher: 'SPOKE-1', hub: 'GW-1', consumer: 'c1', success: null });
      expect(row?.failed).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
      expect(row?.orphan).not.toBeNull();
    });

    it('claims no event for a consumer once it has an outcome, even with its consumer claim cleared (a hub took it back)', async () => {
      const { db, store } = await fresh();
      const { event } = await store.append(newEvent(), { publisher: 'SPOKE-1' });
      expect(await store.claimForConsumer(event.id, 'c1')).toBe(true);
      await store.settle(event.id, 'success');
      await db.query('UPDATE event_published SET consumed_spoke = NULL, consumer = NULL WHERE event_id = ?', [event.id]);
      expect(await store.claimForConsumer(event.id, 'c2')).toBe(false);
    });

    it('registers a router that is no v4 hub as a hub row that is already quit, and leaves existing hub rows alone', async () => {
      const { db, store } = await fresh();
      await db.query(`INSERT INTO hub (id, external_ip, external_port, internal_ip, internal_port) VALUES ('HUB-1', '10.0.0.1', 50001, '0.0.0.0', 50001)`);
      const [first, second] = [(await store.append(newEvent(), { publisher: 's' })).event, (await store.append(newEvent(), { publisher: 's' })).event];
      expect(await store.claimForRouting(first.id, 'GW-1')).toBe(true);
      expect(await store.claimForRouting(second.id, 'HUB-1')).toBe(true);
      // v4 spokes connect to every hub whose quit is NULL: only the real hub is online.
      expect(await db.query('SELECT id, external_ip, external_port FROM hub WHERE quit IS NULL')).toEqual([
        { id: 'HUB-1', external_ip: '10.0.0.1', external_port: 50001 },
      ]);
      const [gateway] = await db.query<{ quit: string | null }>(`SELECT quit FROM hub WHERE id = 'GW-1'`);
      expect(gateway?.quit).not.toBeNull();
    });
  });

  describe('errors', () => {
    it('refuses to work before init and after close', async () => {
      const db = await databases.fresh();
      const store = new MysqlStore(db.options);
      await expectCode(store.head(), 'E_EVENTFLOW_STORE_FAILED');
      await store.init();
      await store.close();
      await store.close();
      await expectCode(store.read('x'), 'E_EVENTFLOW_STORE_FAILED');
    });

    it('names the problem when the server or the database is missing', async () => {
      const db = await databases.fresh();
      const unreachable = new MysqlStore({ ...db.options, port: 1 });
      const refused = await unreachable.init().catch((error: unknown) => error);
      expect(isEventflowError(refused, 'E_EVENTFLOW_STORE_FAILED')).toBe(true);
      expect(String((refused as Error).message)).toContain(':1');
      const missing = new MysqlStore({ ...db.options, database: 'eventflow_no_such_db' });
      const error = await missing.init().catch((caught: unknown) => caught);
      expect(isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED')).toBe(true);
      expect((error as Error).message).toContain('database "eventflow_no_such_db" does not exist');
    });

    it('fails only the append the database refuses inside a batch; the others commit', async () => {
      const { store } = await fresh();
      const [good, bad, after] = [newEvent(), newEvent({ id: `too-long-${'x'.repeat(64)}` }), newEvent()];
      const outcomes = await store.appendBatch([{ event: good, options: { publisher: 's' } }, { event: bad, options: { publisher: 's' } }, { event: after }]);
      expect(outcomes.map((outcome) => outcome.ok)).toEqual([true, false, true]);
      const refused = outcomes[1];
      expect(refused?.ok === false && isEventflowError(refused.error, 'E_EVENTFLOW_STORE_FAILED')).toBe(true);
      expect((await store.readEventlog('orders', 'p1')).map((event) => event.id)).toEqual([good.id, after.id]);
    });

    it('wraps driver errors without SQL text or values, and stores nothing partial', async () => {
      const { store } = await fresh();
      const input = newEvent({ id: `too-long-${'x'.repeat(64)}` });
      const error = await store.append(input, { publisher: 's' }).catch((caught: unknown) => caught);
      expect(isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED')).toBe(true);
      expect((error as Error).message).not.toMatch(/INSERT|too-long/);
      expect((error as Error).cause).toBeDefined();
      expect(await store.head()).toBe(0);
      await expectCode(store.append(newEvent(), { scheduledAt: new Date(Number.NaN) }), 'E_EVENTFLOW_INVALID_DATE');
    });
  });

  it('is selected by EVENTFLOW_STORE=mysql and the EVENTFLOW_MYSQL_* settings', async () => {
    const db = await databases.fresh();
    const { host, port, user, password, database } = db.options;
    const gateway = await startGateway({
      EVENTFLOW_PORT: 0,
      EVENTFLOW_LOG_LEVEL: 'silent',
      EVENTFLOW_STORE: 'mysql',
      EVENTFLOW_MYSQL_HOST: host,
      EVENTFLOW_MYSQL_PORT: String(port),
      EVENTFLOW_MYSQL_USER: user,
      EVENTFLOW_MYSQL_PASSWORD: password,
      EVENTFLOW_MYSQL_DATABASE: database,
      EVENTFLOW_MYSQL_CONNECTION_LIMIT: '3',
    });
    try {
      expect(gateway.store.kind).toBe('mysql');
      expect(await gateway.store.head()).toBe(0);
    } finally {
      await gateway.close();
    }
  });
});

describe('MySQL configuration', () => {
  it("defaults to v4's pool settings", () => {
    expect(parseConfig({ EVENTFLOW_STORE: 'mysql' })).toMatchObject({
      EVENTFLOW_STORE: 'mysql',
      EVENTFLOW_MYSQL_HOST: '127.0.0.1',
      EVENTFLOW_MYSQL_PORT: 3306,
      EVENTFLOW_MYSQL_USER: 'root',
      EVENTFLOW_MYSQL_PASSWORD: '',
      EVENTFLOW_MYSQL_DATABASE: 'eventflow',
      EVENTFLOW_MYSQL_CONNECTION_LIMIT: 10,
    });
  });

  it('names the variable of an invalid value', () => {
    const bad = { EVENTFLOW_STORE: 'postgres', EVENTFLOW_MYSQL_PORT: 'abc', EVENTFLOW_MYSQL_DATABASE: 'x'.repeat(65), EVENTFLOW_MYSQL_CONNECTION_LIMIT: '0' };
    let message = '';
    try {
      parseConfig(bad);
    } catch (error) {
      expect(isEventflowError(error, 'E_EVENTFLOW_CONFIG')).toBe(true);
      message = (error as Error).message;
    }
    for (const name of Object.keys(bad)) expect(message).toContain(name);
  });
});
