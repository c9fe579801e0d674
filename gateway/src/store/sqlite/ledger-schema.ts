/** The SQLite delivery ledger's tables and indexes (ledger.ts creates them, and the columns and indexes later versions added, at open). */
export const TABLES = `
CREATE TABLE IF NOT EXISTS eventflow_group (
  domain TEXT NOT NULL, name TEXT NOT NULL, grp TEXT NOT NULL,
  created_position INTEGER NOT NULL, created_at TEXT NOT NULL,
  PRIMARY KEY (domain, name, grp)
);
CREATE TABLE IF NOT EXISTS eventflow_delivery (
  event_id TEXT NOT NULL REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  domain TEXT NOT NULL, gname TEXT NOT NULL, grp TEXT NOT NULL,
  delivery TEXT NULL, owner TEXT NULL, deadline INTEGER NULL, available_at INTEGER NULL,
  attempts INTEGER NOT NULL DEFAULT 0, outcome TEXT NULL, last_error TEXT NULL, updated TEXT NOT NULL,
  PRIMARY KEY (event_id, gname, grp)
);`;

/** Columns added by the work engine (schema version 2) and by tracing to tables that older gateways created. */
export const ADDED: ReadonlyArray<readonly [table: string, column: string, ddl: string]> = [
  ['eventflow_group', 'ordered', 'ordered INTEGER NOT NULL DEFAULT 0'],
  ['eventflow_group', 'materialized', 'materialized INTEGER NULL'],
  ['eventflow_delivery', 'position', 'position INTEGER NULL'],
  ['eventflow_delivery', 'pid', 'pid TEXT NULL'],
  ['eventflow_delivery', 'name', 'name TEXT NULL'],
  // When its current (or last) delivery began and when a delivery of it last ended, in ms (tracing: queue and handler time).
  ['eventflow_delivery', 'claimed_at', 'claimed_at INTEGER NULL'],
  ['eventflow_delivery', 'settled_at', 'settled_at INTEGER NULL'],
];

/**
 * Partial indexes: the queue and the per-pid order hold only unsettled rows, so neither a claim nor
 * a count of what is pending grows with the group's history.
 */
export const INDEXES = `
DROP INDEX IF EXISTS idx_delivery_group;
DROP INDEX IF EXISTS idx_delivery_id;
DROP INDEX IF EXISTS idx_delivery_owner;
CREATE INDEX IF NOT EXISTS idx_delivery_open ON eventflow_delivery (delivery) WHERE outcome IS NULL AND delivery IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_delivery_groupkey ON eventflow_delivery (domain, gname, grp);
DROP INDEX IF EXISTS idx_delivery_queue;
CREATE INDEX IF NOT EXISTS idx_delivery_free ON eventflow_delivery (domain, gname, grp, deadline, position) WHERE outcome IS NULL;
-- Rows carry their pid only where an ordered group reads them (pidScope): the index is two random
-- pages a job (its insert, its delete) that an unordered group never reads.
DROP INDEX IF EXISTS idx_delivery_pid;
CREATE INDEX IF NOT EXISTS idx_delivery_pid_ordered ON eventflow_delivery (domain, gname, grp, pid, position) WHERE outcome IS NULL AND pid IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_delivery_dead ON eventflow_delivery (updated) WHERE outcome = 'dead';
CREATE INDEX IF NOT EXISTS idx_delivery_redelivered ON eventflow_delivery (domain, gname, grp) WHERE attempts > 1;
-- The latency view (catalog readLatency): settled rows of an event name by settle time; a row enters it once, with its outcome.
CREATE INDEX IF NOT EXISTS idx_delivery_settled ON eventflow_delivery (domain, name, settled_at) WHERE outcome IS NOT NULL;
`;
