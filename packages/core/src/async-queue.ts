/**
 * Turns pushed values into an async iterator. Used for the async-iterator forms of listeners; a
 * bounded buffer drops the oldest values so that a slow reader cannot grow memory without limit.
 */
export interface AsyncQueue<T> extends AsyncIterableIterator<T> {
  return(): Promise<IteratorResult<T>>;
  push(value: T): void;
  /** Ends iteration with an error (e.g. the client closed). */
  fail(error: unknown): void;
}

export function createAsyncQueue<T>(onEnd: () => void, limit = 1024): AsyncQueue<T> {
  const buffer: T[] = [];
  let waiting: { resolve(result: IteratorResult<T>): void; reject(error: unknown): void } | undefined;
  let done = false;
  let failure: { error: unknown } | undefined;

  const end = (): void => {
    if (done) return;
    done = true;
    onEnd();
  };

  const queue: AsyncQueue<T> = {
    push(value) {
      if (done) return;
      if (waiting) {
        const { resolve } = waiting;
        waiting = undefined;
        resolve({ value, done: false });
        return;
      }
      buffer.push(value);
      if (buffer.length > limit) buffer.shift();
    },
    fail(error) {
      if (done) return;
      failure = { error };
      end();
      if (waiting) {
        const { reject } = waiting;
        waiting = undefined;
        reject(error);
      }
    },
    next() {
      if (buffer.length > 0) return Promise.resolve({ value: buffer.shift() as T, done: false });
      if (failure) return Promise.reject(failure.error);
      if (done) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve, reject) => {
        waiting = { resolve, reject };
      });
    },
    return() {
      end();
      buffer.length = 0;
      if (waiting) {
        const { resolve } = waiting;
        waiting = undefined;
        resolve({ value: undefined, done: true });
      }
      return Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]() {
      return queue;
    },
  };
  return queue;
}
