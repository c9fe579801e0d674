/**
 * `listDomains`' store read, shared by every connection of a gateway. The read counts every event of
 * the store (Catalog.domains), whatever domains the asker may read, so its cost grows with the store,
 * not with the asker: on SQLite it holds the event loop for all of it (~40 ms per 100,000 events), and
 * any token with a `read` grant could ask again and again, each ask a stall of the whole gateway. A
 * connection's answer is the shared read filtered by its rights (catalog-operations.ts).
 *
 * One read runs at a time, and asks meanwhile share it. A read that took at least SLOW_READ_MS is
 * answered again for REUSE_FACTOR times as long, so that however many ask, counting takes at most
 * about a tenth of the gateway's time; a fast read (a store of fewer than ~100,000 events) is never
 * reused, so the answer stays exact where counting is cheap.
 */
import type { Catalog, DomainSummary } from '../store/catalog.js';

/** Reads faster than this are not reused. */
export const SLOW_READ_MS = 50;
/** A slow read is reused for this many times its duration. */
export const REUSE_FACTOR = 10;

interface SharedRead {
  readonly domains: Promise<DomainSummary[]>;
  /** Set once the read is done: when it ended and how long it took. */
  ended?: number;
  took?: number;
}

const reads = new WeakMap<Catalog, SharedRead>();

/** The store's domains: a running read's, a recent slow read's, or a new read. */
export function sharedDomains(catalog: Catalog, now: () => number = () => performance.now()): Promise<DomainSummary[]> {
  const last = reads.get(catalog);
  if (last && (last.ended === undefined || (last.took !== undefined && last.took >= SLOW_READ_MS && now() - last.ended < last.took * REUSE_FACTOR))) return last.domains;
  const started = now();
  const read: SharedRead = { domains: catalog.domains() };
  reads.set(catalog, read);
  read.domains.then(
    () => {
      read.ended = now();
      read.took = read.ended - started;
    },
    // A failed read is not shared past its own askers: the next ask reads again.
    () => reads.get(catalog) === read && reads.delete(catalog),
  );
  return read.domains;
}
