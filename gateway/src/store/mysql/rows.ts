/** The event rows of the MySQL store: the columns a read selects, and a row as a StoredEvent. */
import type { JsonValue, Position, StoredEvent } from '@eventflow/core';
import type { Params } from './statements.js';

export type EventRow = Omit<StoredEvent, 'timestamp' | 'data' | 'position'> & { timestamp: Date; data: string | Buffer; position: number | null };

/** One row of a multi-row INSERT. */
export type Row = Array<string | number | Date | null>;

/**
 * A multi-event read: FROM and WHERE over `event e` (events() joins the positions), the events positioned after `after`
 * if set, at most `limit`. onlyFired false for read(id) only; wide (the domain) for a read scoped to a whole domain.
 */
export type Read = { from: string; where: string; params: Params; after?: Position; limit?: number; onlyFired?: boolean; wide?: string };

export const COLUMNS = 'e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, e.data, x.position';
export const WITH_POSITION = 'LEFT JOIN eventflow_position x ON x.event_id = e.id';
/** A scheduled event joins its eventlog when it fires (see store.ts). */
export const FIRED = 'NOT EXISTS (SELECT 1 FROM event_scheduled z WHERE z.event_id = e.id AND z.executed IS NULL)';
export const INSERT_BATCH = 1000;

export function toStoredEvent({ id, timestamp, domain, rid, pid, name, data, position }: EventRow): StoredEvent {
  const json = typeof data === 'string' ? data : data.toString('utf8');
  return { id, timestamp: timestamp.toISOString(), domain, rid, pid, name, data: JSON.parse(json) as JsonValue, position: Number(position) };
}
