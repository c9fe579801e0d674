/**
 * The MySQL ledger's tables (store/ledger.ts), created or upgraded from what older gateways created
 * at init (safe to run again, and by several gateways at once), and its pools.
 */
import type { Pool } from 'mysql2/promise';
import { openPool, type MysqlStoreOptions } from './db.js';
import { select } from './statements.js';

const ASCII = 'ENGINE=InnoDB DEFAULT CHARACTER SET ascii DEFAULT COLLATE ascii_bin';

/** Not foreign keys on `event`: the ledger's reads join `event`, so rows of a deleted event are never delivered. */
const TABLES = [
  `CREATE TABLE IF NOT EXISTS eventflow_group (
  domain VARCHAR(64) NOT NULL, name VARCHAR(64) NOT NULL, grp VARCHAR(64) NOT NULL,
  created_position BIGINT UNSIGNED NOT NULL, created_at DATETIME(3) NOT NULL,
  ordered TINYINT NOT NULL DEFAULT 0, materialized BIGINT UNSIGNED NULL,
  PRIMARY KEY (domain, name, grp)
) ${ASCII}`,
  `CREATE TABLE IF NOT EXISTS eventflow_delivery (
  event_id VARCHAR(64) NOT NULL, domain VARCHAR(64) NOT NULL, gname VARCHAR(64) NOT NULL, grp VARCHAR(64) NOT NULL,
  delivery VARCHAR(96) NULL, owner VARCHAR(64) NULL, deadline BIGINT NULL, available_at BIGINT NULL,
  attempts INT UNSIGNED NOT NULL DEFAULT 0, outcome VARCHAR(16) NULL, last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  updated DATETIME(3) NOT NULL,
  position BIGINT UNSIGNED NULL, pid VARCHAR(64) NULL, name VARCHAR(64) NULL,
  PRIMARY KEY (event_id, gname, grp),
  INDEX idx_delivery_id (delivery),
  INDEX idx_delivery_owner (owner, outcome)
) ${ASCII}`,
];

/** Columns the work engine and tracing added to tables that older gateways created. */
const ADDED: ReadonlyArray<readonly [table: string, column: string, ddl: string]> = [
  ['eventflow_group', 'ordered', 'ordered TINYINT NOT NULL DEFAULT 0'],
  ['eventflow_group', 'materialized', 'materialized BIGINT UNSIGNED NULL'],
  ['eventflow_delivery', 'position', 'position BIGINT UNSIGNED NULL'],
  ['eventflow_delivery', 'pid', 'pid VARCHAR(64) NULL'],
  ['eventflow_delivery', 'name', 'name VARCHAR(64) NULL'],
  // When its current (or last) delivery began and when a delivery of it last ended, in ms (tracing: queue and handler time).
  ['eventflow_delivery', 'claimed_at', 'claimed_at BIGINT NULL'],
  ['eventflow_delivery', 'settled_at', 'settled_at BIGINT NULL'],
];

/**
 * The queue (a group's unsettled rows in position order), the first unsettled row of each pid
 * (ordered groups), the counts of the `groups` listing, and deleting a group.
 */
const INDEXES: ReadonlyArray<readonly [name: string, columns: string]> = [
  // `deadline` before `position`: a claim's locking read ranges over the rows with no lease (NULL)
  // only. InnoDB keeps the lock of every row a locking read examines, SKIP LOCKED or not, matching or
  // not: a range over leased rows would hold the rows that settles are writing until the claim commits.
  ['idx_delivery_queue', '(domain, gname, grp, outcome, deadline, position)'],
  ['idx_delivery_pid', '(domain, gname, grp, pid, position)'],
  ['idx_delivery_state', '(outcome, domain, gname, grp)'],
  ['idx_delivery_attempts', '(attempts)'],
  // The latency view (catalog readLatency): an event name's settled rows by settle time.
  ['idx_delivery_settled', '(domain, name, settled_at)'],
];

/** Creates the missing tables, columns and indexes of the ledger. */
export async function createLedgerTables(setup: Pool): Promise<void> {
    for (const ddl of TABLES) await setup.query(ddl);
    const columns = await select<{ table: string; column: string }>(
      setup,
      `SELECT TABLE_NAME AS \`table\`, COLUMN_NAME AS \`column\` FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('eventflow_group', 'eventflow_delivery')`,
    );
    for (const [table, column, ddl] of ADDED) {
      if (columns.some((found) => found.table === table && found.column === column)) continue;
      await ignoreDuplicate(setup.query(`ALTER TABLE ${table} ADD COLUMN ${ddl}`));
      if (table === 'eventflow_delivery' && column === 'name') {
        // Rows written before the queue columns existed: from their event.
        await setup.query(
          `UPDATE eventflow_delivery d JOIN event e ON e.id = d.event_id LEFT JOIN eventflow_position x ON x.event_id = e.id
           SET d.position = x.position, d.pid = e.pid, d.name = e.name WHERE d.position IS NULL`,
        );
      }
    }
    const indexes = await select<{ name: string }>(setup, `SELECT DISTINCT INDEX_NAME AS name FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'eventflow_delivery'`);
    for (const [name, definition] of INDEXES) if (!indexes.some((index) => index.name === name)) await ignoreDuplicate(setup.query(`ALTER TABLE eventflow_delivery ADD INDEX ${name} ${definition}`));
    if (indexes.some((index) => index.name === 'idx_delivery_group')) await setup.query(`ALTER TABLE eventflow_delivery DROP INDEX idx_delivery_group`).catch(() => undefined);
    // A dead letter's reason is the handler's error, any text: not ASCII (tables of older gateways).
    await setup.query(`ALTER TABLE eventflow_dead_letter MODIFY reason VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL`);
  }

/** An ALTER that another gateway starting at the same time made first. */
async function ignoreDuplicate(statement: Promise<unknown>): Promise<void> {
  await statement.catch((error: unknown) => {
    const code = (error as { code?: unknown }).code;
    if (code !== 'ER_DUP_FIELDNAME' && code !== 'ER_DUP_KEYNAME') throw error;
  });
}

/** A pool of the ledger's own: the store's session set-up, and READ COMMITTED (see the header). */
export function openLedgerPool(options: MysqlStoreOptions, autocommit: boolean): Pool {
  return openPool(options, 6, autocommit, true);
}
