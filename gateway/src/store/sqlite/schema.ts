/** The SQLite store's tables: v4's, plus position, the schedule's due times, dead letters and state snapshots (see sqlite.ts). */
import { SNAPSHOT_SCHEMA } from './snapshots.js';

export const SCHEMA_VERSION = 2;

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
CREATE INDEX IF NOT EXISTS idx_rid ON event (rid);
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
CREATE INDEX IF NOT EXISTS idx_published ON event_published (published);
CREATE INDEX IF NOT EXISTS idx_consumed_hub ON event_published (consumed_hub);
CREATE INDEX IF NOT EXISTS idx_consumed_spoke ON event_published (consumed_spoke);

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

