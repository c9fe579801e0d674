/**
 * This gateway's clock against the database server's. Gateways on one MySQL database take over each
 * other's consume leases, so they write and compare them on one clock, the database's: the offset
 * measured here corrects this gateway's lease clock (store/lease-clock.ts). Before, each used its
 * own, and a gateway 6 s ahead took a 10 s lease of another over after 4 s (the event ran on both).
 * Scheduled events are fired by it too. Measured at start (awaited) and every minute. What stays on
 * this gateway's own clock (event timestamps) is why an offset past CLOCK_WARN_MS is logged.
 */
import { createConnection } from 'mysql2/promise';
import type { Logger } from '../../log.js';
import type { LeaseClock } from '../lease-clock.js';
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

/** Measures at start (resolves after that first reading, or its failure) and every minute; resolves with what stops it. */
export async function watchDatabaseClock(options: MysqlStoreOptions, clock: LeaseClock, log: Logger): Promise<() => void> {
  let warned = false;
  const check = async (): Promise<void> => {
    try {
      const { offsetMs, roundTripMs } = await databaseClockOffset(options);
      clock.offsetMs = offsetMs;
      // Half the round trip is what one reading cannot tell apart.
      const off = Math.abs(offsetMs) - roundTripMs / 2 > CLOCK_WARN_MS;
      if (off && !warned) {
        const by = `${Math.round(Math.abs(offsetMs))} ms ${offsetMs < 0 ? 'ahead of' : 'behind'}`;
        log.warn(`this gateway's clock is ${by} the database server's: consume leases and scheduled events go by the database's clock, but event timestamps by this one; synchronise the clocks (NTP)`, { offsetMs: Math.round(offsetMs), roundTripMs });
      }
      warned = off;
    } catch {
      // The store's own checks (/readyz) report an unreachable database; the last offset stays.
    }
  };
  await check();
  const timer = setInterval(() => void check(), CHECK_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
