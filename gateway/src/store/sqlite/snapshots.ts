/** The SQLite store's state snapshots (see ../snapshots.ts): the table, its trigger, and its reads and writes. */
import type Database from 'better-sqlite3';
import type { JsonObject, Position, StoredEvent } from '@eventflow/core';
import type { SnapshotRead, SnapshotStore } from '../snapshots.js';
import { deferred, immediate } from './transactions.js';

/**
 * Created by init() with the rest of the schema. The trigger drops a snapshot in the transaction
 * that deletes an event it covers (delete, deleteEventlog, or anyone's DELETE on the file, whatever
 * gateway version runs it). No v4 peer writes a SQLite file, and positions only grow (AUTOINCREMENT;
 * a fired event moves up, by UPDATE): so a snapshot row that exists is valid, and a read needs no
 * count of the covered events (that count, 100,000 index entries for a long process, would be most
 * of the read). The count is checked when a snapshot is stored instead, in the write's transaction,
 * against a delete that came between the read it was folded from and the write.
 */
export const SNAPSHOT_SCHEMA = `
CREATE TABLE IF NOT EXISTS eventflow_snapshot (
  domain TEXT NOT NULL, pid TEXT NOT NULL,
  position INTEGER NOT NULL, count INTEGER NOT NULL, state TEXT NOT NULL, at TEXT NOT NULL,
  PRIMARY KEY (domain, pid)
);
CREATE TRIGGER IF NOT EXISTS eventflow_snapshot_on_delete AFTER DELETE ON event BEGIN
  DELETE FROM eventflow_snapshot WHERE domain = old.domain AND pid = old.pid AND position >= old.position;
END;
`;

type Stream = { domain: string; pid: string };

export class SqliteSnapshots implements SnapshotStore {
  readonly #db: Database.Database;
  readonly #eventlog: (domain: string, pid: string, after: Position) => StoredEvent[];
  readonly #read;
  readonly #covered;
  readonly #write;

  /** `eventlog` is the store's readEventlog, synchronous (it runs inside this module's read transaction). */
  constructor(db: Database.Database, eventlog: (domain: string, pid: string, after: Position) => StoredEvent[]) {
    this.#db = db;
    this.#eventlog = eventlog;
    this.#read = db.prepare<[Stream], { position: number; count: number; state: string }>(
      'SELECT position, count, state FROM eventflow_snapshot WHERE domain = @domain AND pid = @pid',
    );
    // The events at or before a position, as countEventlog counts them (unfired scheduled ones left out): one range of
    // idx_domain_pid less the unfired scheduled events (CROSS JOIN makes SQLite start from those, not from every event).
    this.#covered = db.prepare<[Stream & { position: number }], { count: number }>(
      `SELECT (SELECT COUNT(*) FROM event WHERE domain = @domain AND pid = @pid AND position <= @position)
            - (SELECT COUNT(*) FROM event_scheduled z CROSS JOIN event e ON e.id = z.event_id
               WHERE z.executed IS NULL AND e.domain = @domain AND e.pid = @pid AND e.position <= @position) AS count`,
    );
    this.#write = db.prepare<[Stream & { position: number; count: number; state: string; at: string }]>(
      `INSERT OR REPLACE INTO eventflow_snapshot (domain, pid, position, count, state, at) VALUES (@domain, @pid, @position, @count, @state, @at)`,
    );
  }

  async readSnapshot(domain: string, pid: string): Promise<SnapshotRead> {
    // One read transaction: the snapshot and the events after it see the same database.
    return deferred(this.#db, (): SnapshotRead => {
      const row = this.#read.get({ domain, pid });
      if (row !== undefined) {
        const snapshot = { count: row.count, position: row.position, state: JSON.parse(row.state) as JsonObject };
        return { snapshot, events: this.#eventlog(domain, pid, row.position) };
      }
      return { snapshot: undefined, events: this.#eventlog(domain, pid, 0) };
    });
  }

  async writeSnapshot(domain: string, pid: string, snapshot: { count: number; position: Position; state: string }): Promise<void> {
    const { count, position, state } = snapshot;
    // Checked in the write's transaction: a covered event deleted since the read must not come back in a snapshot.
    immediate(this.#db, () => {
      if (this.#covered.get({ domain, pid, position })?.count === count) this.#write.run({ domain, pid, position, count, state, at: new Date().toISOString() });
    });
  }
}
