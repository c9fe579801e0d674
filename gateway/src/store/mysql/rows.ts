/** The event rows of the MySQL store: the columns a read selects, and a row as a StoredEvent. */
import type { JsonValue, Position, StoredEvent } from '@eventflow/core';
import type { Params } from './statements.js';

export type EventRow = Omit<StoredEvent, 'timestamp' | 'data' | 'position' | 'traceparent' | 'tracestate'> & {
  timestamp: Date;
  data: string | Buffer;
  position: number | null;
  /** NULL without a trace context (absent: a read that does not select it). */
  traceparent?: string | null;
  tracestate?: string | null;
};

/** One row of a multi-row INSERT. */
export type Row = Array<string | number | Date | null>;

/**
 * A multi-event read: FROM and WHERE over `event e` (events() joins the positions), the events positioned after `after`
 * if set, at most `limit`. onlyFired false for read(id) only; wide (the domain) for a read scoped to a whole domain.
 */
export type Read = { from: string; where: string; params: Params; after?: Position; limit?: number; onlyFired?: boolean; wide?: string };

/** The trace context is kept beside the position, in the gateway's own table (v4's `event` stays as v4 made it). */
export const COLUMNS = 'e.id, e.timestamp, e.domain, e.rid, e.pid, e.name, e.data, x.position, x.traceparent, x.tracestate';
export const WITH_POSITION = 'LEFT JOIN eventflow_position x ON x.event_id = e.id';
/** A scheduled event joins its eventlog when it fires (see store.ts). */
export const FIRED = 'NOT EXISTS (SELECT 1 FROM event_scheduled z WHERE z.event_id = e.id AND z.executed IS NULL)';
export const INSERT_BATCH = 1000;

export function toStoredEvent({ id, timestamp, domain, rid, pid, name, data, position, traceparent, tracestate }: EventRow): StoredEvent {
  const json = typeof data === 'string' ? data : data.toString('utf8');
  const event: StoredEvent = { id, timestamp: timestamp.toISOString(), domain, rid, pid, name, data: JSON.parse(json) as JsonValue, position: Number(position) };
  if (traceparent != null) {
    event.traceparent = traceparent;
    if (tracestate != null) event.tracestate = tracestate;
  }
  return event;
}
