/**
 * The MySQL store's window of the batches it just committed (store/recent.ts): the dispatcher's read
 * right after each batch (readPublishedAfter with `upTo`) is answered from memory, and only while no
 * other writer has taken a position since the window began. What it answers must be what the
 * database holds through `upTo`: checked against the same read without `upTo` (always the database)
 * while two stores on one database interleave, events are deleted, persisted without publishing and
 * scheduled. And a gateway's own publishes reach its subscribers without a read statement.
 */
import { describe, expect, it } from 'vitest';
import { createClient, type StoredEvent } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import type { MysqlStore } from '../src/store/mysql/mysql.js';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { newEvent } from './store-suite.js';
import { statementCuttingProxy } from './commit-cutting-proxy.js';
import { storeOpener } from './mysql-stores.js';

const positions = (events: readonly StoredEvent[]): number[] => events.map((event) => event.position);

describe.skipIf(mysqlUnavailable !== undefined)("the MySQL store's window of its own batches", () => {
  const databases = useTestDatabases();
  const open = storeOpener(databases);

  /** Every read through `upTo` from `after` = 0…upTo: memory's answer is the database's through `upTo`, and a prefix of it. */
  async function expectAsStored(store: MysqlStore, upTo: number): Promise<number> {
    let served = 0;
    for (let after = 0; after <= upTo; after += 1) {
      for (const filter of [{ domain: 'orders', name: '*' }, { domain: 'orders', name: 'created' }, { domain: 'other', name: '*' }]) {
        const through = await store.readPublishedAfter(filter, after, 100, upTo);
        const stored = await store.readPublishedAfter(filter, after, 100);
        expect(positions(through.filter((event) => event.position <= upTo)), `after ${after}, through ${upTo}`).toEqual(positions(stored.filter((event) => event.position <= upTo)));
        expect(through).toEqual(stored.slice(0, through.length));
        if (through.length !== stored.length) served += 1;
      }
    }
    return served;
  }

  it('answers from memory only what the database holds, with another store writing between its batches', async () => {
    const db = await databases.fresh();
    const a = await open(db);
    const b = await open(db);
    const publish = (store: MysqlStore, fields: Partial<Pick<StoredEvent, 'domain' | 'name'>> = {}, options: { publisher?: string; scheduledAt?: Date } = { publisher: 'GW' }) =>
      store.append(newEvent({ domain: 'orders', name: 'created', ...fields }), options);
    const e1 = (await publish(a)).event;
    await publish(a, { name: 'shipped' });
    await publish(a, { domain: 'other' });
    // Persisted without publishing, and scheduled (not fired): positions that no read of published events returns.
    await publish(a, {}, {});
    await publish(a, {}, { publisher: 'GW', scheduledAt: new Date(Date.UTC(2040, 0, 1)) });
    const last = (await publish(a)).event;
    await expectAsStored(a, last.position);
    // Another store's event, then a's: a's window starts again at its batch; nothing of b's is missed.
    await publish(b);
    const after = (await publish(a, { name: 'shipped' })).event;
    await expectAsStored(a, after.position);
    // Deleting an event empties the window.
    await a.delete(e1.id);
    await expectAsStored(a, after.position);
    const next = (await publish(a)).event;
    await expectAsStored(a, next.position);
    // Events b stores after a's newest: a read through a's newest may leave them out, never gets them wrong.
    await publish(b);
    await publish(b, { domain: 'other' });
    expect(await expectAsStored(a, next.position)).toBeGreaterThan(0);
  });

  it("serves the dispatcher's read of a gateway's own publishes: no statement reads them back", async () => {
    const db = await databases.fresh();
    const domain = 'windowed';
    // A string parameter of a prepared statement: its length (one byte under 251), then its bytes. Only a read of the
    // domain's events carries it so (an append's rows are JSON): the proxy cuts the first such statement.
    const proxy = await statementCuttingProxy(Buffer.from([domain.length, ...Buffer.from(domain)]));
    databases.onCleanup(() => proxy.close());
    const gateway = await startGateway({ ...mysqlGatewayEnv({ ...db.options, host: '127.0.0.1', port: proxy.port }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
    databases.onCleanup(() => gateway.close());
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close());
    const seen: string[] = [];
    await client.subscribe(domain, '*', (event) => void seen.push(event.id));
    proxy.arm();
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) ids.push(await client.publish({ domain, name: 'step', pid: `p${i}` }));
    ids.push(...(await Promise.all([1, 2, 3].map((i) => client.publish({ domain, name: 'step', pid: `q${i}` })))));
    await eventually(() => seen.length === ids.length, 5_000, 'every event at the subscriber');
    expect(seen).toEqual(ids);
    expect(proxy.cut).toBe(0);
  });
});
