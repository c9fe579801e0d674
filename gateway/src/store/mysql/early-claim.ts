/**
 * A guarded claim decided before its commit's log flush (store.claimForRoutingEarly): `won` as soon as
 * the guarded UPDATE has matched (and so locked) the row, `durable` once it is committed. A concurrent
 * claimer's UPDATE waits on that row lock for this commit and then matches nothing, so exactly one
 * router wins, as with an autocommit claim. Only a failed commit (the database lost, say) lets a second
 * router win later and route the event again, as a crash right after an autocommit claim would:
 * routing is at least once. For the hub, which routes as soon as it wins: the routing of an event no
 * longer waits for a log flush of its own.
 */
import type { PoolConnection } from 'mysql2/promise';
import { driverCode, storeError } from './db.js';
import { affected, type Params } from './statements.js';

/** Runs `sql` (a guarded UPDATE) on `conn`, a connection with autocommit off, and releases it; `again` claims after a deadlock. */
export async function claimEarly(conn: PoolConnection, sql: string, params: Params, again: () => Promise<boolean>): Promise<{ won: boolean; durable: Promise<void> }> {
  const end = (statement: 'COMMIT' | 'ROLLBACK'): Promise<void> =>
    conn.query(statement).then(
      () => conn.release(),
      (error: unknown) => {
        conn.destroy();
        throw storeError(error, 'commit the routing claim');
      },
    );
  let won: boolean;
  try {
    won = (await affected(conn, sql, params)) === 1;
  } catch (error) {
    await end('ROLLBACK').catch(() => undefined);
    if (driverCode(error) === 'ER_LOCK_DEADLOCK') return { won: await again(), durable: Promise.resolve() };
    throw storeError(error, 'claim the event for routing');
  }
  if (!won) {
    // Nothing changed: the transaction ends without anyone waiting for it.
    void end('ROLLBACK').catch(() => undefined);
    return { won, durable: Promise.resolve() };
  }
  return { won, durable: end('COMMIT') };
}
