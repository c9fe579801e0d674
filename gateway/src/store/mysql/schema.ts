/**
 * The MySQL/MariaDB schema: eventflow v4's eight tables exactly as a v4 hub creates them
 * (eventflow-v4.md §2; charsets ascii/ascii_bin, log.message utf8mb4, v4's DEFAULT clauses and
 * partitions), then the gateway's own tables. Everything is CREATE TABLE IF NOT EXISTS: a table a
 * v4 hub (or another gateway) created first is left exactly as it is, rows included.
 *
 * v4's tables are never altered. What the gateway needs beyond them lives in tables of its own,
 * prefixed `eventflow_`, which v4 peers never read:
 *   - eventflow_sequence: the position counter; its row lock serialises position assignment.
 *   - eventflow_position: the position of each event (v4's `event` has none). Events written by
 *     v4 spokes get theirs lazily (see MysqlStore).
 *   - eventflow_schedule: the due time with milliseconds; v4's `event_scheduled.scheduled` is a
 *     DATETIME of whole seconds, so it holds the due time rounded up (nothing fires early).
 *   - eventflow_dead_letter: events failed because their last delivery attempt was not settled
 *     (consume leases, see delivery/dispatcher.ts); v4's `failed` column is set as well.
 *   - eventflow_snapshot: the latest composed state of a process (../snapshots.ts).
 * Also here: the two statements on the sequence row that every position assignment uses.
 */
import type { Pool, PoolConnection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { EventflowError } from '@eventflow/core';

const ASCII = `ENGINE=InnoDB
DEFAULT CHARACTER SET ascii
DEFAULT COLLATE ascii_bin`;

/** v4's tables, in v4's creation order (the order satisfies the foreign keys). */
export const V4_TABLES: ReadonlyArray<readonly [name: string, ddl: string]> = [
  [
    'certificate',
    `CREATE TABLE IF NOT EXISTS certificate
(
  created   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  version   INT UNSIGNED  NOT NULL DEFAULT 0,
  id        VARCHAR(64)   NOT NULL,
  cert      TEXT          NOT NULL,
  \`key\`     BLOB          NOT NULL,
  key_iv    VARBINARY(16) NOT NULL,
  key_salt  VARBINARY(16) NOT NULL,
  key_tag   VARBINARY(16) NOT NULL,
  pass      BLOB          NOT NULL,
  pass_iv   VARBINARY(16) NOT NULL,
  pass_salt VARBINARY(16) NOT NULL,
  pass_tag  VARBINARY(16) NOT NULL,
  validity  DATETIME      NOT NULL,
  revoked   DATETIME          NULL,

  PRIMARY KEY (version, id)
)
${ASCII}
PARTITION BY RANGE (version)
(
  PARTITION p_hot   VALUES LESS THAN (1),
  PARTITION p_cold  VALUES LESS THAN MAXVALUE
)`,
  ],
  [
    'hub',
    `CREATE TABLE IF NOT EXISTS hub
(
  id            VARCHAR(64)       NOT NULL,
  timestamp     DATETIME          NOT NULL DEFAULT CURRENT_TIMESTAMP(),
  external_ip   VARCHAR(16)       NOT NULL,
  external_port SMALLINT UNSIGNED NOT NULL,
  internal_ip   VARCHAR(16)       NOT NULL,
  internal_port SMALLINT UNSIGNED NOT NULL,
  quit          DATETIME              NULL,

  PRIMARY KEY (id),
  INDEX idx_timestamp (timestamp),
  INDEX idx_external_ip_port (external_ip, external_port),
  INDEX idx_internal_ip_port (internal_ip, internal_port)
)
${ASCII}`,
  ],
  [
    'event',
    `CREATE TABLE IF NOT EXISTS event
(
  id        VARCHAR(64) NOT NULL,
  timestamp DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  domain    VARCHAR(64) NOT NULL,
  rid       VARCHAR(64)     NULL,
  pid       VARCHAR(64) NOT NULL,
  name      VARCHAR(64) NOT NULL,
  data      JSON        NOT NULL,

  PRIMARY KEY (id),
  FOREIGN KEY (rid) REFERENCES event (id) ON DELETE SET NULL,

  INDEX idx_rid         (rid),
  INDEX idx_name        (name, timestamp),
  INDEX idx_domain      (domain, timestamp),
  INDEX idx_domain_pid  (domain, pid, timestamp)
)
${ASCII}`,
  ],
  [
    'event_cpid',
    `CREATE TABLE IF NOT EXISTS event_cpid
(
  event_id  VARCHAR(64) NOT NULL,
  domain    VARCHAR(64) NOT NULL,
  cpid      VARCHAR(64) NOT NULL,

  PRIMARY KEY (event_id, domain, cpid),
  FOREIGN KEY (event_id) REFERENCES event (id)
    ON UPDATE CASCADE
    ON DELETE CASCADE,
  INDEX idx_domain_cpid (domain, cpid)
)
${ASCII}`,
  ],
  [
    'event_eid',
    `CREATE TABLE IF NOT EXISTS event_eid
(
  event_id  VARCHAR(64) NOT NULL,
  eid       VARCHAR(64) NOT NULL,

  PRIMARY KEY (event_id, eid),
  FOREIGN KEY (event_id) REFERENCES event (id)
    ON UPDATE CASCADE
    ON DELETE CASCADE,
  INDEX idx_eid (eid)
)
${ASCII}`,
  ],
  [
    'event_published',
    `CREATE TABLE IF NOT EXISTS event_published
(
  event_id        VARCHAR(64) NOT NULL,
  published       DATETIME    NOT NULL DEFAULT CURRENT_TIMESTAMP(),
  publisher       VARCHAR(64) NOT NULL,
  consumer        VARCHAR(64)     NULL,
  hub             VARCHAR(64)     NULL,
  consumed_hub    DATETIME        NULL,
  consumed_spoke  DATETIME        NULL,
  success         DATETIME        NULL,
  failed          DATETIME        NULL,
  orphan          DATETIME        NULL,

  PRIMARY KEY (event_id),
  FOREIGN KEY (hub)       REFERENCES hub    (id),
  FOREIGN KEY (event_id)  REFERENCES event  (id)
    ON UPDATE CASCADE
    ON DELETE CASCADE,
  INDEX idx_published       (published),
  INDEX idx_consumed_hub    (consumed_hub),
  INDEX idx_consumed_spoke  (consumed_spoke)
)
${ASCII}`,
  ],
  [
    'event_scheduled',
    `CREATE TABLE IF NOT EXISTS event_scheduled
(
  event_id    VARCHAR(64) NOT NULL,
  timestamp   DATETIME    NOT NULL DEFAULT CURRENT_TIMESTAMP(),
  scheduled   DATETIME    NOT NULL,
  executed    DATETIME        NULL,
  success     DATETIME        NULL,
  failed      DATETIME        NULL,

  PRIMARY KEY (event_id),
  FOREIGN KEY (event_id) REFERENCES event (id)
    ON UPDATE CASCADE
    ON DELETE CASCADE,
  INDEX idx_timestamp   (timestamp),
  INDEX idx_scheduled   (scheduled),
  INDEX idx_executed    (executed),
  INDEX idx_success     (success),
  INDEX idx_failed      (failed)
)
${ASCII}`,
  ],
  [
    'log',
    `CREATE TABLE IF NOT EXISTS log
(
  timestamp DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  agent     VARCHAR(64) NOT NULL,
  message   TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
  error     JSON        NOT NULL,
  INDEX idx_timestamp (timestamp),
  INDEX idx_agent (agent)
)
${ASCII}
PARTITION BY RANGE (TO_DAYS(timestamp))
(
  PARTITION p_hot VALUES LESS THAN MAXVALUE
)`,
  ],
];

/**
 * The gateway's own tables. `eventId` is the column type of `event.id` as found in the database,
 * so that the foreign keys also hold on a v4 database whose tables predate ascii_bin.
 */
export function ownTables(eventId: string): ReadonlyArray<readonly [name: string, ddl: string]> {
  return [
    [
      'eventflow_sequence',
      `CREATE TABLE IF NOT EXISTS eventflow_sequence
(
  name  VARCHAR(32)     NOT NULL,
  value BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (name)
)
${ASCII}`,
    ],
    [
      'eventflow_position',
      `CREATE TABLE IF NOT EXISTS eventflow_position
(
  position BIGINT UNSIGNED NOT NULL,
  event_id ${eventId} NOT NULL,
  traceparent VARCHAR(55) NULL,
  tracestate  VARCHAR(512) NULL,
  PRIMARY KEY (position),
  UNIQUE KEY uniq_event_id (event_id),
  FOREIGN KEY (event_id) REFERENCES event (id)
    ON UPDATE CASCADE
    ON DELETE CASCADE
)
${ASCII}`,
    ],
    [
      'eventflow_schedule',
      `CREATE TABLE IF NOT EXISTS eventflow_schedule
(
  event_id ${eventId} NOT NULL,
  due      DATETIME(3) NOT NULL,
  PRIMARY KEY (event_id),
  FOREIGN KEY (event_id) REFERENCES event (id)
    ON UPDATE CASCADE
    ON DELETE CASCADE
)
${ASCII}`,
    ],
    [
      'eventflow_dead_letter',
      `CREATE TABLE IF NOT EXISTS eventflow_dead_letter
(
  event_id ${eventId} NOT NULL,
  attempts INT UNSIGNED NOT NULL,
  reason   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  at       DATETIME(3)  NOT NULL,
  PRIMARY KEY (event_id),
  INDEX idx_dead_letter_at (at),
  FOREIGN KEY (event_id) REFERENCES event (id)
    ON UPDATE CASCADE
    ON DELETE CASCADE
)
${ASCII}`,
    ],
    [
      // State snapshots (../snapshots.ts). The state is text, not JSON: MySQL's JSON type reorders keys.
      'eventflow_snapshot',
      `CREATE TABLE IF NOT EXISTS eventflow_snapshot
(
  domain   VARCHAR(64)     NOT NULL,
  pid      VARCHAR(64)     NOT NULL,
  position BIGINT UNSIGNED NOT NULL,
  count    INT UNSIGNED    NOT NULL,
  event_id ${eventId} NOT NULL,
  state    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  at       DATETIME(3)     NOT NULL,
  PRIMARY KEY (domain, pid),
  FOREIGN KEY (event_id) REFERENCES event (id)
    ON UPDATE CASCADE
    ON DELETE CASCADE
)
${ASCII}`,
    ],
  ];
}

/**
 * Columns added to the gateway's own tables since they were first made (ADD COLUMN at the end, NULL:
 * instant on MySQL 8 and MariaDB 10.6). Older gateways name the columns they write, so they keep
 * working beside newer ones: their events simply carry no trace context.
 */
const ADDED_COLUMNS: ReadonlyArray<readonly [table: string, column: string, ddl: string]> = [
  ['eventflow_position', 'traceparent', 'traceparent VARCHAR(55) NULL'],
  ['eventflow_position', 'tracestate', 'tracestate VARCHAR(512) NULL'],
];

async function addColumns(pool: Pool): Promise<void> {
  const [found] = await pool.query<RowDataPacket[]>(
    `SELECT TABLE_NAME AS \`table\`, COLUMN_NAME AS \`column\` FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?)`,
    [[...new Set(ADDED_COLUMNS.map(([table]) => table))]],
  );
  for (const [table, column, ddl] of ADDED_COLUMNS) {
    if (found.some((row) => row.table === table && row.column === column)) continue;
    // Another gateway starting at once may add it first.
    await pool.query(`ALTER TABLE ${table} ADD COLUMN ${ddl}`).catch((error: unknown) => {
      if ((error as { code?: unknown }).code !== 'ER_DUP_FIELDNAME') throw error;
    });
  }
}

/** The definition of event.id as found, e.g. `varchar(64)`, `ascii`, `ascii_bin`. */
const EVENT_ID_COLUMN = `SELECT COLUMN_TYPE AS type, CHARACTER_SET_NAME AS charset, COLLATION_NAME AS collation
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'event' AND COLUMN_NAME = 'id'`;

/** Creates the missing tables, v4's first, and the sequence row. Safe to run again, and by several gateways at once. */
export async function createSchema(pool: Pool): Promise<void> {
  for (const [, ddl] of V4_TABLES) await pool.query(ddl);
  const [[column]] = await pool.query<RowDataPacket[]>(EVENT_ID_COLUMN);
  const word = /^[A-Za-z0-9_()]+$/;
  if (!column || ![column.type, column.charset, column.collation].every((part) => typeof part === 'string' && word.test(part))) {
    throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the table `event` lacks the v4 column `id`; is this an eventflow v4 database?');
  }
  for (const [, ddl] of ownTables(`${column.type} CHARACTER SET ${column.charset} COLLATE ${column.collation}`)) await pool.query(ddl);
  await addColumns(pool);
  // Never below an assigned position, even if the sequence row was lost.
  const [[max]] = await pool.query<RowDataPacket[]>('SELECT COALESCE(MAX(position), 0) AS max FROM eventflow_position');
  const highest = Number(max?.max ?? 0);
  await pool.execute(`INSERT INTO eventflow_sequence (name, value) VALUES ('event', ?) ON DUPLICATE KEY UPDATE value = GREATEST(value, ?)`, [highest, highest]);
}

/** The tables the store writes (publishes, the ledger's claims and settles), each with a column of it. */
const WRITTEN: ReadonlyArray<readonly [table: string, column: string]> = [
  ['event', 'id'],
  ['event_published', 'event_id'],
  ['eventflow_position', 'event_id'],
  ['event_scheduled', 'event_id'],
  ['eventflow_schedule', 'event_id'],
  ['eventflow_group', 'domain'],
  ['eventflow_delivery', 'event_id'],
  ['eventflow_dead_letter', 'event_id'],
];

/**
 * The store's write check (MysqlStore.checkWrites), in the caller's transaction: the sequence row written as it was,
 * then an UPDATE of each table the store writes that matches no row. A read-only server refuses each, a table dropped
 * or renamed fails its own: checking the sequence alone found the store writable while every claim and settle failed.
 */
export async function checkWritable(conn: PoolConnection): Promise<void> {
  await conn.query(`UPDATE eventflow_sequence SET value = value WHERE name = 'event'`);
  for (const [table, column] of WRITTEN) await conn.query(`UPDATE ${table} SET ${column} = ${column} WHERE FALSE`);
}

/**
 * Locks the sequence row until the transaction ends and returns the highest position assigned so
 * far. Every transaction that assigns positions starts with this (see positions.ts).
 */
export async function lockSequence(conn: PoolConnection): Promise<number> {
  const [[row]] = await conn.execute<RowDataPacket[]>(`SELECT value FROM eventflow_sequence WHERE name = 'event' FOR UPDATE`);
  if (row === undefined) throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'eventflow_sequence lost its row; restart the gateway to restore it');
  return Number(row.value);
}

/**
 * lockSequence and setSequence in one statement, for a transaction that knows how many positions it will take at
 * most: locks the sequence row until the transaction ends, raises it by `count` (LAST_INSERT_ID(expr) hands the new
 * value back in the statement's answer), and returns the value before, the highest position assigned so far.
 */
export async function reserveSequence(conn: PoolConnection, count: number): Promise<number> {
  const [result] = await conn.execute<ResultSetHeader>(`UPDATE eventflow_sequence SET value = LAST_INSERT_ID(value + ?) WHERE name = 'event'`, [count]);
  if (result.affectedRows !== 1) throw new EventflowError('E_EVENTFLOW_STORE_FAILED', 'eventflow_sequence lost its row; restart the gateway to restore it');
  return Number(result.insertId) - count;
}

/** Records the highest position assigned; the row must be locked by this transaction. */
export async function setSequence(conn: PoolConnection, value: number): Promise<void> {
  await conn.execute(`UPDATE eventflow_sequence SET value = ? WHERE name = 'event'`, [value]);
}
