/**
 * What the MySQL store's errors tell an operator to do (db.ts storeError, nextStep), for the faults an
 * operator causes, each made for real on a connection of the test's own: another client's lock held
 * past innodb_lock_wait_timeout, a statement past max_statement_time, KILL QUERY, KILL CONNECTION.
 * They said "check the database and the gateway log", whatever the fault.
 */
import { createConnection, type Connection } from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { isEventflowError } from '@eventflow/core';
import { storeError } from '../src/store/mysql/db.js';
import { mysqlUnavailable, server, useTestDatabases } from '@eventflow/test-support/mysql';
import { eventually } from '@eventflow/test-support/wait';

/** The error `work` rejects with. */
async function failure(work: () => Promise<unknown>): Promise<unknown> {
  return work().then(
    () => {
      throw new Error('expected a failure');
    },
    (error: unknown) => error,
  );
}

describe.skipIf(mysqlUnavailable !== undefined)("the MySQL store's errors say what to do", () => {
  const databases = useTestDatabases();

  async function pair(): Promise<[Connection, Connection, string]> {
    const db = await databases.fresh();
    const a = await createConnection({ ...server, database: db.name });
    const b = await createConnection({ ...server, database: db.name });
    databases.onCleanup(() => a.end());
    databases.onCleanup(() => b.end().catch(() => undefined));
    await a.query('CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB');
    await a.query('INSERT INTO t VALUES (1)');
    return [a, b, db.name];
  }

  it("another client's lock past innodb_lock_wait_timeout: names the lock and where to find its holder", async () => {
    const [a, b] = await pair();
    await a.query('BEGIN');
    await a.query('SELECT id FROM t WHERE id = 1 FOR UPDATE');
    await b.query('SET SESSION innodb_lock_wait_timeout = 1');
    const error = storeError(await failure(() => b.query('UPDATE t SET id = 2 WHERE id = 1')), 'record the deliveries');
    await a.query('ROLLBACK');
    expect(isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED')).toBe(true);
    expect(error.message).toMatch(/^the MySQL store could not record the deliveries \(ER_LOCK_WAIT_TIMEOUT\); another client's transaction holds rows .*INNODB_TRX/);
  });

  it('a statement past max_statement_time, a KILL QUERY, a KILL CONNECTION: each named, each to be sent again', async () => {
    const [a, b] = await pair();
    // Each held by a's lock, so that it is under way when it is stopped.
    await a.query('BEGIN');
    await a.query('SELECT id FROM t WHERE id = 1 FOR UPDATE');
    const timedOut = storeError(await failure(() => b.query('SET STATEMENT max_statement_time = 0.2 FOR SELECT id FROM t WHERE id = 1 FOR UPDATE')), 'claim events');
    expect(timedOut.message).toMatch(/\(ER_STATEMENT_TIMEOUT\); a statement ran past the server's max_statement_time .*send it again/);

    const waiting = failure(() => b.query('SELECT id FROM t WHERE id = 1 FOR UPDATE'));
    await eventually(async () => ((await a.query(`SELECT ID FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE 'SELECT id FROM t%'`, [b.threadId]))[0] as unknown[]).length === 1, 5_000, "b's statement under way");
    await a.query(`KILL QUERY ${b.threadId}`);
    expect(storeError(await waiting, 'claim events').message).toMatch(/\(ER_QUERY_INTERRUPTED\); the statement was interrupted \(KILL QUERY/);

    const killed = failure(() => b.query('SELECT id FROM t WHERE id = 1 FOR UPDATE'));
    await eventually(async () => ((await a.query(`SELECT ID FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE 'SELECT id FROM t%'`, [b.threadId]))[0] as unknown[]).length === 1, 5_000, "b's statement under way again");
    await a.query(`KILL CONNECTION ${b.threadId}`);
    expect(storeError(await killed, 'claim events').message).toMatch(/the connection to the database was lost .*send it again/);
    await a.query('ROLLBACK');
  });
});
