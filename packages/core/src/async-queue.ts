/**
 * Turns pushed values into an async iterator. Used for the async-iterator forms of listeners; a
 * bounded buffer drops the oldest values so that a slow reader cannot grow memory without limit.
 */
import { DEFAULT_BUFFER_SIZE } from './defaults.js';
export interface AsyncQueue<T> extends AsyncIterableIterator<T> {
  return(): Promise<IteratorResult<T>>;
  push(value: T): void;
  /** Ends iteration with an error (e.g. the client closed). */
  fail(error: unknown): void;
}

/** `signal` aborting ends iteration like `return()`. */
export const createAsyncQueue = <T>(onEnd: () => void, limit = DEFAULT_BUFFER_SIZE, signal?: AbortSignal): AsyncQueue<T> => {
  const buffer: T[] = [];
  /** The reader waiting in next(): its resolve and reject. */
  let waiting: [(result: IteratorResult<T>) => void, (error: unknown) => void] | undefined;
  let done = false;
  let failure: { error: unknown } | undefined;
  const finished = (): IteratorResult<T> => ({ value: undefined, done: true });
  const take = (): typeof waiting => {
    const reader = waiting;
    waiting = undefined;
    return reader;
  };
  const end = (): void => {
    if (!done) {
      done = true;
      signal?.removeEventListener('abort', onAbort);
      onEnd();
    }
  };
  const onAbort = (): void => void queue.return();

  const queue: AsyncQueue<T> = {
    push(value) {
      if (done) return;
      if (waiting) take()?.[0]({ value, done: false });
      else if (buffer.push(value) > limit) buffer.shift();
    },
    fail(error) {
      if (done) return;
      failure = { error };
      end();
      take()?.[1](error);
    },
    async next() {
      if (buffer.length) return { value: buffer.shift() as T, done: false };
      if (failure) throw failure.error;
      if (done) return finished();
      return new Promise((resolve, reject) => {
        waiting = [resolve, reject];
      });
    },
    async return() {
      end();
      buffer.length = 0;
      take()?.[0](finished());
      return finished();
    },
    [Symbol.asyncIterator]() {
      return queue;
    },
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  return queue;
};
