/**
 * Retrying with jittered exponential backoff, above all for optimistic concurrency: read the
 * eventlog, decide, `publish(event, { expectedVersion })`, and on E_EVENTFLOW_VERSION_CONFLICT
 * read again and retry. A module of its own, so that applications that do not import it do not
 * ship it.
 */
import { DEFAULT_RETRY_FACTOR, DEFAULT_RETRY_MAX_DELAY, DEFAULT_RETRY_MIN_DELAY, DEFAULT_RETRY_RETRIES } from './defaults.js';
import { assertFunction, assertSignal } from './arguments.js';
import { backoffDelay } from './backoff.js';
import { isEventflowError } from './errors.js';
import { abortError } from './requests.js';

export interface RetryOptions {
  /** Retries after the first attempt (default 5): at most `retries + 1` attempts in all. */
  retries?: number;
  /** Lower bound of every delay, and the first retry's cap, in ms (default 20). */
  minDelay?: number;
  /** Upper bound of any delay in ms (default 1000). */
  maxDelay?: number;
  /** Growth of the delay cap per failed attempt (default 2). */
  factor?: number;
  /** Aborting stops retrying: a pending delay, or the next attempt, rejects with E_EVENTFLOW_ABORTED. */
  signal?: AbortSignal | undefined;
}

export interface GenericRetryOptions extends RetryOptions {
  /** Whether the failure of attempt `tryNumber` is worth another attempt; otherwise it is rethrown. */
  shouldRetry: (error: unknown, tryNumber: number) => boolean;
}

/**
 * Calls `attempt(tryNumber)` (1 on the first call) until it resolves, and resolves with its value.
 * A failure that `shouldRetry` accepts is followed, after a delay, by another attempt, unless
 * `retries` are used up: then that failure is rethrown, as is any failure `shouldRetry` refuses.
 * The delay after attempt n is uniform in [minDelay, min(maxDelay, minDelay × factor^n)] ("full
 * jitter", as `backoffDelay`), so writers that conflicted together do not retry in lockstep.
 */
export async function retry<T>(attempt: (tryNumber: number) => Promise<T>, options: GenericRetryOptions): Promise<T> {
  assertFunction(attempt, 'attempt');
  assertFunction(options?.shouldRetry, 'options.shouldRetry');
  assertSignal(options.signal, 'options.signal');
  const { retries = DEFAULT_RETRY_RETRIES, minDelay = DEFAULT_RETRY_MIN_DELAY, maxDelay = DEFAULT_RETRY_MAX_DELAY, factor = DEFAULT_RETRY_FACTOR, signal, shouldRetry } = options;
  for (let tryNumber = 1; ; tryNumber++) {
    if (signal?.aborted) throw abortError('retry', signal);
    try {
      return await attempt(tryNumber);
    } catch (error) {
      if (tryNumber > retries || !shouldRetry(error, tryNumber)) throw error;
      await delay(backoffDelay(tryNumber, { minDelay, maxDelay: Math.max(minDelay, maxDelay), factor }), signal);
    }
  }
}

/**
 * `retry` for optimistic concurrency: retries only E_EVENTFLOW_VERSION_CONFLICT. `attempt` must
 * read the current version each time (a retry with the old one conflicts again):
 *
 *   await retryOnConflict(async () => {
 *     const log = await client.readEventlog('orders', pid);
 *     await client.publish(decide(log), { expectedVersion: log.length });
 *   });
 */
export function retryOnConflict<T>(attempt: (tryNumber: number) => Promise<T>, options: RetryOptions = {}): Promise<T> {
  return retry(attempt, { ...options, shouldRetry: (error) => isEventflowError(error, 'E_EVENTFLOW_VERSION_CONFLICT') });
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortError('retry', signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
}
