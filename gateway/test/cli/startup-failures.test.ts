/**
 * Start-up failures of the real `eventflow-gateway` process: the first stderr line says what is
 * wrong and what to do (before the JSON log line), and the exit code says which kind of failure it
 * is (gateway/README.md "Exit codes"). MySQL cases run against the test server (@eventflow/test-support/mysql).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { EventflowError } from '@eventflow/core';
import { parseConfig } from '../../src/config.js';
import { storeUnavailable } from '../../src/startup-failure.js';
import { parseHubConfig } from '../../src/v4/hub/config.js';
import { mysqlUnavailable, server as mysqlServer, useTestDatabases } from '@eventflow/test-support/mysql';
import { finished, gateway } from './support.js';
import { MASTER } from '../hub-support.js';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-startup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const sqlite = (name: string): Record<string, string | number> => ({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: join(dir, name) });

function listening(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

describe('eventflow-gateway start-up failures', () => {
  it('EVENTFLOW_PORT=abc: the variable, the value and what is expected; exit 3', async () => {
    const result = await finished(gateway([], { ...sqlite('a.db'), EVENTFLOW_PORT: 'abc' }));
    expect(result.code).toBe(3);
    expect(result.firstError).toBe('eventflow gateway cannot start: invalid gateway configuration: EVENTFLOW_PORT="abc": expected a port number (an integer from 0 to 65535) (E_EVENTFLOW_CONFIG)');
    // The JSON log line with the details follows.
    expect(JSON.parse(result.stderr.split('\n')[1] ?? '')).toMatchObject({ level: 'error', error: { code: 'E_EVENTFLOW_CONFIG' } });
  });

  it('EVENTFLOW_CONSUME_MAX_ATTEMPTS past a consumer\'s 100 attempts: refused with the range; exit 3', async () => {
    const result = await finished(gateway([], { ...sqlite('attempts.db'), EVENTFLOW_CONSUME_MAX_ATTEMPTS: '1000' }));
    expect(result.code).toBe(3);
    expect(result.firstError).toBe(
      "eventflow gateway cannot start: invalid gateway configuration: EVENTFLOW_CONSUME_MAX_ATTEMPTS=\"1000\": expected a whole number from 1 to 100 (100: the most a consumer's retry.attempts may ask for) (E_EVENTFLOW_CONFIG)",
    );
  });

  it('a secret value is never echoed, only its variable', async () => {
    const result = await finished(gateway([], { ...sqlite('b.db'), EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: 'short-secret' }));
    expect(result.code).toBe(3);
    expect(result.firstError).toMatch(/EVENTFLOW_JWT_SECRET: must be at least 32 characters/);
    expect(result.stderr).not.toContain('short-secret');
  });

  it('the port in use: "port N on 127.0.0.1 is in use; stop the other process or set EVENTFLOW_PORT"; exit 4', async () => {
    const { server, port } = await listening();
    try {
      const result = await finished(gateway([], { ...sqlite('c.db'), EVENTFLOW_PORT: port }));
      expect(result.code).toBe(4);
      expect(result.firstError).toBe(`eventflow gateway cannot start: port ${port} on 127.0.0.1 is in use; stop the other process or set EVENTFLOW_PORT (E_EVENTFLOW_LISTEN_FAILED)`);
    } finally {
      server.close();
    }
  });

  it('a SQLite directory that cannot be created (/proc/nope) fails at once instead of spinning; exit 5', async () => {
    const started = Date.now();
    // Node 20's recursive mkdir loops forever here: SIGKILLed after 15 s, the test fails on `signal`.
    const result = await finished(gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: '/proc/nope/x.db' }), 15_000);
    expect(result.signal).toBeNull();
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      'eventflow gateway cannot start: cannot create the directory "/proc/nope" for the SQLite database "/proc/nope/x.db" (ENOENT); set EVENTFLOW_SQLITE_PATH to a file in a directory this process can write (E_EVENTFLOW_STORE_UNAVAILABLE)',
    );
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('a SQLite path that cannot be opened (a directory) names the path and EVENTFLOW_SQLITE_PATH; exit 5', async () => {
    const result = await finished(gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: dir }));
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      `eventflow gateway cannot start: cannot open the SQLite database ${JSON.stringify(dir)}: unable to open database file (SQLITE_CANTOPEN); set EVENTFLOW_SQLITE_PATH to a file in a directory this process can write (E_EVENTFLOW_STORE_UNAVAILABLE)`,
    );
  });
});

// As another user than the file's: root's writes pass every file mode.
describe.skipIf(process.getuid?.() !== 0)('eventflow-gateway on a SQLite database it may not write', () => {
  it('says the database exists and to give the gateway write access, not to pick another path (an empty store); exit 5', async () => {
    const own = mkdtempSync(join(tmpdir(), 'eventflow-readonly-'));
    try {
      chmodSync(own, 0o755);
      const path = join(own, 'kept.db');
      const db = new Database(path);
      db.exec('CREATE TABLE kept (x)');
      db.close();
      const result = await finished(gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path }, { uid: 65534, gid: 65534 }));
      expect(result.code).toBe(5);
      // Before: "cannot open the SQLite database …: attempt to write a readonly database (SQLITE_READONLY); set
      // EVENTFLOW_SQLITE_PATH to a file in a directory this process can write", which starts on an empty store.
      expect(result.firstError).toMatch(
        new RegExp(
          `^eventflow gateway cannot start: the SQLite database ${JSON.stringify(path)} exists, but this process cannot write to it or to its directory \\((SQLITE_READONLY|SQLITE_CANTOPEN)\\); ` +
            "give it write access to both \\(the file's owner or mode, a read-only mount\\), then start the gateway again \\(another EVENTFLOW_SQLITE_PATH would start on an empty store\\) \\(E_EVENTFLOW_STORE_UNAVAILABLE\\)$",
        ),
      );
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
});

describe('eventflow-gateway on a store whose eventflow tables it cannot upgrade', () => {
  /** Runs a gateway on the file once (its tables), then changes them with `sql` as a hand or an old tool might have. */
  async function spoiled(name: string, sql: string): Promise<string> {
    const path = join(dir, name);
    const first = gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'warn' });
    await first.printed('clients:');
    first.proc.kill('SIGTERM');
    expect((await finished(first)).code).toBe(0);
    const db = new Database(path);
    db.exec(sql);
    db.close();
    return path;
  }

  // Before, these said "set EVENTFLOW_SQLITE_PATH to a file in a directory this process can write":
  // followed, the gateway started on an empty store, and every group, dead letter and open delivery seemed lost.
  it.each([
    ['a ledger column renamed', 'DROP INDEX idx_delivery_redelivered; ALTER TABLE eventflow_delivery RENAME COLUMN attempts TO tries', 'no such column: attempts'],
    ['a ledger table replaced by a view', 'DROP TABLE eventflow_group; CREATE VIEW eventflow_group AS SELECT 1 AS x', 'Cannot add a column to a view'],
  ])('SQLite, %s: says the tables cannot be upgraded and the data is kept, not to pick another path; exit 5', async (_case, sql, detail) => {
    const path = await spoiled(`spoiled-${sql.length}.db`, sql);
    const result = await finished(gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path }));
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      `eventflow gateway cannot start: the SQLite database ${JSON.stringify(path)} holds eventflow tables this gateway cannot open or upgrade: ${detail} (SQLITE_ERROR); ` +
        'its data is kept as it is: repair those tables, restore a backup, or run the gateway version that wrote them (another EVENTFLOW_SQLITE_PATH starts on an empty store) (E_EVENTFLOW_STORE_UNAVAILABLE)',
    );
  });
});

describe('eventflow-gateway on a SQLite file a newer gateway wrote', () => {
  // Before: its tables were altered first, then "…newer than the 2 this gateway supports; upgrade the gateway;
  // set EVENTFLOW_SQLITE_PATH to a file in a directory this process can write".
  it('refuses it before changing anything, saying to run that version; exit 5', async () => {
    const path = join(dir, 'newer.db');
    const first = gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'warn' });
    await first.printed('clients:');
    first.proc.kill('SIGTERM');
    expect((await finished(first)).code).toBe(0);
    const tables = (): unknown[] => {
      const db = new Database(path, { readonly: true });
      try {
        return db.prepare(`SELECT name, sql FROM sqlite_master ORDER BY name`).all();
      } finally {
        db.close();
      }
    };
    const db = new Database(path);
    db.exec(`UPDATE meta SET value = '3' WHERE key = 'schema_version'; ALTER TABLE event DROP COLUMN tracestate`);
    db.close();
    const before = tables();
    const result = await finished(gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path }));
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      `eventflow gateway cannot start: the SQLite database ${JSON.stringify(path)} has schema version 3, newer than the 2 this gateway supports (a newer gateway wrote it); run that version or a newer one (the file is kept as it is) (E_EVENTFLOW_STORE_UNAVAILABLE)`,
    );
    expect(tables()).toEqual(before);
  });
});

describe('eventflow-gateway on a SQLite file another process is writing', () => {
  it('says the file is locked by another process in a write transaction, and to end it, not to pick another path; exit 5; starts once it ends', async () => {
    const path = join(dir, 'shell.db');
    const first = gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'warn' });
    await first.printed('clients:');
    first.proc.kill('SIGTERM');
    expect((await finished(first)).code).toBe(0);
    // An operator's sqlite3 shell in BEGIN IMMEDIATE on the file while the gateway (re)starts.
    const shell = new Database(path);
    try {
      shell.exec('BEGIN IMMEDIATE');
      const refused = await finished(gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path }), 30_000);
      expect(refused.code).toBe(5);
      // Before: "cannot open the SQLite database …: database is locked (SQLITE_BUSY); set EVENTFLOW_SQLITE_PATH to a file in a directory this process can write".
      expect(refused.firstError).toBe(
        `eventflow gateway cannot start: the SQLite database ${JSON.stringify(path)} is locked by another process in a write transaction on it (the sqlite3 shell, a backup, a script) (SQLITE_BUSY); end that transaction, then start the gateway again (E_EVENTFLOW_STORE_UNAVAILABLE)`,
      );
      shell.exec('COMMIT');
    } finally {
      shell.close();
    }
    const next = gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'warn' });
    await next.printed('clients:');
    next.proc.kill('SIGTERM');
    expect((await finished(next)).code).toBe(0);
  }, 60_000);
});

describe('eventflow-gateway on a SQLite file another gateway holds', () => {
  it('refuses with the file and the holding process on the first line; exit 6; after kill -9 of the holder, the next one starts', async () => {
    const path = join(dir, 'held.db');
    const holder = gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'warn' });
    try {
      await holder.printed('clients:');
      const id = /^eventflow gateway (\S+)/.exec(holder.stdout())?.[1] ?? '';
      const refused = await finished(gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path }));
      expect(refused.code).toBe(6);
      expect(refused.firstError).toMatch(
        new RegExp(
          `^eventflow gateway cannot start: the SQLite database "${path}" is in use by gateway ${id.replace(/\./g, '\\.')}, process ${holder.proc.pid}, since \\S+; stop that gateway, or set EVENTFLOW_SQLITE_PATH to another file \\(gateways that share a store need EVENTFLOW_STORE=mysql\\) \\(E_EVENTFLOW_STORE_LOCKED\\)$`,
        ),
      );
      expect(refused.stdout).toBe('');
    } finally {
      holder.proc.kill('SIGKILL');
      await finished(holder);
    }
    // The lock died with its process: no stale lock file to remove by hand.
    const next = gateway([], { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: path, EVENTFLOW_LOG_LEVEL: 'warn' });
    await next.printed('clients:');
    next.proc.kill('SIGTERM');
    expect((await finished(next)).code).toBe(0);
  });
});

describe.skipIf(mysqlUnavailable !== undefined)('eventflow-gateway on MySQL: start-up failures', () => {
  const { fresh } = useTestDatabases();
  const mysql = (extra: Record<string, string | number>): Record<string, string | number> => ({
    EVENTFLOW_PORT: 0,
    EVENTFLOW_STORE: 'mysql',
    EVENTFLOW_MYSQL_HOST: mysqlServer.host,
    EVENTFLOW_MYSQL_PORT: mysqlServer.port,
    EVENTFLOW_MYSQL_USER: mysqlServer.user,
    EVENTFLOW_MYSQL_PASS: mysqlServer.password,
    ...extra,
  });

  it('unreachable: host, port, database, user and the variables to change; exit 5', async () => {
    const { server, port } = await listening();
    await new Promise<void>((resolve) => server.close(() => resolve())); // a port nobody listens on
    const result = await finished(gateway([], mysql({ EVENTFLOW_MYSQL_PORT: port, EVENTFLOW_MYSQL_DB: 'somedb' })));
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      `eventflow gateway cannot start: cannot reach MySQL at ${mysqlServer.host}:${port} (database "somedb", user "${mysqlServer.user}"): ECONNREFUSED; start the server, or set EVENTFLOW_MYSQL_HOST and EVENTFLOW_MYSQL_PORT to where it runs (E_EVENTFLOW_STORE_UNAVAILABLE)`,
    );
  });

  it('an unknown database names it and EVENTFLOW_MYSQL_DB; exit 5', async () => {
    const result = await finished(gateway([], mysql({ EVENTFLOW_MYSQL_DB: 'eventflow_no_such_db' })));
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      `eventflow gateway cannot start: MySQL at ${mysqlServer.host}:${mysqlServer.port} has no database "eventflow_no_such_db" (user "${mysqlServer.user}"); create it (CREATE DATABASE \`eventflow_no_such_db\`) or set EVENTFLOW_MYSQL_DB to an existing one (E_EVENTFLOW_STORE_UNAVAILABLE)`,
    );
  });

  it('access denied names the user and EVENTFLOW_MYSQL_USER / EVENTFLOW_MYSQL_PASS; exit 5', async () => {
    const result = await finished(gateway([], mysql({ EVENTFLOW_MYSQL_USER: 'eventflow_nobody', EVENTFLOW_MYSQL_PASS: 'wrong', EVENTFLOW_MYSQL_DB: 'somedb' })));
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      `eventflow gateway cannot start: MySQL at ${mysqlServer.host}:${mysqlServer.port} refused user "eventflow_nobody" (database "somedb"): ER_ACCESS_DENIED_ERROR; check EVENTFLOW_MYSQL_USER and EVENTFLOW_MYSQL_PASS (E_EVENTFLOW_STORE_UNAVAILABLE)`,
    );
    expect(result.stderr).not.toContain('wrong');
  });

  it('an account that signs in by unix socket (as Debian\'s root@localhost) is named as such, with the user to make instead; exit 5', async () => {
    const db = await fresh();
    const user = `${db.name.slice(0, 20)}_s`;
    await db.query(`CREATE USER '${user}'@'%' IDENTIFIED VIA unix_socket`);
    try {
      const result = await finished(gateway([], mysql({ EVENTFLOW_MYSQL_USER: user, EVENTFLOW_MYSQL_PASS: '', EVENTFLOW_MYSQL_DB: db.name })));
      expect(result.code).toBe(5);
      // Before: "cannot use MySQL at …: the MySQL store could not open database … (ER_ACCESS_DENIED_NO_PASSWORD_ERROR); check the
      // database and the gateway log (ER_ACCESS_DENIED_NO_PASSWORD_ERROR); check the server and the EVENTFLOW_MYSQL_* variables".
      expect(result.firstError).toBe(
        `eventflow gateway cannot start: MySQL at ${mysqlServer.host}:${mysqlServer.port} refused user "${user}" (database "${db.name}"): ER_ACCESS_DENIED_NO_PASSWORD_ERROR, ` +
          "MariaDB's answer for an account that signs in as the system user of its name over the server's socket (unix_socket, as Debian's root@localhost does), which a gateway connecting over TCP cannot use, or for a user it does not know; " +
          `make a user with a password for the gateway (CREATE USER 'eventflow'@'%' IDENTIFIED BY '...'; GRANT ALL ON \`${db.name}\`.* TO 'eventflow'@'%') and set EVENTFLOW_MYSQL_USER and EVENTFLOW_MYSQL_PASS (E_EVENTFLOW_STORE_UNAVAILABLE)`,
      );
    } finally {
      await db.query(`DROP USER '${user}'@'%'`);
    }
  });

  it("an account over its connection limit names the limit and what to change, once; exit 5", async () => {
    const db = await fresh();
    const user = `${db.name.slice(0, 20)}_u`;
    await db.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'pw-limit' WITH MAX_USER_CONNECTIONS 1`);
    try {
      await db.query(`GRANT ALL ON \`${db.name}\`.* TO '${user}'@'%'`);
      const result = await finished(gateway([], mysql({ EVENTFLOW_MYSQL_USER: user, EVENTFLOW_MYSQL_PASS: 'pw-limit', EVENTFLOW_MYSQL_DB: db.name })));
      expect(result.code).toBe(5);
      // Before: the store's message and then the generic advice, the code twice ("… check the database and the gateway log (ER_USER_LIMIT_REACHED); check the server …").
      expect(result.firstError).toBe(
        `eventflow gateway cannot start: MySQL at ${mysqlServer.host}:${mysqlServer.port}: user "${user}" is over one of its account's resource limits (ER_USER_LIMIT_REACHED: MAX_USER_CONNECTIONS, or MAX_CONNECTIONS_, MAX_QUERIES_ or MAX_UPDATES_PER_HOUR); the gateway needs several connections (pools of up to EVENTFLOW_MYSQL_CONNECTION_LIMIT) and many statements: lift them (ALTER USER ... WITH MAX_USER_CONNECTIONS 0 MAX_QUERIES_PER_HOUR 0 ...), or set EVENTFLOW_MYSQL_USER to another user (E_EVENTFLOW_STORE_UNAVAILABLE)`,
      );
      expect(result.stderr).not.toContain('pw-limit');
    } finally {
      await db.query(`DROP USER '${user}'@'%'`);
    }
  });

  it('a failure the gateway has no words of its own for says the store\'s once, not followed by contrary advice', () => {
    const cause = Object.assign(new Error('Server shutdown in progress'), { code: 'ER_SERVER_SHUTDOWN', errno: 1053 });
    const wrapped = new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the MySQL store could not open database "shop" on db:3306 (ER_SERVER_SHUTDOWN); check the database and the gateway log', { cause });
    expect(storeUnavailable(wrapped, { kind: 'mysql', host: 'db', port: 3306, database: 'shop', user: 'app' }).message).toBe(
      'cannot use MySQL at db:3306 (database "shop", user "app"): the MySQL store could not open database "shop" on db:3306 (ER_SERVER_SHUTDOWN); check the database and the gateway log',
    );
  });

  it('the hub, MySQL unreachable: the same line as the gateway\'s, exit 5', async () => {
    const { server, port } = await listening();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const result = await finished(gateway(['hub'], mysql({ EVENTFLOW_MYSQL_PORT: port, EVENTFLOW_MYSQL_DB: 'somedb', EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: MASTER })));
    // Before: exit 1, "eventflow hub cannot start: the MySQL store could not open database "somedb" on …:… (ECONNREFUSED); the
    // database does not accept connections (down, or another host or port): the gateway tries again until it does (E_EVENTFLOW_STORE_FAILED)".
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      `eventflow hub cannot start: cannot reach MySQL at ${mysqlServer.host}:${port} (database "somedb", user "${mysqlServer.user}"): ECONNREFUSED; start the server, or set EVENTFLOW_MYSQL_HOST and EVENTFLOW_MYSQL_PORT to where it runs (E_EVENTFLOW_STORE_UNAVAILABLE)`,
    );
  });

  it('the hub says an EVENTFLOW_HUB_* variable it does not read, with the one it does (it was ignored without a word)', async () => {
    const db = await fresh();
    const env = { EVENTFLOW_MYSQL_DB: db.name, EVENTFLOW_HUB_PORT: 9, EVENTFLOW_HUB_INTERNAL_PROT: 9, EVENTFLOW_HUB_INTERNAL_PORT: 0 };
    const hub = gateway(['hub'], mysql({ ...env, EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: MASTER, EVENTFLOW_CERT_PASS_PBKDF2_ITERATIONS: 1000, EVENTFLOW_LOG_LEVEL: 'warn' }));
    try {
      await hub.printed('listening:');
      expect(hub.stderr().split('\n').slice(0, 2)).toEqual([
        'eventflow hub: EVENTFLOW_HUB_INTERNAL_PROT is not a variable of eventflow and is ignored; did you mean EVENTFLOW_HUB_INTERNAL_PORT?',
        'eventflow hub: EVENTFLOW_HUB_PORT is not a variable of eventflow and is ignored',
      ]);
    } finally {
      hub.proc.kill('SIGTERM');
      expect((await finished(hub)).code).toBe(0);
    }
  });

  it('a database whose eventflow tables cannot be upgraded: says so, and that the data is kept; exit 5', async () => {
    const db = await fresh();
    const first = gateway([], mysql({ EVENTFLOW_MYSQL_DB: db.name, EVENTFLOW_LOG_LEVEL: 'warn' }));
    await first.printed('clients:');
    first.proc.kill('SIGTERM');
    expect((await finished(first)).code).toBe(0);
    await db.query('ALTER TABLE eventflow_delivery DROP INDEX idx_delivery_attempts, DROP COLUMN attempts');
    const result = await finished(gateway([], mysql({ EVENTFLOW_MYSQL_DB: db.name })));
    expect(result.code).toBe(5);
    expect(result.firstError).toBe(
      `eventflow gateway cannot start: MySQL at ${mysqlServer.host}:${mysqlServer.port}: database "${db.name}" holds eventflow tables this gateway cannot open or upgrade: ` +
        "Key column 'attempts' doesn't exist in table (ER_KEY_COLUMN_DOES_NOT_EXITS); its data is kept as it is: repair those tables, restore a backup, or run the gateway version that wrote them " +
        '(another EVENTFLOW_MYSQL_DB starts on an empty store) (E_EVENTFLOW_STORE_UNAVAILABLE)',
    );
  });

  it("v4's EVENTFLOW_MYSQL_DB selects the database (not the default one)", async () => {
    const db = await fresh();
    const running = gateway([], mysql({ EVENTFLOW_MYSQL_DB: db.name, EVENTFLOW_LOG_LEVEL: 'warn' }));
    try {
      await running.printed('clients:');
      expect(running.stdout()).toContain(`database ${db.name}`);
      expect(await db.query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'event'")).toHaveLength(1);
    } finally {
      running.proc.kill('SIGTERM');
      expect((await finished(running)).code).toBe(0);
    }
  });
});

describe("eventflow v4's variable names", () => {
  it('EVENTFLOW_MYSQL_PASS and EVENTFLOW_MYSQL_DB are read by the gateway and the hub', () => {
    const v4 = { EVENTFLOW_MYSQL_PASS: 'pw', EVENTFLOW_MYSQL_DB: 'shop', EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: 'k' };
    expect(parseConfig(v4)).toMatchObject({ EVENTFLOW_MYSQL_PASSWORD: 'pw', EVENTFLOW_MYSQL_DATABASE: 'shop' });
    expect(parseHubConfig(v4).mysql).toMatchObject({ password: 'pw', database: 'shop' });
    // Both spellings with the same value are fine.
    expect(parseConfig({ ...v4, EVENTFLOW_MYSQL_DATABASE: 'shop' }).EVENTFLOW_MYSQL_DATABASE).toBe('shop');
  });

  it('both spellings with different values refuse the start, naming both (and no password)', () => {
    for (const parse of [parseConfig, parseHubConfig]) {
      expect(() => parse({ EVENTFLOW_MYSQL_DB: 'a', EVENTFLOW_MYSQL_DATABASE: 'b', EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: 'k' })).toThrow(
        expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG', message: expect.stringContaining("EVENTFLOW_MYSQL_DB (eventflow v4's name) and EVENTFLOW_MYSQL_DATABASE are both set, to different values") }),
      );
      let message = '';
      try {
        parse({ EVENTFLOW_MYSQL_PASS: 'secret-one', EVENTFLOW_MYSQL_PASSWORD: 'secret-two', EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: 'k' });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toContain('EVENTFLOW_MYSQL_PASS (eventflow v4\'s name) and EVENTFLOW_MYSQL_PASSWORD are both set');
      expect(message).not.toMatch(/secret-(one|two)/);
    }
  });

  it.each([
    ['EVENTFLOW_MYSQL_SOCKET_PATH', '/run/mysqld/mysqld.sock'],
    ['EVENTFLOW_MYSQL_SSL', 'Amazon RDS'],
    ['EVENTFLOW_MYSQL_TIMEZONE', '+02:00'],
    ['EVENTFLOW_MYSQL_CHARSET', 'latin1'],
    ['EVENTFLOW_SPOKE_SERDE', 'false'],
  ])('v4 variable %s=%s that we do not implement refuses the start instead of being ignored', (name, value) => {
    expect(() => parseConfig({ [name]: value })).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG', message: expect.stringContaining(name) }));
  });

  it("v4's defaults for those variables are accepted", () => {
    expect(() => parseConfig({ EVENTFLOW_MYSQL_TIMEZONE: 'Z', EVENTFLOW_MYSQL_CHARSET: 'utf8mb4' })).not.toThrow();
  });
});
