/**
 * MariaDB's own server errors from 4000 on, which mysql2 names after MySQL's errors of the same number: an operator's
 * `ALTER USER … ACCOUNT LOCK` read as `ER_BULK_PARSER_INCOMPLETE_ESCAPE_SEQUENCE`, and the gateway said to "check the
 * server". Named as MariaDB names them, the start-up failure says what to do.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../src/index.js';
import { ownDriverCode } from '../src/store/driver-code.js';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';

it('renames the MariaDB errors mysql2 names after MySQL, and only those', () => {
  expect(ownDriverCode({ errno: 4151, code: 'ER_BULK_PARSER_INCOMPLETE_ESCAPE_SEQUENCE' })).toBe('ER_ACCOUNT_HAS_BEEN_LOCKED');
  expect(ownDriverCode({ errno: 4060, code: 'ER_INVALID_USER_FOR_REGISTRATION' })).toBe('ER_ROLLBACK_ONLY');
  expect(ownDriverCode({ errno: 1045, code: 'ER_ACCESS_DENIED_ERROR' })).toBe('ER_ACCESS_DENIED_ERROR');
  expect(ownDriverCode({ errno: 1969 })).toBe('ER_STATEMENT_TIMEOUT');
});

describe.skipIf(mysqlUnavailable !== undefined)('a database user whose account an operator locked (MariaDB)', () => {
  const databases = useTestDatabases();

  it('the gateway does not start, and says the account is locked and how to unlock it', async ({ skip }) => {
    const db = await databases.fresh();
    const [{ version } = { version: '' }] = await db.query<{ version: string }>('SELECT VERSION() AS version');
    if (!/MariaDB/i.test(version)) {
      const why = `the server is ${version}, not MariaDB: ACCOUNT LOCK's error is MariaDB's own`;
      console.warn(`Skipping the locked-account start-up test: ${why}`);
      skip(why);
    }
    const user = `ef_locked_${randomBytes(4).toString('hex')}`;
    const password = randomBytes(8).toString('hex');
    await db.query(`CREATE USER '${user}'@'%' IDENTIFIED BY '${password}' ACCOUNT LOCK`);
    databases.onCleanup(() => db.query(`DROP USER IF EXISTS '${user}'@'%'`));
    await db.query(`GRANT ALL ON \`${db.name}\`.* TO '${user}'@'%'`);
    const failed = await startGateway({ ...mysqlGatewayEnv({ ...db.options, user, password }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' }).then(
      async (gateway) => {
        await gateway.close();
        return undefined;
      },
      (error: unknown) => error as Error,
    );
    // Before: "cannot use MySQL at …: Access denied, this account is locked (ER_BULK_PARSER_INCOMPLETE_ESCAPE_SEQUENCE); check the server".
    expect(failed?.message).toContain('(ER_ACCOUNT_HAS_BEEN_LOCKED)');
    expect(failed?.message).toContain('ACCOUNT UNLOCK');
  });
});
