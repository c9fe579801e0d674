/**
 * Chaos: scheduled events that a consumer group takes, across a restart of the gateway (a child
 * process, SQLite file or MariaDB database): SIGKILLed before their due time and started again after
 * it, they fire at the start and each reaches the group once; stopped with SIGTERM and started again
 * before it, they fire at their due time, not before, once each.
 */
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createClient, type StoredEvent } from '@eventflow/core';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { freePort, kill9, startGatewayProcess, stop } from '@eventflow/test-support/gateway-process';
import { chaosStores, mysqlGatewayEnv, useChaosLifecycle } from './support.js';

const { temp, clients } = useChaosLifecycle();
const databases = useTestDatabases();
const EVENTS = 10;

describe.each(chaosStores)('chaos: scheduled events of a consumer group across a gateway restart ($store)', ({ store }) => {
  const skip = store === 'mysql' ? mysqlUnavailable : undefined;
  for (const [signal, back] of [
    ['SIGKILL', 'after'],
    ['SIGTERM', 'before'],
  ] as const) {
    it.skipIf(skip !== undefined)(`${signal} before the due time, started again ${back} it: each fires once, at or after its due time, and reaches the group once`, async () => {
      const mysql = store === 'mysql' ? await databases.fresh() : undefined;
      const dbPath = join(temp.dir, `scheduled-${store}-${signal}.db`);
      const env = mysql ? mysqlGatewayEnv(mysql.options) : {};
      const port = await freePort();
      let gateway: ChildProcess = (await startGatewayProcess(port, dbPath, env)).proc;
      databases.onCleanup(() => kill9(gateway));
      const client = createClient(`ws://127.0.0.1:${port}/`, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
      clients.push(client);
      const handled: Array<{ id: string; at: number; attempt: number }> = [];
      await client.consume('timers', 'due', (event: StoredEvent, { attempt }) => void handled.push({ id: event.id, at: Date.now(), attempt }), { group: 'reminders' });
      const due = Date.now() + 1_500;
      const ids: string[] = [];
      for (let i = 0; i < EVENTS; i++) ids.push(await client.schedule(new Date(due + i * 10), { domain: 'timers', name: 'due', pid: `p${i}` }));
      await (signal === 'SIGKILL' ? kill9(gateway) : stop(gateway, 'SIGTERM'));
      // Time is what is tested: the gateway is away until after (or back before) the due time.
      if (back === 'after') await sleep(Math.max(0, due + EVENTS * 10 - Date.now()) + 300);
      gateway = (await startGatewayProcess(port, dbPath, env)).proc;
      await eventually(() => handled.length >= EVENTS, 15_000, 'every scheduled event handled');
      const sql = `SELECT event_id AS id, outcome, attempts FROM eventflow_delivery WHERE grp = 'reminders'`;
      type Row = { id: string; outcome: string | null; attempts: number | string };
      const read = async (): Promise<Array<{ id: string; outcome: string | null; attempts: number }>> => {
        let rows: Row[];
        if (mysql) rows = await mysql.query<Row>(sql);
        else {
          const db = new Database(dbPath, { readonly: true, timeout: 5_000 });
          rows = db.prepare(sql).all() as Row[];
          db.close();
        }
        return rows.map((row) => ({ ...row, attempts: Number(row.attempts) })).sort((a, b) => a.id.localeCompare(b.id));
      };
      // The last handler's return is seen here before its settle reaches the store; the ledger is
      // read once every row is settled (or the wait times out and the comparison shows what is not).
      let rows = await read();
      await eventually(async () => (rows = await read()).length >= EVENTS && rows.every((row) => row.outcome !== null), 5_000, 'every delivery settled').catch(() => undefined);
      expect(rows).toEqual([...ids].sort().map((id) => ({ id, outcome: 'success', attempts: 1 })));
      expect(handled.map((run) => run.id).sort()).toEqual([...ids].sort());
      expect(Math.min(...handled.map((run) => run.at)) - due).toBeGreaterThanOrEqual(-5);
      await stop(gateway);
    }, 60_000);
  }
});
