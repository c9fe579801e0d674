/**
 * The time consume leases are written and compared in (deadlines, retry times, a claim's `now`).
 * Gateways on one MySQL database take over each other's leases, so they must agree on it: there it
 * is this process's clock plus its offset to the database server's, measured at start and every
 * minute (mysql/clock-check.ts); a gateway 6 s ahead took a 10 s lease over after 4 s by its own
 * clock. Elsewhere (SQLite: one gateway) the offset stays 0.
 */
export class LeaseClock {
  /** The database server's clock minus this process's (ms). */
  offsetMs = 0;

  now(): number {
    return Date.now() + this.offsetMs;
  }
}
