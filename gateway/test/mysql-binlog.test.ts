/**
 * The MySQL store on a server that writes a binary log: in STATEMENT format InnoDB refuses the store's READ COMMITTED
 * writes (error 1665), so the gateway does not start (exit 7, E_EVENTFLOW_STORE_UNSUPPORTED, saying what to set)
 * instead of saying ready and failing every publish; ROW and MIXED start, and so does a database the log leaves out.
 * A format set while a gateway runs fails its publishes with a message that names the cause. One private mariadbd
 * (--log-bin) for the file, its format switched with SET GLOBAL between cases, stopped (and its folder removed) after.
 */
import { createConnection, type Connection, type Pool } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { MysqlStore, type MysqlStoreOptions } from '../src/store/mysql/mysql.js';
import { checkBinlogFormat, logsStatements, readBinlogFormat, STATEMENT_LOG_AT_RUN, statementLogRefusal } from '../src/store/mysql/binlog.js';
import { mysqlGatewayEnv } from '@eventflow/test-support/mysql';
import { startPrivateMariadb, unavailable, type PrivateMariadb } from './private-mariadb.js';
import { finished, gateway } from './cli/support.js';

if (unavailable !== undefined) console.warn(`Skipping the binary log tests on a private server: ${unavailable}`);

const DATABASE = 'eventflow_binlog';
/** A database the server's binary log leaves out (--binlog-ignore-db): statements on it are not logged. */
const UNLOGGED = 'eventflow_unlogged';
const SEE = 'see gateway/README.md › Running beside eventflow v4';

describe('the binary log check, without a server', () => {
  it('refuses only a log that is on and in STATEMENT format for the session, whatever the global format', () => {
    expect(logsStatements({ logBin: true, session: 'STATEMENT', global: 'STATEMENT' })).toBe(true);
    expect(logsStatements({ logBin: true, session: 'STATEMENT', global: 'ROW' })).toBe(true);
    expect(logsStatements({ logBin: true, session: 'ROW', global: 'STATEMENT' })).toBe(false);
    expect(logsStatements({ logBin: true, session: 'MIXED', global: 'MIXED' })).toBe(false);
    expect(logsStatements({ logBin: false, session: 'STATEMENT', global: 'STATEMENT' })).toBe(false);
  });

  it('the message says what to run on the server and where the README explains it; the details name the setting', () => {
    const error = statementLogRefusal({ logBin: true, session: 'STATEMENT', global: 'STATEMENT' }, { host: 'db', port: 3306, user: 'app' });
    expect(error).toMatchObject({ code: 'E_EVENTFLOW_STORE_UNSUPPORTED', details: { setting: 'binlog_format', session: 'STATEMENT', global: 'STATEMENT' } });
    expect(error.message).toMatch(/^MySQL at db:3306 writes its binary log in STATEMENT format .*SET GLOBAL binlog_format = 'ROW'.*binlog_format=ROW in its configuration.*gateway\/README\.md › Running beside eventflow v4$/);
    // A write refused while the gateway runs says the same, and that connections opened meanwhile need a restart.
    expect(STATEMENT_LOG_AT_RUN).toMatch(/SET GLOBAL binlog_format = 'ROW'.*restart the gateway; see gateway\/README\.md › Running beside eventflow v4$/);
  });

  it('a server whose variables cannot be read (a proxy, a server without binlog_format) is not refused', async () => {
    const refusing = { query: () => Promise.reject(Object.assign(new Error('Unknown system variable'), { code: 'ER_UNKNOWN_SYSTEM_VARIABLE' })) } as unknown as Pool;
    expect(await readBinlogFormat(refusing)).toBeUndefined();
    await expect(checkBinlogFormat(refusing, refusing, { host: 'db', port: 3306, user: 'app' })).resolves.toBeUndefined();
  });
});

describe.skipIf(unavailable !== undefined)('the MySQL store on a server writing a binary log', () => {
  let server: PrivateMariadb;
  let admin: Connection;
  const storeOptions = (database = DATABASE, user = server.user, password = server.password): MysqlStoreOptions => ({
    host: server.host,
    port: server.port,
    user,
    password,
    database,
  });
  const gatewaySettings = (): Record<string, string | number> => ({ EVENTFLOW_PORT: 0, ...mysqlGatewayEnv(storeOptions()), EVENTFLOW_LOG_LEVEL: 'silent' });
  const format = async (value: 'STATEMENT' | 'ROW' | 'MIXED'): Promise<void> => void (await admin.query(`SET GLOBAL binlog_format = '${value}'`));
  /** The store's init: undefined when it opened (then closed), else its error. */
  const opening = async (options: MysqlStoreOptions): Promise<unknown> => {
    const store = new MysqlStore(options);
    try {
      await store.init();
    } catch (error) {
      return error;
    }
    await store.close();
    return undefined;
  };

  beforeAll(async () => {
    // --log-bin after the helper's --skip-log-bin: the later option wins.
    server = await startPrivateMariadb(['--log-bin', '--binlog-format=STATEMENT', `--binlog-ignore-db=${UNLOGGED}`]);
    admin = await createConnection({ host: server.host, port: server.port, user: server.user, password: server.password });
    await admin.query(`CREATE DATABASE ${DATABASE}`);
    await admin.query(`CREATE DATABASE ${UNLOGGED}`);
    // No global privilege: reading the variables needs none.
    await admin.query(`CREATE USER 'plain'@'127.0.0.1' IDENTIFIED BY 'plain-pw'`);
    await admin.query(`GRANT ALL ON ${DATABASE}.* TO 'plain'@'127.0.0.1'`);
    // Enough to set its own session's format (init_connect below), not enough to skip init_connect (CONNECTION ADMIN).
    await admin.query(`CREATE USER 'session'@'127.0.0.1' IDENTIFIED BY 'session-pw'`);
    await admin.query(`GRANT ALL ON ${DATABASE}.* TO 'session'@'127.0.0.1'`);
    await admin.query(`GRANT BINLOG ADMIN ON *.* TO 'session'@'127.0.0.1'`);
  }, 120_000);

  afterAll(async () => {
    await admin?.end();
    await server?.stop();
  }, 60_000);

  it('STATEMENT: the gateway does not start; its first line says what to set (exit 7); with ROW it starts', async () => {
    await format('STATEMENT');
    // Within the test's timeout: a gateway that started after all is SIGKILLed, not left behind.
    const refused = await finished(gateway([], { ...gatewaySettings(), EVENTFLOW_LOG_LEVEL: 'warn' }), 15_000);
    expect(refused.code).toBe(7);
    expect(refused.firstError).toBe(
      `eventflow gateway cannot start: MySQL at ${server.host}:${server.port} writes its binary log in STATEMENT format (binlog_format), and InnoDB refuses the gateway's writes under it (they run at READ COMMITTED: error 1665); run SET GLOBAL binlog_format = 'ROW' (or 'MIXED') on the server and binlog_format=ROW in its configuration ([mysqld]) so that a restart keeps it (MySQL 8: SET PERSIST binlog_format = 'ROW' does both), then start the gateway again; ${SEE} (E_EVENTFLOW_STORE_UNSUPPORTED)`,
    );
    expect(JSON.parse(refused.stderr.split('\n')[1] ?? '')).toMatchObject({ level: 'error', error: { code: 'E_EVENTFLOW_STORE_UNSUPPORTED' } });
    // Never said ready.
    expect(refused.stdout).toBe('');

    await format('ROW');
    const started = await startGateway(gatewaySettings());
    const client = createClient(started.url, { onError: () => undefined });
    try {
      await expect(client.publish({ domain: 'orders', name: 'placed', pid: 'p1' })).resolves.toEqual(expect.any(String));
    } finally {
      await client.close();
      await started.close();
    }
  });

  it('MIXED starts; a user without global privileges is refused all the same', async () => {
    await format('MIXED');
    expect(await opening(storeOptions())).toBeUndefined();
    await format('STATEMENT');
    expect(await opening(storeOptions(DATABASE, 'plain', 'plain-pw'))).toMatchObject({ code: 'E_EVENTFLOW_STORE_UNSUPPORTED', details: { session: 'STATEMENT', global: 'STATEMENT' } });
  });

  it('the hub\'s store (checkBinlogFormat: false: nothing of the hub runs at READ COMMITTED) opens on STATEMENT', async () => {
    await format('STATEMENT');
    expect(await opening({ ...storeOptions(), checkBinlogFormat: false })).toBeUndefined();
  });

  it("a session set to STATEMENT (init_connect) is refused though the global format is ROW, naming the user and what sets it", async () => {
    await format('ROW');
    await admin.query(`SET GLOBAL init_connect = "SET SESSION binlog_format = 'STATEMENT'"`);
    try {
      const error = await opening(storeOptions(DATABASE, 'session', 'session-pw'));
      expect(error).toMatchObject({ code: 'E_EVENTFLOW_STORE_UNSUPPORTED', details: { session: 'STATEMENT', global: 'ROW' } });
      expect((error as Error).message).toBe(
        `MySQL at ${server.host}:${server.port} gives the sessions of user "session" a binary log in STATEMENT format (their binlog_format; the global one is ROW), and InnoDB refuses the gateway's writes under it (they run at READ COMMITTED: error 1665); make what sets it for them (the server's init_connect, or a proxy) set ROW or MIXED, or nothing, then start the gateway again; ${SEE}`,
      );
    } finally {
      await admin.query(`SET GLOBAL init_connect = ''`);
    }
  });

  it('STATEMENT on a database the log leaves out (binlog_ignore_db) starts and appends: only what would fail is refused', async () => {
    await format('STATEMENT');
    const store = new MysqlStore(storeOptions(UNLOGGED));
    try {
      await store.init();
      const result = await store.append({ id: 'unlogged-1', domain: 'orders', name: 'placed', pid: 'p1', data: {}, rid: undefined }, { publisher: 'g' });
      expect(result.created).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('STATEMENT set while a gateway runs: a publish fails with what to set and that the gateway must restart', async () => {
    await format('ROW');
    const running = await startGateway(gatewaySettings());
    const client = createClient(running.url, { onError: () => undefined });
    try {
      await client.ready();
      // The appends' connections open at the first publish, after the switch: they get STATEMENT.
      await format('STATEMENT');
      const failed = await client.publish({ domain: 'orders', name: 'placed', pid: 'p2' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failed).toMatchObject({ code: 'E_EVENTFLOW_STORE_FAILED' });
      expect((failed as Error).message).toBe(`the MySQL store could not append the events (ER_BINLOG_STMT_MODE_AND_ROW_ENGINE); ${STATEMENT_LOG_AT_RUN}`);
    } finally {
      await client.close();
      await running.close();
      await format('ROW');
    }
  });
});
