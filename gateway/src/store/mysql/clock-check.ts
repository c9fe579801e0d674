/**
 * This gateway's clock against the database server's. Gateways on one MySQL database write lease
 * deadlines by their own clock and take over leases that ran out by theirs: a gateway whose clock is
 * ahead by a few seconds takes over other gateways' leases that much early, and runs their events
 * beside the consumers still holding them (a 10 s lease was taken over after 4 s by a gateway 6 s
 * ahead); one behind leaves leases of gateways that died that much longer. Nothing here corrects it
 * (the gateways' clocks are the operator's, kept by NTP); it is measured at start and every minute,
 * and an offset past CLOCK_WARN_MS, or a tenth of the lease, is logged, each time it is seen.
 */
import { createConnection } from 'mysql2/promise';
import type { Logger } from '../../log.js';
import type { MysqlStoreOptions } from './mysql.js';

/** An offset this large (ms) is worth an operator's look whatever the lease. */
export const CLOCK_WARN_MS = 500;
const CHECK_EVERY_MS = 60_000;

/** The database's clock minus this gateway's (ms), from one round trip (its midpoint); and the round trip. */
export async function databaseClockOffset(options: MysqlStoreOptions): Promise<{ offsetMs: number; roundTripMs: number }> {
  const { host = '127.0.0.1', port = 3306, user = 'root', password = '', database = 'eventflow' } = options;
  const conn = await createConnection({ host, port, user, password, database, connectTimeout: 5_000 });
  try {
    const sent = Date.now();
    const [rows] = await conn.query('SELECT ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) AS now');
    const received = Date.now();
    const now = Number((rows as Array<{ now: unknown }>)[0]?.now);
    return { offsetMs: now - (sent + received) / 2, roundTripMs: received - sent };
  } finally {
    await conn.end().catch(() => undefined);
  }
}

/** Checks at start and every minute; returns what stops it. */
export function watchDatabaseClock(options: MysqlStoreOptions, leaseMs: number, log: Logger): () => void {
  const limit = Math.min(CLOCK_WARN_MS, leaseMs / 10);
  const check = async (): Promise<void> => {
    try {
      const { offsetMs, roundTripMs } = await databaseClockOffset(options);
      // Half the round trip is what one reading cannot tell apart.
      if (Math.abs(offsetMs) - roundTripMs / 2 <= limit) return;
      const direction = offsetMs < 0 ? 'ahead of' : 'behind';
      log.warn(
        `this gateway's clock is ${Math.round(Math.abs(offsetMs))} ms ${direction} the database server's: leases are compared across gateways by their clocks, so ${offsetMs < 0 ? "this gateway takes over other gateways' leases that much early (their events may run twice at once)" : 'other gateways take over its leases that much early'}; synchronise the clocks (NTP)`,
        { offsetMs: Math.round(offsetMs), roundTripMs, leaseMs },
      );
    } catch {
      // The store's own checks (/readyz) report an unreachable database.
    }
  };
  void check();
  const timer = setInterval(() => void check(), CHECK_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
