/**
 * WAL checkpoints on a worker thread. SQLite's automatic checkpoint runs inside the commit that
 * crosses the threshold, on the gateway's event loop, and with `synchronous = NORMAL` it is the
 * one place that fsyncs: a ~10 ms stall every ~1,000 pages, which was the tail of publish→deliver
 * latency (bench/README.md › latency). A PASSIVE checkpoint from a second connection copies the
 * same committed pages without blocking writers, so durability is unchanged: only where the copy
 * happens moves. The store turns its own auto-checkpoint off only once this worker is running.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the worker checkpoints; PASSIVE on an up-to-date WAL costs next to nothing. */
const INTERVAL_MS = 200;

// An eval worker is CommonJS and resolves nothing relative to this file, hence the resolved path.
const source = `
const { workerData, parentPort } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { timeout: 5000 });
const timer = setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch (error) { parentPort.postMessage(String(error)); }
}, workerData.intervalMs);
parentPort.on('message', () => { clearInterval(timer); db.close(); parentPort.close(); });
parentPort.postMessage('ready');
`;

export interface Checkpointer {
  stop(): Promise<void>;
}

/** Starts the worker; resolves once its connection is open, rejects when it cannot start. */
export function startCheckpointer(path: string, onError: (message: string) => void): Promise<Checkpointer> {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(source, { eval: true, workerData: { path, driver, intervalMs: INTERVAL_MS } });
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (first: unknown) => {
      if (first !== 'ready') return reject(new Error(String(first)));
      worker.off('error', reject);
      // Only now: until it is ready the gateway's start may be all that keeps the process alive.
      worker.unref();
      worker.on('error', (error) => onError(String(error)));
      worker.on('message', (message: unknown) => onError(String(message)));
      resolve({
        async stop() {
          // Held until it has closed its connection, so that the database is never left half-closed.
          worker.ref();
          const exited = new Promise((done) => worker.once('exit', done));
          worker.postMessage('stop');
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([exited, new Promise((done) => (timer = setTimeout(done, 1_000)))]);
          clearTimeout(timer);
          await worker.terminate();
        },
      });
    });
  });
}
