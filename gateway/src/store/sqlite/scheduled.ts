/** Firing scheduled events on SQLite (EventStore.claimDueScheduled): each due row claimed once, its event moved to a new position. */
import type Database from 'better-sqlite3';
import type { StoredEvent } from '@eventflow/core';
import { isoDate, now, toStoredEvent, type Statements } from './statements.js';
import { immediate } from './transactions.js';

/** Claims the rows due at `at` in one transaction; returns their events at their new positions. */
export function claimDue(db: Database.Database, s: Statements, at: Date): StoredEvent[] {
  const due = isoDate(at, 'now');
  return immediate(db, (): StoredEvent[] => {
    const executed = now();
    const fired: StoredEvent[] = [];
    for (const row of s.dueScheduled.all({ now: due })) {
      if (s.claimScheduled.run({ id: row.id, now: executed }).changes !== 1) continue;
      s.resequence.run({ id: row.id, now: executed });
      s.bumpSequence.run({ id: row.id });
      const moved = s.read.get({ id: row.id });
      if (moved) fired.push(toStoredEvent(moved));
    }
    return fired;
  });
}
