/** What the two consume-lease suites (SQLite: leases.test.ts, MariaDB: leases.mysql.test.ts) share. */
import type { ConsumeContext, StoredEvent } from '@eventflow/core';

/** The lease both suites run with: short, so that expiry is quick. */
export const LEASE = 300;

/** A handler that never finishes on its own; records what it saw. */
export function stuck(): { seen: Array<{ id: string; attempt: number; signal: AbortSignal }>; handler: (event: StoredEvent, context: ConsumeContext) => Promise<void> } {
  const seen: Array<{ id: string; attempt: number; signal: AbortSignal }> = [];
  return { seen, handler: (event, { attempt, signal }) => (seen.push({ id: event.id, attempt, signal }), new Promise(() => undefined)) };
}
