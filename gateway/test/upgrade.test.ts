/**
 * Upgrading: a SQLite store file or MySQL database whose delivery ledger an older gateway wrote (schema version 1:
 * no queue columns, a row only for what was delivered, the v1 indexes) opened by this gateway with
 * a delivery open (its gateway died) and dead letters present. Nothing is lost, nothing settled
 * is delivered again, the dead letters are listed and can be requeued.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, listDeadLetters, listGroups, requeueDeadLetter, type EventflowClient } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';
import { startTempGateway, type TempGateway } from '@eventflow/test-support/temp-gateway';
import { startGateway, type Gateway } from '../src/index.js';

const LEASE = { EVENTFLOW_CONSUME_LEASE_MS: 60_000 };
const clients: EventflowClient[] = [];
let temp: TempGateway | undefined;
let gateway: Gateway | undefined;
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  await gateway?.close();
  await temp?.dispose();
  [temp, gateway] = [undefined, undefined];
});

const client = (url: string): EventflowClient => {
  const made = createClient(url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
  clients.push(made);
  return made;
};

/** How one store runs the scenario: start a gateway (again), stop it, and make its ledger version 1's. */
interface Upgrading {
  start(): Promise<string>;
  stop(): Promise<void>;
  downgrade(openFor: string, deadline: number): Promise<void>;
}

/** Turns the file's ledger into what a version 1 gateway left (store/sqlite/ledger-schema.ts lists what version 2 added). */
function downgradeSqlite(path: string, openFor: string, deadline: number): void {
  const db = new Database(path);
  try {
    db.transaction(() => {
      for (const { name } of db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'eventflow_delivery' AND sql IS NOT NULL`).all() as Array<{ name: string }>) {
        db.exec(`DROP INDEX ${name}`);
      }
      // The open delivery of a gateway that died: its lease runs out soon.
      const open = db.prepare(`UPDATE eventflow_delivery SET delivery = 'old-delivery', owner = 'old-gateway', deadline = ?, attempts = 1 WHERE event_id = ?`).run(deadline, openFor);
      if (open.changes !== 1) throw new Error(`no ledger row for ${openFor}`);
      // Version 1 wrote a row when it delivered an event: none for what was never claimed.
      db.exec(`DELETE FROM eventflow_delivery WHERE outcome IS NULL AND delivery IS NULL`);
      for (const column of ['position', 'pid', 'name', 'claimed_at', 'settled_at']) db.exec(`ALTER TABLE eventflow_delivery DROP COLUMN ${column}`);
      for (const column of ['ordered', 'materialized']) db.exec(`ALTER TABLE eventflow_group DROP COLUMN ${column}`);
      db.exec(`UPDATE meta SET value = '1' WHERE key = 'schema_version'`);
      db.exec(`CREATE INDEX idx_delivery_id ON eventflow_delivery (delivery);
        CREATE INDEX idx_delivery_owner ON eventflow_delivery (owner, outcome);
        CREATE INDEX idx_delivery_group ON eventflow_delivery (domain, gname, grp, outcome);`);
    })();
  } finally {
    db.close();
  }
}

async function upgradeKeepsEverything(store: Upgrading): Promise<void> {
  const ids: Record<string, string> = {};
  const first = client(await store.start());
  const handled: string[] = [];
  let hold!: () => void;
  const held = new Promise<void>((resolve) => (hold = resolve));
  const consumer = await first.consume(
    'jobs',
    'run',
    async (event) => {
      handled.push(event.pid);
      if (event.pid === 'dead') throw new Error('boom');
      if (event.pid === 'open') await held;
    },
    { group: 'mail', retry: { attempts: 1 } },
  );
  for (const pid of ['done', 'dead', 'open']) ids[pid] = await first.publish({ domain: 'jobs', name: 'run', pid });
  await eventually(async () => (await listDeadLetters(first)).length === 1 && handled.includes('open'), 5_000, 'done settled, dead a dead letter, open held');
  await eventually(async () => (await listGroups(first, 'jobs'))[0]?.inFlight === 1, 5_000, 'only open in flight');
  void consumer;
  const closing = first.close();
  await store.stop();
  hold();
  await closing;

  await store.downgrade(ids['open'] as string, Date.now() + 1_000);
  const second = client(await store.start());
  // Published while no consumer ran: version 1 had no rows for them.
  for (const pid of ['later1', 'later2']) ids[pid] = await second.publish({ domain: 'jobs', name: 'run', pid });

  const letters = await listDeadLetters(second);
  expect(letters.map((letter) => letter.eventId)).toEqual([ids['dead']]);

  const again: Array<[string, number]> = [];
  await second.consume('jobs', 'run', (event, { attempt }) => void again.push([event.pid, attempt]), { group: 'mail' });
  await eventually(() => again.length >= 3, 10_000, 'open (after its lease) and the two later events');
  expect(await requeueDeadLetter(second, { eventId: ids['dead'] as string, domain: 'jobs', name: 'run', group: 'mail' })).toBe(true);
  // A fence: the requeued dead letter comes after everything else was delivered.
  await eventually(() => again.some(([pid]) => pid === 'dead'), 10_000, 'the requeued dead letter');
  await second.publish({ domain: 'jobs', name: 'run', pid: 'fence' });
  await eventually(() => again.some(([pid]) => pid === 'fence'), 10_000, 'fence');
  expect(again.map(([pid]) => pid).sort()).toEqual(['dead', 'fence', 'later1', 'later2', 'open']);
  expect(again.find(([pid]) => pid === 'open')?.[1]).toBe(2);
  // Settles are written in batches: the listing catches up.
  await eventually(async () => (await listGroups(second, 'jobs'))[0]?.inFlight === 0, 5_000, 'every settle recorded');
  expect((await listGroups(second, 'jobs'))[0]).toMatchObject({ deadLetters: 0, inFlight: 0, pending: 0 });
  expect(again).toHaveLength(5);
}

describe('upgrading a version 1 delivery ledger keeps every outcome, dead letter and open delivery: each unsettled event is delivered once, none settled again', () => {
  it('SQLite', async () => {
    await upgradeKeepsEverything({
      async start() {
        if (!temp) temp = await startTempGateway(LEASE);
        else await temp.start();
        return temp.gateway.url;
      },
      stop: async () => temp?.stop(),
      downgrade: async (openFor, deadline) => downgradeSqlite((temp as TempGateway).dbPath, openFor, deadline),
    });
  });

  describe.skipIf(mysqlUnavailable !== undefined)('MariaDB', () => {
    const { fresh } = useTestDatabases();
    it('MySQL store', async () => {
      const db = await fresh();
      const env = { ...mysqlEnv(db), ...LEASE };
      await upgradeKeepsEverything({
        async start() {
          gateway = await startGateway(env);
          return gateway.url;
        },
        async stop() {
          await gateway?.close();
          gateway = undefined;
        },
        downgrade: (openFor, deadline) => downgradeMysql(db, openFor, deadline),
      });
    });
  });
});

function mysqlEnv(db: TestDatabase): Record<string, string | number> {
  const { options } = db;
  return {
    EVENTFLOW_PORT: 0,
    EVENTFLOW_LOG_LEVEL: 'silent',
    EVENTFLOW_CONSOLE_DIR: 'off',
    EVENTFLOW_DRAIN_TIMEOUT_MS: 0,
    ...mysqlGatewayEnv({ ...options, database: options.database ?? db.name }),
  };
}

/** The MySQL ledger as a version 1 gateway left it (store/mysql/ledger-schema.ts lists what version 2 added). */
async function downgradeMysql(db: TestDatabase, openFor: string, deadline: number): Promise<void> {
  await db.query(`UPDATE eventflow_delivery SET delivery = 'old-delivery', owner = 'old-gateway', deadline = ?, attempts = 1 WHERE event_id = ?`, [deadline, openFor]);
  expect(await db.query(`SELECT 1 FROM eventflow_delivery WHERE delivery = 'old-delivery'`)).toHaveLength(1);
  await db.query(`DELETE FROM eventflow_delivery WHERE outcome IS NULL AND delivery IS NULL`);
  await db.query(
    `ALTER TABLE eventflow_delivery DROP INDEX idx_delivery_queue, DROP INDEX idx_delivery_pid, DROP INDEX idx_delivery_state, DROP INDEX idx_delivery_attempts, DROP INDEX idx_delivery_settled,
       DROP COLUMN position, DROP COLUMN pid, DROP COLUMN name, DROP COLUMN claimed_at, DROP COLUMN settled_at, ADD INDEX idx_delivery_group (domain, gname, grp, outcome)`,
  );
  await db.query(`ALTER TABLE eventflow_group DROP COLUMN ordered, DROP COLUMN materialized`);
}
