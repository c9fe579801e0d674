/**
 * The orphan marks of routed pages (`markOrphans`), written in the next turn with the other pages
 * marked meanwhile, in one statement: the dispatcher marks a page right after routing it, in the
 * turn whose commit resolved its publishes, and a transaction there would hold back their
 * acknowledgements.
 */
import { asError } from './appends.js';

export class OrphanMarks {
  readonly #write: (ids: readonly string[]) => void;
  /** The marks to write in the next turn, and the promise that it did. */
  #pending: { ids: string[]; written: Promise<void> } | undefined;

  constructor(write: (ids: readonly string[]) => void) {
    this.#write = write;
  }

  /** Settles once the marks made so far are written (or failed). */
  idle(): Promise<void> {
    return this.#pending?.written.catch(() => undefined) ?? Promise.resolve();
  }

  mark(eventIds: readonly string[]): Promise<void> {
    let pending = this.#pending;
    if (pending === undefined) {
      const opened: { ids: string[]; written: Promise<void> } = { ids: [], written: Promise.resolve() };
      opened.written = new Promise<void>((resolve, reject) =>
        setImmediate(() => {
          this.#pending = undefined;
          try {
            this.#write(opened.ids);
            resolve();
          } catch (error) {
            reject(asError(error));
          }
        }),
      );
      this.#pending = pending = opened;
    }
    for (const id of eventIds) pending.ids.push(id);
    return pending.written;
  }
}
