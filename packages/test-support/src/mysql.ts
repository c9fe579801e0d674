/**
 * A fresh MySQL/MariaDB database per test, dropped after it. The server is the one CI runs
 * (MariaDB on 127.0.0.1:3306, root, no password) unless EVENTFLOW_TEST_MYSQL_HOST/_PORT/_USER/
 * _PASSWORD say otherwise. When no server answers, `mysqlUnavailable` holds the reason and the
 * MySQL tests skip with it printed.
 */
import { randomBytes } from 'node:crypto';
import { afterEach } from 'vitest';
import { createConnection, type Connection, type ConnectionOptions, type RowDataPacket } from 'mysql2/promise';

const env = process.env;
export const server = {
  host: env.EVENTFLOW_TEST_MYSQL_HOST ?? '127.0.0.1',
  port: Number(env.EVENTFLOW_TEST_MYSQL_PORT ?? 3306),
  user: env.EVENTFLOW_TEST_MYSQL_USER ?? 'root',
  password: env.EVENTFLOW_TEST_MYSQL_PASSWORD ?? '',
};

async function probe(): Promise<string | undefined> {
  try {
    const connection = await createConnection({ ...server, connectTimeout: 3000 });
    await connection.query('SELECT 1');
    await connection.end();
    return undefined;
  } catch (error) {
    const code = (error as { code?: string }).code ?? String(error);
    return `no MySQL/MariaDB server answers at ${server.host}:${server.port} as ${server.user} (${code}); set EVENTFLOW_TEST_MYSQL_* to run them`;
  }
}

/** Why the MySQL tests cannot run here, or undefined when they can. */
export const mysqlUnavailable = await probe();
if (mysqlUnavailable !== undefined) console.warn(`Skipping the MySQL store tests: ${mysqlUnavailable}`);

/** What a MysqlStore (gateway/src/store/mysql/mysql.ts) needs to reach one test database. */
export interface TestDatabaseOptions {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

export interface TestDatabase {
  readonly name: string;
  /** Options for a MysqlStore on this database. */
  readonly options: TestDatabaseOptions;
  /**
   * A raw connection to this database, as a v4 peer or an inspector would have: DATETIMEs come
   * back as the stored text, JSON as text. Closed after the test.
   */
  connect(options?: ConnectionOptions): Promise<Connection>;
  /** One statement on a raw connection. */
  query<T = RowDataPacket>(sql: string, params?: unknown[]): Promise<T[]>;
}

/** Registers the clean-up and returns a factory of fresh databases for the tests of the calling suite. */
export function useTestDatabases(): { fresh(): Promise<TestDatabase>; onCleanup(close: () => Promise<unknown>): void } {
  const names: string[] = [];
  const closers: Array<() => Promise<unknown>> = [];

  afterEach(async () => {
    await Promise.allSettled(closers.splice(0).reverse().map((close) => close()));
    const admin = await createConnection(server);
    try {
      for (const name of names.splice(0)) await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    } finally {
      await admin.end();
    }
  });

  const fresh = async (): Promise<TestDatabase> => {
    const name = `eventflow_test_${randomBytes(6).toString('hex')}`;
    const admin = await createConnection(server);
    try {
      await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
    } finally {
      await admin.end();
    }
    names.push(name);
    let shared: Connection | undefined;
    const connect = async (options: ConnectionOptions = {}): Promise<Connection> => {
      const connection = await createConnection({ ...server, database: name, timezone: 'Z', dateStrings: true, jsonStrings: true, ...options });
      closers.push(() => connection.end());
      return connection;
    };
    return {
      name,
      options: { ...server, database: name },
      connect,
      async query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
        shared ??= await connect();
        const [rows] = await shared.query(sql, params);
        return rows as T[];
      },
    };
  };

  return { fresh, onCleanup: (close) => void closers.push(close) };
}

/** Gateway environment for the MySQL/MariaDB store on the given test database. */
export function mysqlGatewayEnv(options: { host?: string; port?: number; user?: string; password?: string; database?: string }): Record<string, string | number> {
  return {
    EVENTFLOW_STORE: 'mysql',
    EVENTFLOW_MYSQL_HOST: options.host ?? '127.0.0.1',
    EVENTFLOW_MYSQL_PORT: options.port ?? 3306,
    EVENTFLOW_MYSQL_USER: options.user ?? 'root',
    EVENTFLOW_MYSQL_PASSWORD: options.password ?? '',
    EVENTFLOW_MYSQL_DATABASE: options.database ?? '',
  };
}
