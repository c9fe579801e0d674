/** MysqlStores for tests on the test server's databases (@eventflow/test-support/mysql), closed by the suite's cleanup. */
import type { TestDatabase, useTestDatabases } from '@eventflow/test-support/mysql';
import { MysqlStore, type MysqlStoreOptions } from '../src/store/mysql/mysql.js';

/** Opens a MysqlStore on a database of `databases` (options over the database's own), initialised, closed at cleanup. */
export function storeOpener(databases: ReturnType<typeof useTestDatabases>): (db: TestDatabase, options?: Partial<MysqlStoreOptions>) => Promise<MysqlStore> {
  return async (db, options = {}) => {
    const store = new MysqlStore({ ...db.options, ...options });
    databases.onCleanup(() => store.close());
    await store.init();
    return store;
  };
}

/** The names of the store's routines in `db` that start with `prefix` (eventflow_append, eventflow_settle). */
export async function routines(db: TestDatabase, prefix: string): Promise<string[]> {
  const rows = await db.query<{ name: string }>(`SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME LIKE ? ORDER BY ROUTINE_NAME`, [`${prefix.replace(/_/g, '\\_')}%`]);
  return rows.map((row) => row.name);
}
