/**
 * What a watch or a read shows of an eventlog: its snapshot (state, position, staleness, the events
 * materialised lazily from a shared log) and that snapshot with the outbox's pending entries
 * applied. Plus the small helpers the reads and the watches share.
 */
import { assertIdentifier, streamKey, type State, type StoredEvent } from '@eventflow/core';
import { concat } from './lazy-list.js';
import type { OutboxEngine, OutboxEntry } from './outbox-types.js';

/** One eventlog as this client knows it. */
export interface EventlogSnapshot {
  readonly domain: string;
  readonly pid: string;
  /** The composed state (frozen). */
  readonly state: State;
  /** Position of the newest event (0: none). */
  readonly position: number;
  readonly events: readonly StoredEvent[];
  /** True while it may be behind the gateway (offline, or not caught up yet). */
  readonly stale: boolean;
  /** Outbox entries applied on top of the confirmed state, oldest first (none without an outbox). */
  readonly pending: readonly OutboxEntry[];
}

export const none: readonly OutboxEntry[] = Object.freeze([]);

export const keyOf = streamKey;

export function checkEventlog(domain: unknown, pid: unknown): void {
  assertIdentifier(domain, 'domain');
  assertIdentifier(pid, 'pid');
}

/**
 * The events of a watched eventlog, shared by its snapshots: appended to, never changed, so a
 * snapshot is a prefix of it. The cached part is a lazy list (see cache.ts): a view of the state
 * (what UIs render) never parses the eventlog, a view of some events parses the chunks that hold them.
 */
export interface Log {
  /** The cached part. */
  cached: readonly StoredEvent[];
  /** The events after it. */
  events: StoredEvent[];
  size: number;
}

export const logOf = (cached: readonly StoredEvent[] = [], size = 0): Log => ({ cached, events: [], size });

/** The first `size` events of `log` (all by default), as a lazy list. */
export const eventsOf = (log: Log, size = log.size): StoredEvent[] => concat(log.cached, log.events, size);

/** A snapshot whose events are read from `events` when first asked for. */
function view(domain: string, pid: string, state: State, position: number, stale: boolean, pending: readonly OutboxEntry[], events: () => readonly StoredEvent[]): EventlogSnapshot {
  let read: readonly StoredEvent[] | undefined;
  return {
    domain,
    pid,
    state,
    position,
    stale,
    pending,
    get events() {
      return (read ??= events());
    },
  };
}

/** A snapshot of the first `size` events of `log`, materialised when first read. */
export function snapshotOf(domain: string, pid: string, state: State, position: number, stale: boolean, log: Log): EventlogSnapshot {
  const { size } = log;
  return view(domain, pid, state, position, stale, none, () => eventsOf(log, size));
}

/** `snapshot` with the pending entries of its eventlog applied (itself when there are none). */
export function overlaid(snapshot: EventlogSnapshot, outbox: OutboxEngine | undefined): EventlogSnapshot {
  const { domain, pid, state, position, stale } = snapshot;
  const [shown, pending] = outbox?.overlay(domain, pid, state, position) ?? [state, none];
  return pending.length ? view(domain, pid, shown, position, stale, pending, () => snapshot.events) : snapshot;
}

/** Runs `task`; a call during a run makes it run once more afterwards (calls coalesce). */
export function serial(task: () => Promise<void>): () => Promise<void> {
  let running = false;
  let again = false;
  return async () => {
    again = true;
    if (running) return;
    running = true;
    try {
      while (again) {
        again = false;
        await task();
      }
    } finally {
      running = false;
    }
  };
}
