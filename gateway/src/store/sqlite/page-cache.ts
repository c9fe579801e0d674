/**
 * SQLite's page cache for the store's connection (EVENTFLOW_SQLITE_CACHE_MB). SQLite's own 2 MiB
 * default held less than a drain of 10,000 queued jobs reads back (their events, then their ledger
 * rows): every page past it was a read from the file again, ~0.4 a job.
 */
import type Database from 'better-sqlite3';
import { EventflowError } from '@eventflow/core';
import { configDefaults } from '../../defaults.js';

/** The MiB an embedder's `cacheMb` option asks for (the configuration's own is checked by its schema): 0 or NaN would make an odd PRAGMA. */
export function pageCacheMb(cacheMb: number | undefined): number {
  if (cacheMb === undefined) return configDefaults.EVENTFLOW_SQLITE_CACHE_MB;
  if (Number.isInteger(cacheMb) && cacheMb >= 1 && cacheMb <= 65_536) return cacheMb;
  throw new EventflowError('E_EVENTFLOW_CONFIG', `SqliteStore's cacheMb must be a whole number of MiB from 1 to 65536, not ${String(cacheMb)}`, { details: { cacheMb: String(cacheMb) } });
}

/** Sets the connection's page cache to `mb` MiB (a negative cache_size is KiB). */
export function setPageCache(db: Database.Database, mb: number): void {
  db.pragma(`cache_size = ${-1024 * mb}`);
}
