/** The SQLite store's write path: each append of a group commit (see ../group-commit.ts), checked then inserted in the batch's transaction. */
import { EventflowError, type StoredEvent } from '@eventflow/core';
import { isSameEvent } from '../same-event.js';
import { versionConflict, type AppendOptions, type AppendOutcome, type AppendRequest, type AppendResult, type NewEvent } from '../store.js';
import { writeFailed } from '../write-health.js';
import { isoDate, toStoredEvent, type Statements } from './statements.js';

/** An append checked and serialised outside the transaction, or the error that ends it there. */
export type PreparedAppend =
  | { ok: true; event: NewEvent; options: AppendOptions; rid: string | null; data: string; scheduled: string | undefined }
  | { ok: false; error: Error };

export function prepareAppend({ event, options = {} }: AppendRequest): PreparedAppend {
  try {
    const scheduled = options.scheduledAt === undefined ? undefined : isoDate(options.scheduledAt, 'scheduledAt');
    return { ok: true, event, options, rid: event.rid ?? null, data: JSON.stringify(event.data), scheduled };
  } catch (error) {
    return { ok: false, error: asError(error) };
  }
}

/** A driver error caused by one row's values, not by the database's state. */
export function isRowError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CONSTRAINT') || code === 'SQLITE_TOOBIG' || code === 'SQLITE_MISMATCH');
}

export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * One append inside the batch's transaction. Every coded refusal is thrown before the first
 * write, so that catching it leaves nothing of this request behind. An id already stored answers
 * first (a retry, or E_EVENTFLOW_DUPLICATE_ID), whatever else the request holds; it is not looked
 * up before the insert, which the unique index refuses instead, but before any other refusal.
 */
export function insertOne(s: Statements, append: Extract<PreparedAppend, { ok: true }>, timestamp: string): AppendResult {
  const { event, options, rid, data, scheduled } = append;
  if (rid !== null && s.exists.get(rid) === undefined) {
    return storedAlready(s, event, () => new EventflowError('E_EVENTFLOW_REFERENCE_NOT_FOUND', `event "${event.id}" refers (rid) to event "${rid}", which does not exist`, {
      details: { id: event.id, rid },
    }));
  }
  const { expectedVersion } = options;
  if (expectedVersion !== undefined) {
    const current = s.countEventlog.get({ domain: event.domain, pid: event.pid })?.count ?? 0;
    if (current !== expectedVersion) return storedAlready(s, event, () => versionConflict(event.domain, event.pid, current, expectedVersion));
  }
  const { id, domain, pid, name } = event;
  let position: number;
  try {
    position = Number(s.insertEvent.run(id, timestamp, domain, rid, pid, name, data, event.traceparent ?? null, event.tracestate ?? null).lastInsertRowid);
  } catch (error) {
    // The one unique column is id. The failed statement undid itself (sequence included); the transaction goes on.
    if ((error as { code?: unknown } | null)?.code !== 'SQLITE_CONSTRAINT_UNIQUE') throw error;
    return storedAlready(s, event, () => asError(error));
  }
  if (options.publisher !== undefined) {
    const hub = options.routedBy ?? null;
    s.insertPublished.run(event.id, timestamp, options.publisher, hub, hub === null ? null : timestamp);
  }
  if (scheduled !== undefined) s.insertScheduled.run({ id: event.id, now: timestamp, scheduled });
  // The request's own data: what was just stored, as plain JSON (no need to parse it back).
  const stored: StoredEvent = { id, timestamp, domain, rid, pid, name, data: event.data, position };
  if (event.traceparent !== undefined) {
    stored.traceparent = event.traceparent;
    if (event.tracestate !== undefined) stored.tracestate = event.tracestate;
  }
  return { event: stored, created: true };
}

/** An id already stored answers: the retry's result, or E_EVENTFLOW_DUPLICATE_ID; a new id throws `otherwise()`. */
function storedAlready(s: Statements, event: NewEvent, otherwise: () => Error): AppendResult {
  const existing = s.read.get({ id: event.id });
  if (existing === undefined) throw otherwise();
  const stored = toStoredEvent(existing);
  if (isSameEvent(stored, event)) return { event: stored, created: false };
  throw new EventflowError(
    'E_EVENTFLOW_DUPLICATE_ID',
    `event id "${event.id}" is already used by another event; use a new id, or omit it and let the client generate one`,
    { details: { id: event.id } },
  );
}

/**
 * After a batch failed with the database: what it stored, read back (a COMMIT can report an error
 * after the commit itself succeeded). Each request is answered as committed, or as not stored
 * (retryable), or as unknown when even the read fails.
 */
export function readBack(s: Statements, prepared: readonly PreparedAppend[], headBefore: number, error: unknown): AppendOutcome[] {
  const what = failedWrite(error);
  return prepared.map((append): AppendOutcome => {
    if (!append.ok) return append;
    let stored: StoredEvent | undefined;
    try {
      const row = s.read.get({ id: append.event.id });
      stored = row === undefined ? undefined : toStoredEvent(row);
    } catch {
      return { ok: false, error: writeFailed(error, what, append.event.id, 'unknown') };
    }
    if (stored !== undefined && stored.position > headBefore && isSameEvent(stored, append.event)) return { ok: true, result: { event: stored, created: true } };
    return { ok: false, error: writeFailed(error, what, append.event.id, false) };
  });
}

/**
 * What stopped a write, for its message: a lock held outside is said so, for the operator who holds it
 * to end it; the store's own refusal (its files removed: store-file.ts) says what happened and what to do.
 */
function failedWrite(error: unknown): string {
  if (error instanceof EventflowError) return error.message;
  return (error as { code?: unknown } | null)?.code === 'SQLITE_BUSY'
    ? 'the SQLite store could not write: another process holds a write transaction on its file (the sqlite3 shell, a backup, a script), which must end'
    : 'the SQLite store could not write';
}
