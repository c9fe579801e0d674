/**
 * The checkpoint worker (checkpointer.ts), started without making the store's open wait for it. Its
 * thread takes ~70 ms to boot (a Node environment, better-sqlite3, its connection), which the
 * gateway spent idle before it could listen (bench/README.md › start). Until it runs, or when it
 * cannot start, SQLite's own automatic checkpoint does its work: the same data, a slower tail.
 */
import { startCheckpointer, type Checkpointer } from './checkpointer.js';

export interface BackgroundCheckpointerHooks {
  /**
   * The worker runs and the WAL may hold `frames` before it starts it over (checkpointer.ts ›
   * walLimitFrames): the store leaves checkpoints to it, with its own as a backstop above that.
   * Called again whenever the limit changes.
   */
  limit(frames: number): void;
  /** The worker died after it started: the store checkpoints again itself. */
  gone(): void;
  /**
   * The worker has copied the WAL but for the last commits: the store copies those on its own
   * connection (a PASSIVE checkpoint), so that its next commit starts the WAL over (checkpointer.ts).
   */
  restart(): void;
}

export class BackgroundCheckpointer {
  #running: Checkpointer | undefined;
  readonly #starting: Promise<void>;
  #stopped = false;
  #stopping: Promise<void> | undefined;

  constructor(path: string, hooks: BackgroundCheckpointerHooks) {
    // From the next turn of the event loop: making the thread costs the loop ~4 ms, and its boot
    // takes a core for ~40 ms, which a gateway still starting (a turn of promises) needs more.
    this.#starting = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      if (this.#stopped) return;
      let checkpointer: Checkpointer;
      try {
        checkpointer = await startCheckpointer(
          path,
          () => {
            this.#running = undefined;
            hooks.gone();
          },
          (frames) => {
            if (!this.#stopped) hooks.limit(frames);
          },
          () => {
            if (!this.#stopped) hooks.restart();
          },
        );
      } catch {
        return;
      }
      // Stopped while it started: the store has closed, its connection with it.
      if (this.#stopped) return checkpointer.stop();
      this.#running = checkpointer;
    });
  }

  /**
   * Checkpoints and truncates the WAL (checkpointer.ts › truncate), once the worker runs; false
   * when there is no worker to do it.
   */
  async truncate(): Promise<boolean> {
    await this.#starting;
    return (await this.#running?.truncate()) ?? false;
  }

  /**
   * Stops the worker, or waits for it to start and stops it then. Every call waits for the one stop:
   * the store's close must not close its connection while the worker (stopped when a file was found
   * moved: store-file.ts) still has its own open.
   */
  stop(): Promise<void> {
    this.#stopped = true;
    return (this.#stopping ??= this.#starting.then(async () => {
      const running = this.#running;
      this.#running = undefined;
      await running?.stop();
    }));
  }
}
