/** The SQLite store's tables: v4's, plus position, the schedule's due times, dead letters and state snapshots (see sqlite.ts). */
import type Database from 'better-sqlite3';
import { EventflowError } from '@eventflow/core';
import { SNAPSHOT_SCHEMA } from './snapshots.js';

export const SCHEMA_VERSION = 2;

/**
 * A file that a newer gateway wrote is refused before anything in it changes, saying what to run. Before,
 * the tables were altered first, and the refusal (E_EVENTFLOW_STORE_FAILED) was reported as a path
 * problem: "upgrade the gateway; set EVENTFLOW_SQLITE_PATH to a file in a directory this process can write".
 */
export function refuseNewerSchema(db: Database.Database, path: string): void {
  const meta = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'`).get();
  const version = meta === undefined ? 0 : Number((db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value?: string } | undefined)?.value ?? 0);
  if (version <= SCHEMA_VERSION) return;
  throw new EventflowError(
    'E_EVENTFLOW_STORE_UNAVAILABLE',
    `the SQLite database ${JSON.stringify(path)} has schema version ${version}, newer than the ${SCHEMA_VERSION} this gateway supports (a newer gateway wrote it); run that version or a newer one (the file is kept as it is)`,
  );
}

/**
 * Columns added to tables of files that older gateways created (ALTER TABLE … ADD COLUMN, at open).
 * Older gateways can still open such a file: they name the columns they read and write, and NULL is
 * what an event stored without a trace context holds.
 */
export const ADDED_COLUMNS: ReadonlyArray<readonly [table: string, column: string, ddl: string]> = [
  ['event', 'traceparent', 'traceparent TEXT NULL'],
  ['event', 'tracestate', 'tracestate TEXT NULL'],
];

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);

CREATE TABLE IF NOT EXISTS event (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  timestamp TEXT NOT NULL,
  domain TEXT NOT NULL,
  rid TEXT NULL REFERENCES event(id) ON DELETE SET NULL,
  pid TEXT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL,
  traceparent TEXT NULL, tracestate TEXT NULL
);
-- Partial (most events answer none): an append of an event without rid writes no page of it.
DROP INDEX IF EXISTS idx_rid;
CREATE INDEX IF NOT EXISTS idx_rid_set ON event (rid) WHERE rid IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_name ON event (name, position);
CREATE INDEX IF NOT EXISTS idx_domain ON event (domain, position);
CREATE INDEX IF NOT EXISTS idx_domain_pid ON event (domain, pid, position);

CREATE TABLE IF NOT EXISTS event_cpid (
  event_id TEXT NOT NULL REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  domain TEXT NOT NULL, cpid TEXT NOT NULL,
  PRIMARY KEY (event_id, domain, cpid)
);
CREATE INDEX IF NOT EXISTS idx_domain_cpid ON event_cpid (domain, cpid);

CREATE TABLE IF NOT EXISTS event_eid (
  event_id TEXT NOT NULL REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  eid TEXT NOT NULL, PRIMARY KEY (event_id, eid)
);
CREATE INDEX IF NOT EXISTS idx_eid ON event_eid (eid);

CREATE TABLE IF NOT EXISTS event_published (
  event_id TEXT NOT NULL PRIMARY KEY REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  published TEXT NOT NULL, publisher TEXT NOT NULL, consumer TEXT NULL, hub TEXT NULL,
  consumed_hub TEXT NULL, consumed_spoke TEXT NULL,
  success TEXT NULL, failed TEXT NULL, orphan TEXT NULL
);
-- v4's indexes on these columns serve its hubs' sweeps, which run on MySQL only; here the one query
-- is the count of claims without an outcome (catalog.ts). Each index is a page more in every append's
-- commit (a steady 500 jobs/s wrote ~28 WAL pages a job), so only the rows that query counts are indexed.
DROP INDEX IF EXISTS idx_published;
DROP INDEX IF EXISTS idx_consumed_hub;
DROP INDEX IF EXISTS idx_consumed_spoke;
CREATE INDEX IF NOT EXISTS idx_consumed_open ON event_published (consumed_spoke) WHERE consumed_spoke IS NOT NULL AND success IS NULL AND failed IS NULL;

CREATE TABLE IF NOT EXISTS event_scheduled (
  event_id TEXT NOT NULL PRIMARY KEY REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  timestamp TEXT NOT NULL, scheduled TEXT NOT NULL, executed TEXT NULL, success TEXT NULL, failed TEXT NULL
);
CREATE INDEX IF NOT EXISTS idx_scheduled_due ON event_scheduled (executed, scheduled);

CREATE TABLE IF NOT EXISTS eventflow_dead_letter (
  event_id TEXT NOT NULL PRIMARY KEY REFERENCES event(id) ON DELETE CASCADE ON UPDATE CASCADE,
  attempts INTEGER NOT NULL, reason TEXT NOT NULL, at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_dead_letter_at ON eventflow_dead_letter (at);
${SNAPSHOT_SCHEMA}`;

