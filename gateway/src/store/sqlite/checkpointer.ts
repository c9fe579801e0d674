/**
 * WAL checkpoints on a worker thread. SQLite's automatic checkpoint runs inside the commit that
 * crosses the threshold, on the gateway's event loop, and with `synchronous = NORMAL` it is the
 * one place that fsyncs: a ~10 ms stall every ~1,000 pages, which was the tail of publish→deliver
 * latency (bench/README.md › latency). A PASSIVE checkpoint from a second connection copies the
 * same committed pages without blocking writers, so durability is unchanged: only where the copy
 * happens moves. The store turns its own auto-checkpoint off only once this worker is running.
 *
 * The WAL is bounded. SQLite starts writing a WAL from its beginning again only when a write
 * transaction begins with every frame checkpointed; under steady writes a checkpoint from another
 * connection always ends behind the latest commit, so the WAL grew by every commit until writes
 * paused (9.8 MB after 500 publishes), and on a full disk it kept the space freed next to it
 * (issue 22). So once the WAL holds more than its limit, the worker copies the frames written
 * while its PASSIVE ran with a second one, and asks the gateway to finish (`onRestart`): a PASSIVE
 * on the gateway's own connection copies the few frames left and syncs, with no other writer
 * meanwhile, so the WAL is then all copied and the gateway's next commit starts it over and cuts the
 * file back to `journal_size_limit`. Until then the worker checkpoints nothing. Before, the worker
 * ran a RESTART checkpoint itself, which holds the write lock while it copies and syncs: a commit
 * that met it slept in SQLite's busy handler on the event loop, 1 + 2 + 5 ms and at times 10 more,
 * about twice a second at a steady 500 jobs/s (strace of the gateway), where the copy and sync take
 * 2–5 ms on the gateway's connection. A limit that follows the disk (walLimitFrames): 4,000 frames
 * (16 MB of 4 kB pages) where that is at most an eighth of the room, down to 500 on a small disk.
 * The store's own automatic checkpoint stays on at twice the limit as a backstop, should the
 * worker fall behind: it then finds most pages copied already. A WAL that could outgrow the free
 * space would hold it for good: its pages cannot be copied into a database file that cannot grow.
 * After a failed write (`truncate()`: no space, I/O) the worker truncates the WAL to nothing, which
 * gives its space back to the database file, at every tick until it can.
 *
 * A TRUNCATE checkpoint blocks every writer while it waits, in its busy handler, for the write lock
 * and then for each reader of the WAL to finish. It waits TRUNCATE_WAIT_MS at most, less than the
 * gateway's own writes wait for the lock (SQLITE_BUSY_TIMEOUT_MS): with 5 s, a process outside
 * reading the file (a backup, Litestream, the `sqlite3` shell in a transaction) made each truncate
 * hold the write lock for 5 s, every write of the gateway failed SQLITE_BUSY meanwhile, and each
 * failure asked for the next truncate: one outside write lock of a second while such a reader ran
 * and no write of the gateway went through again for as long as the reader stayed (minutes).
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the worker checkpoints; PASSIVE on an up-to-date WAL costs next to nothing. */
const INTERVAL_MS = 200;

/**
 * How soon it looks again once the WAL holds half its limit: under steady writes (~3,000 pages a
 * second at 500 jobs/s) a 200 ms tick let the WAL reach the backstop, whose checkpoint and fsync ran
 * on the event loop ~9 times a second; quiet files keep the slower tick (a PASSIVE that copies
 * pages fsyncs, and a test run holds dozens of gateways).
 */
const BUSY_INTERVAL_MS = 50;

/**
 * How long a TRUNCATE checkpoint waits for the write lock and for the WAL's readers (see the
 * header): long enough for a transaction of the gateway's own, short of SQLITE_BUSY_TIMEOUT_MS
 * (transactions.ts), so that a write of the gateway meeting it waits rather than fails.
 */
export const TRUNCATE_WAIT_MS = 50;

/**
 * Frames (pages) the WAL may hold before the worker starts it over, at the least (a small disk, or
 * before the worker has looked) and at the most, and the share of its room it may take (the disk's
 * free space and its own frames); the store's own automatic checkpoint stays on at twice the limit as
 * the backstop (at the least, SQLite's default of 1,000 pages).
 */
export const WAL_BOUNDS = { min: 500, max: 4_000, share: 8 } as const;

/**
 * The WAL's limit for `roomBytes` of room: the largest of min × 2^k up to max that is at most
 * 1/share of it. Steps, so that it changes (and the store's backstop with it) only when the room
 * does by a factor of two. Self-contained: the worker runs its source.
 */
export function walLimitFrames(roomBytes: number, pageSize: number, bounds: { min: number; max: number; share: number }): number {
  let frames = bounds.min;
  while (frames * 2 <= bounds.max && frames * 2 * pageSize * bounds.share <= roomBytes) frames *= 2;
  return frames;
}

// An eval worker is CommonJS and resolves nothing relative to this file, hence the resolved path.
const source = `
const { workerData, parentPort } = require('node:worker_threads');
const { statfsSync } = require('node:fs');
const { dirname } = require('node:path');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { timeout: workerData.truncateWaitMs });
const pageSize = db.pragma('page_size', { simple: true });
const walLimitFrames = ${walLimitFrames.toString()};
let limit = 0;
/** The limit for the room the WAL has now; the gateway is told when it changes (its backstop follows). */
const measure = (walFrames) => {
  let next = workerData.bounds.min;
  try {
    const disk = statfsSync(dirname(workerData.path));
    next = walLimitFrames(disk.bavail * disk.bsize + walFrames * pageSize, pageSize, workerData.bounds);
  } catch {}
  if (next !== limit) parentPort.postMessage({ limit: (limit = next) });
};
/** Requests to truncate, answered once a TRUNCATE checkpoint has run (ok: it completed). */
const waiting = [];
/** The gateway was asked to finish a restart (below): no checkpoint here until it has. */
let restarting = false;
let reported = false;
let timer;
/** TRUNCATE waits truncateWaitMs at most (the header); PASSIVE never waits. */
const checkpoint = (mode) => db.pragma('wal_checkpoint(' + mode + ')')[0];
const tick = () => {
  clearTimeout(timer);
  if (restarting) return;
  let busy = false;
  try {
    if (waiting.length > 0) {
      const done = checkpoint('TRUNCATE').busy === 0;
      for (const id of waiting.splice(0)) parentPort.postMessage({ truncated: id, ok: done });
    } else {
      const log = checkpoint('PASSIVE').log;
      measure(log);
      // Start the WAL over: the frames written while the first PASSIVE ran are copied too, then the
      // gateway copies the last few itself (restarting), and its next commit starts the WAL over.
      if (log > limit) {
        checkpoint('PASSIVE');
        restarting = true;
        reported = false;
        parentPort.postMessage({ restart: true });
        return;
      }
      busy = log > limit / 2;
    }
    reported = false;
  } catch (error) {
    // No space to grow the database file, say: tried again at the next tick.
    for (const id of waiting.splice(0)) parentPort.postMessage({ truncated: id, ok: false });
    if (!reported) parentPort.postMessage({ failed: String(error) });
    reported = true;
  }
  timer = setTimeout(tick, busy ? workerData.busyIntervalMs : workerData.intervalMs);
};
timer = setTimeout(tick, workerData.intervalMs);
parentPort.on('message', (message) => {
  if (message === 'stop') { clearTimeout(timer); db.close(); parentPort.close(); return; }
  if (message === 'restarted') { restarting = false; timer = setTimeout(tick, workerData.busyIntervalMs); return; }
  waiting.push(message.truncate);
  if (!restarting) timer = setTimeout(tick, 0);
});
parentPort.postMessage('ready');
measure(0);
`;

export interface Checkpointer {
  /**
   * Checkpoints and truncates the WAL now (its frames copied to the database file, the file cut to
   * nothing); resolves with whether that completed. For after a failed write, and before a check
   * that writes work again.
   */
  truncate(): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * Starts the worker; resolves once its connection is open, rejects when it cannot start. `onError`:
 * the worker died. `onLimit`: the frames the WAL may now hold (walLimitFrames), once the worker has
 * looked at the disk and whenever that changes.
 */
export function startCheckpointer(path: string, onError: (message: string) => void, onLimit: (frames: number) => void, onRestart: () => void): Promise<Checkpointer> {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(source, { eval: true, workerData: { path, driver, intervalMs: INTERVAL_MS, busyIntervalMs: BUSY_INTERVAL_MS, truncateWaitMs: TRUNCATE_WAIT_MS, bounds: WAL_BOUNDS } });
  let next = 0;
  const answers = new Map<number, (ok: boolean) => void>();
  let stopped = false;
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (first: unknown) => {
      if (first !== 'ready') return reject(new Error(String(first)));
      worker.off('error', reject);
      // Only now: until it is ready the gateway's start may be all that keeps the process alive.
      worker.unref();
      const gone = (why: string): void => {
        for (const answer of answers.values()) answer(false);
        answers.clear();
        if (!stopped) onError(why);
      };
      worker.on('error', (error) => gone(String(error)));
      worker.on('exit', (code) => gone(`the checkpoint worker exited (${code})`));
      worker.on('message', (message: { truncated?: number; ok?: boolean; limit?: number; restart?: boolean }) => {
        if (message.limit !== undefined && !stopped) onLimit(message.limit);
        if (message.restart === true) {
          if (stopped) return;
          // The gateway's own connection copies the frames left: nothing else writes meanwhile, so the
          // WAL is then all copied, and its next commit starts it over (see the header).
          try {
            onRestart();
          } catch {
            // A failed checkpoint (no space, I/O): the worker goes on and asks again; the store learns of a full disk from its writes.
          }
          worker.postMessage('restarted');
          return;
        }
        // A failed checkpoint ({ failed }) is tried again by the worker; the store learns of a full disk from its writes.
        if (message.truncated === undefined) return;
        answers.get(message.truncated)?.(message.ok === true);
        answers.delete(message.truncated);
      });
      resolve({
        truncate() {
          if (stopped) return Promise.resolve(false);
          const id = next++;
          return new Promise<boolean>((done) => {
            answers.set(id, done);
            worker.postMessage({ truncate: id });
          });
        },
        async stop() {
          stopped = true;
          // Held until it has closed its connection, so that the database is never left half-closed.
          worker.ref();
          const exited = new Promise((done) => worker.once('exit', done));
          worker.postMessage('stop');
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([exited, new Promise((done) => (timer = setTimeout(done, 1_000)))]);
          clearTimeout(timer);
          await worker.terminate();
          for (const answer of answers.values()) answer(false);
          answers.clear();
        },
      });
    });
  });
}
