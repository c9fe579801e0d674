/**
 * Snapshots of a process's composed state (aether's snapshot design): every so many events, the
 * state after the first `count` events of (domain, pid) is stored in a table of the gateway's own
 * (eventflow_snapshot on both stores), so that `readEventlogState` folds only the events after it.
 *
 * Why this is exact:
 * - composeEventlogState folds chunks of 10 events; a snapshot always covers a multiple of 10
 *   events, so continuing from it puts every later chunk where the whole fold puts it
 *   (composeEventlogState's `from`).
 * - A snapshot names the position of the last event it covers. Positions only grow: every event
 *   stored or fired later (a v4 spoke's row too, once positioned) comes after it. So the events at
 *   or before that position can only become fewer, by deletes, and a snapshot is valid exactly
 *   when they still number `count`. SQLite drops a snapshot in the transaction that deletes an
 *   event it covers (a trigger; nothing but gateways writes its file) and checks the count when
 *   it stores one; MySQL, where v4 spokes write and delete behind the gateway's back, checks the
 *   count on every read (sqlite/snapshots.ts, mysql/snapshots.ts). A snapshot found stale means
 *   the full fold, which then stores a fresh snapshot.
 * - The stored text is the state's JSON, with the state's key order; a state holding -0 (which
 *   JSON cannot keep) is not stored.
 */
import { composeEventlogState, type JsonObject, type Position, type State, type StoredEvent } from '@eventflow/core';
import type { EventStore } from './store.js';

/** The chunk size of composeEventlogState's default: snapshots cover multiples of it. */
export const STATE_CHUNK = 10;

export interface StateSnapshot {
  /** How many events of the eventlog it covers (a multiple of STATE_CHUNK). */
  count: number;
  /** The position of the last event it covers. */
  position: Position;
  /** composeEventlogState over those events, as stored (parsed JSON). */
  state: JsonObject;
}

/** What a store answers for readEventlogState: a valid snapshot and the events after it, or no snapshot and the whole eventlog. */
export interface SnapshotRead {
  snapshot: StateSnapshot | undefined;
  events: StoredEvent[];
}

/** The part of a store that keeps snapshots (SqliteStore, MysqlStore). */
export interface SnapshotStore {
  readSnapshot(domain: string, pid: string): Promise<SnapshotRead>;
  /** Stores (replaces) the snapshot of (domain, pid); `eventId` is the last event it covers. */
  writeSnapshot(domain: string, pid: string, snapshot: { count: number; position: Position; eventId: string; state: string }): Promise<void>;
}

/** What readEventlogState reads: the snapshots, and the eventlog for when they are off. */
export interface SnapshotSource extends SnapshotStore {
  readEventlog(domain: string, pid: string): Promise<StoredEvent[]>;
}

export interface EventlogStateOptions {
  /** EVENTFLOW_SNAPSHOT_EVERY: store a new snapshot when this many events follow the latest one; 0: snapshots off (neither read nor stored). */
  every: number;
  /** A snapshot that could not be stored: the read is answered all the same. */
  onWriteError?: (error: unknown) => void;
}

/** The composed state and the number of events folded into it. */
export interface EventlogState {
  state: State;
  count: number;
}

/** JSON text of a state, or undefined when JSON would change it (-0 becomes 0). */
export function stateJson(state: State): string | undefined {
  let exact = true;
  const text = JSON.stringify(state, (_key, value: unknown) => {
    if (Object.is(value, -0)) exact = false;
    return value;
  });
  return exact ? text : undefined;
}

/** The store's snapshots, or (a store without them) readEventlog and the full fold. */
export function snapshotsOf(store: EventStore): SnapshotSource {
  if (store.readSnapshot !== undefined && store.writeSnapshot !== undefined) {
    return { readEventlog: (domain, pid) => store.readEventlog(domain, pid), readSnapshot: store.readSnapshot.bind(store), writeSnapshot: store.writeSnapshot.bind(store) };
  }
  const readEventlog = (domain: string, pid: string) => store.readEventlog(domain, pid);
  return { readEventlog, readSnapshot: async (domain, pid) => ({ snapshot: undefined, events: await readEventlog(domain, pid) }), writeSnapshot: async () => undefined };
}

/**
 * composeEventlogState over the eventlog of (domain, pid), from the latest valid snapshot plus the
 * events after it; when those are `every` or more, a new snapshot covering the most of them that
 * ends on a chunk boundary is stored first.
 */
export async function readEventlogState(store: SnapshotSource, domain: string, pid: string, options: EventlogStateOptions): Promise<EventlogState> {
  const { snapshot, events } = options.every > 0 ? await store.readSnapshot(domain, pid) : { snapshot: undefined, events: await store.readEventlog(domain, pid) };
  let base: State | undefined = snapshot?.state;
  let tail = events;
  const covered = snapshot?.count ?? 0;
  const aligned = Math.floor(events.length / STATE_CHUNK) * STATE_CHUNK;
  if (options.every > 0 && events.length >= options.every && aligned > 0) {
    base = composeEventlogState(events.slice(0, aligned), STATE_CHUNK, base);
    tail = events.slice(aligned);
    const last = events[aligned - 1] as StoredEvent;
    const state = stateJson(base);
    if (state !== undefined) {
      await store.writeSnapshot(domain, pid, { count: covered + aligned, position: last.position, eventId: last.id, state }).catch((error: unknown) => options.onWriteError?.(error));
    }
  }
  return { state: composeEventlogState(tail, STATE_CHUNK, base), count: covered + events.length };
}
