/**
 * The MySQL server refusing the gateway's user while it runs: an operator changes its password (or drops the account)
 * and the gateway's connections end (a server restart, a KILL). A publish then failed at once and for good, its
 * E_EVENTFLOW_STORE_FAILED without `details.id`, `stored` or `retryable`, saying "check the database and the gateway
 * log", as if its statement were at fault: the client could not send it again. Now the refusal is the database's
 * state: the publish is answered retryable (nothing stored), the client sends it again within its timeout, and it is
 * stored once the password is back, without a restart; /readyz names the refusal meanwhile.
 */
import { randomBytes } from 'node:crypto';
import { createConnection, type RowDataPacket } from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { createClient, type EventflowError } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { readyz } from '@eventflow/test-support/gateway-http';
import { mysqlGatewayEnv, mysqlUnavailable, server, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';

describe.skipIf(mysqlUnavailable !== undefined)("the MySQL server refusing the gateway's user while it runs", () => {
  const databases = useTestDatabases();

  /** A user of `db` only, dropped after the test. */
  async function user(db: TestDatabase): Promise<{ user: string; password: string }> {
    const made = { user: `ef_access_${randomBytes(4).toString('hex')}`, password: randomBytes(8).toString('hex') };
    await db.query(`CREATE USER '${made.user}'@'%' IDENTIFIED BY '${made.password}'`);
    databases.onCleanup(() => db.query(`DROP USER IF EXISTS '${made.user}'@'%'`));
    await db.query(`GRANT ALL ON \`${db.name}\`.* TO '${made.user}'@'%'`);
    return made;
  }

  /** Ends every connection of `name` (as a server restart does), through an admin connection. */
  async function killConnections(name: string): Promise<void> {
    const admin = await createConnection(server);
    try {
      const [rows] = await admin.query<Array<{ id: number } & RowDataPacket>>('SELECT id FROM information_schema.processlist WHERE user = ?', [name]);
      for (const { id } of rows) await admin.query(`KILL ${Number(id)}`).catch(() => undefined);
    } finally {
      await admin.end();
    }
  }

  it('a publish meanwhile is retryable and stored once the password is back; /readyz names ER_ACCESS_DENIED_ERROR', async () => {
    const db = await databases.fresh();
    const login = await user(db);
    const gateway = await startGateway({ ...mysqlGatewayEnv({ ...db.options, ...login }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
    databases.onCleanup(() => gateway.close());
    const client = createClient(gateway.url, { requestTimeout: 30_000, reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
    databases.onCleanup(() => client.close());
    await client.publish({ domain: 'acc', name: 'placed', pid: 'before' });

    await db.query(`ALTER USER '${login.user}'@'%' IDENTIFIED BY 'changed-${login.password}'`);
    await killConnections(login.user);
    const during = client.publish({ id: 'during', domain: 'acc', name: 'placed', pid: 'during' }).then(
      (id) => ({ id }),
      (error: unknown) => ({ code: (error as EventflowError).code, message: (error as Error).message, details: (error as EventflowError).details }),
    );
    await eventually(async () => (await readyz(gateway)).store.reason?.includes('ER_ACCESS_DENIED_ERROR'), 15_000, '/readyz to name the refusal');
    await db.query(`ALTER USER '${login.user}'@'%' IDENTIFIED BY '${login.password}'`);
    // Before: { code: E_EVENTFLOW_STORE_FAILED, message: "the MySQL store could not append the events (ER_ACCESS_DENIED_ERROR); check the
    // database and the gateway log", details: undefined }, at once.
    expect(await during).toEqual({ id: 'during' });
    await eventually(async () => (await readyz(gateway)).status === 200, 15_000, '/readyz 200 again');
    expect(await db.query("SELECT id FROM event WHERE id = 'during'")).toHaveLength(1);
  }, 60_000);
});
