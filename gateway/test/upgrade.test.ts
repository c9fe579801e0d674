/**
 * Upgrading: a SQLite store file whose delivery ledger an older gateway wrote (schema version 1:
 * no queue columns, a row only for what was delivered, the v1 indexes) opened by this gateway with
 * a delivery open (its gateway died) and dead letters present. Nothing is lost, nothing settled
 * is delivered again, the dead letters are listed and can be requeued.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { listDeadLetters, listGroups, requeueDeadLetter } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** Turns the file's ledger into what a version 1 gateway left (store/sqlite/ledger-schema.ts lists what version 2 added). */
function downgradeToV1(path: string, openFor: string, deadline: number): void {
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
      db.exec(`CREATE INDEX idx_delivery_id ON eventflow_delivery (delivery);
        CREATE INDEX idx_delivery_owner ON eventflow_delivery (owner, outcome);
        CREATE INDEX idx_delivery_group ON eventflow_delivery (domain, gname, grp, outcome);`);
    })();
  } finally {
    db.close();
  }
}

describe('upgrading a version 1 SQLite ledger', () => {
  it('keeps every outcome, dead letter and open delivery: each unsettled event is delivered once, none settled again', async () => {
    h = await startHarness({ EVENTFLOW_CONSUME_LEASE_MS: 60_000 });
    const t = h;
    const ids: Record<string, string> = {};
    const first = t.client();
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
    await t.stopGateway();
    hold();
    await closing;

    // Published while no consumer ran: version 1 had no rows for them.
    downgradeToV1(t.dbPath, ids['open'] as string, Date.now() + 1_000);
    await t.restart();
    const second = t.client();
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
  });
});
