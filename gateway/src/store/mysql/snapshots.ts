/**
 * The MySQL store's state snapshots (see ../snapshots.ts), in the gateway's own table
 * eventflow_snapshot (schema.ts), which v4 peers never read.
 *
 * v4 spokes write `event` directly: their rows have no position until a read positions them, after
 * everything positioned so far (positions.ts). The events after a snapshot are read through the
 * store's readEventlog, which positions first, so such rows join the events after the snapshot;
 * the count check (the eventlog's count = the snapshot's + the events after it) catches what else
 * happened behind the gateway's back (a v4 delete, a row positioned between the two reads) and
 * answers with the full fold. The snapshot row also goes, by its foreign key, with its last event.
 */
import type { Pool } from 'mysql2/promise';
import type { JsonObject, Position, StoredEvent } from '@eventflow/core';
import { affected, select } from './statements.js';
import type { SnapshotRead } from '../snapshots.js';

/** What the snapshot reads use of the store: its positioning reads. */
export interface EventlogReads {
  readEventlog(domain: string, pid: string, after?: Position): Promise<StoredEvent[]>;
  countEventlog(domain: string, pid: string): Promise<number>;
}

type SnapshotRow = { position: number | string; count: number | string; state: string | Buffer };

export async function readSnapshot(pool: Pool, store: EventlogReads, domain: string, pid: string): Promise<SnapshotRead> {
  const [row] = await select<SnapshotRow>(pool, 'SELECT position, count, state FROM eventflow_snapshot WHERE domain = ? AND pid = ?', [domain, pid]);
  if (row !== undefined) {
    const position = Number(row.position);
    const count = Number(row.count);
    const events = await store.readEventlog(domain, pid, position);
    if ((await store.countEventlog(domain, pid)) === count + events.length) {
      const state = JSON.parse(typeof row.state === 'string' ? row.state : row.state.toString('utf8')) as JsonObject;
      return { snapshot: { count, position, state }, events };
    }
  }
  return { snapshot: undefined, events: await store.readEventlog(domain, pid) };
}

export async function writeSnapshot(pool: Pool, domain: string, pid: string, snapshot: { count: number; position: Position; eventId: string; state: string }): Promise<void> {
  const sql = 'REPLACE INTO eventflow_snapshot (domain, pid, position, count, event_id, state, at) VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(3))';
  await affected(pool, sql, [domain, pid, snapshot.position, snapshot.count, snapshot.eventId, snapshot.state]);
}
