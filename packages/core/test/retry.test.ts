/** retry / retryOnConflict: what is retried, how often, how long between tries, and aborting. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EventflowError, isEventflowError } from '../src/errors.js';
import { retry, retryOnConflict } from '../src/retry.js';

const conflict = (): EventflowError =>
  new EventflowError('E_EVENTFLOW_VERSION_CONFLICT', 'orders › p1 is at version 2, not 1: read the eventlog and retry', {
    details: { domain: 'orders', pid: 'p1', currentVersion: 2, expectedVersion: 1 },
  });

/** An attempt that fails with `failures` in turn, then resolves with 'done'; records when each try ran (fake clock). */
function scripted(failures: unknown[]) {
  const calls: Array<{ tryNumber: number; at: number }> = [];
  const attempt = vi.fn(async (tryNumber: number) => {
    calls.push({ tryNumber, at: Date.now() });
    const failure = failures.shift();
    if (failure !== undefined) throw failure;
    return 'done';
  });
  const gaps = (): number[] => calls.slice(1).map((call, i) => call.at - (calls[i] as { at: number }).at);
  return { attempt, calls, gaps };
}

/** The settled outcome of `promise` once every timer has run. */
async function settle<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  const outcome = promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  await vi.runAllTimersAsync();
  return outcome;
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('retryOnConflict', () => {
  it('resolves with the first success, numbering tries from 1', async () => {
    const { attempt, calls } = scripted([conflict(), conflict()]);
    expect(await settle(retryOnConflict(attempt))).toEqual({ value: 'done' });
    expect(calls.map((call) => call.tryNumber)).toEqual([1, 2, 3]);
  });

  it('does not wait before the first try, nor retry a success', async () => {
    const { attempt } = scripted([]);
    await expect(retryOnConflict(attempt)).resolves.toBe('done');
    expect(attempt).toHaveBeenCalledTimes(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('retries only E_EVENTFLOW_VERSION_CONFLICT: other errors are rethrown at once', async () => {
    for (const failure of [new EventflowError('E_EVENTFLOW_DUPLICATE_ID', 'taken'), new Error('boom'), 'a string']) {
      const { attempt } = scripted([conflict(), failure]);
      const { error } = await settle(retryOnConflict(attempt));
      expect(error).toBe(failure);
      expect(attempt).toHaveBeenCalledTimes(2);
    }
  });

  it('gives up after `retries` retries and rethrows the last conflict with its details', async () => {
    const failures = Array.from({ length: 10 }, conflict);
    const last = failures[3];
    const { attempt } = scripted(failures);
    const { error } = await settle(retryOnConflict(attempt, { retries: 3 }));
    expect(attempt).toHaveBeenCalledTimes(4);
    expect(error).toBe(last);
    expect(isEventflowError(error, 'E_EVENTFLOW_VERSION_CONFLICT')).toBe(true);
    expect((error as EventflowError).details).toMatchObject({ currentVersion: 2, expectedVersion: 1 });
  });

  it('defaults to 5 retries; retries 0 means one try', async () => {
    const many = scripted(Array.from({ length: 10 }, conflict));
    await settle(retryOnConflict(many.attempt));
    expect(many.attempt).toHaveBeenCalledTimes(6);
    const once = scripted([conflict()]);
    const { error } = await settle(retryOnConflict(once.attempt, { retries: 0 }));
    expect(isEventflowError(error, 'E_EVENTFLOW_VERSION_CONFLICT')).toBe(true);
    expect(once.attempt).toHaveBeenCalledTimes(1);
  });

  it('backs off exponentially up to maxDelay at the top of the jitter range', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(1);
    const { attempt, gaps } = scripted(Array.from({ length: 6 }, conflict));
    await settle(retryOnConflict(attempt, { retries: 6, minDelay: 10, maxDelay: 100 }));
    // After try n the cap is min(maxDelay, minDelay × 2^n).
    expect(gaps()).toEqual([20, 40, 80, 100, 100, 100]);
  });

  it('waits minDelay at the bottom of the jitter range (defaults: 20 ms)', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0);
    const { attempt, gaps } = scripted(Array.from({ length: 5 }, conflict));
    await settle(retryOnConflict(attempt));
    expect(gaps()).toEqual([20, 20, 20, 20, 20]);
  });

  it('jitters every delay within [minDelay, min(maxDelay, minDelay × factor^n)], defaults 20 and 1000 ms', async () => {
    const { attempt, gaps } = scripted(Array.from({ length: 5 }, conflict));
    await settle(retryOnConflict(attempt));
    gaps().forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual(20);
      expect(gap).toBeLessThanOrEqual(Math.min(1000, 20 * 2 ** (i + 1)));
    });
    const spread = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const run = scripted([conflict()]);
      await settle(retryOnConflict(run.attempt, { minDelay: 1, maxDelay: 1000, factor: 1000 }));
      spread.add(run.gaps()[0] as number);
    }
    // Writers that conflicted together do not come back in lockstep.
    expect(spread.size).toBeGreaterThan(5);
  });

  it('treats a maxDelay below minDelay as minDelay', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(1);
    const { attempt, gaps } = scripted([conflict(), conflict()]);
    await settle(retryOnConflict(attempt, { minDelay: 50, maxDelay: 10 }));
    expect(gaps()).toEqual([50, 50]);
  });
});

describe('aborting', () => {
  it('does not try at all when the signal has already aborted', async () => {
    const { attempt } = scripted([]);
    const reason = new Error('stop');
    const { error } = await settle(retryOnConflict(attempt, { signal: AbortSignal.abort(reason) }));
    expect(isEventflowError(error, 'E_EVENTFLOW_ABORTED'), String(error)).toBe(true);
    expect((error as EventflowError).cause).toBe(reason);
    expect(attempt).not.toHaveBeenCalled();
  });

  it('stops a pending delay at once and tries no more', async () => {
    const controller = new AbortController();
    const { attempt } = scripted([conflict(), conflict()]);
    const outcome = retryOnConflict(attempt, { minDelay: 1000, maxDelay: 1000, signal: controller.signal }).then(
      () => undefined,
      (error: unknown) => error,
    );
    await vi.advanceTimersByTimeAsync(500);
    expect(attempt).toHaveBeenCalledTimes(1);
    controller.abort();
    const error = await outcome;
    expect(isEventflowError(error, 'E_EVENTFLOW_ABORTED'), String(error)).toBe(true);
    await vi.runAllTimersAsync();
    expect(attempt).toHaveBeenCalledTimes(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('lets a running try finish: a success after the abort still resolves', async () => {
    const controller = new AbortController();
    const outcome = retryOnConflict(async () => {
      controller.abort();
      return 'stored';
    }, { signal: controller.signal });
    await expect(outcome).resolves.toBe('stored');
  });

  it('a conflict after the abort rejects with E_EVENTFLOW_ABORTED instead of waiting', async () => {
    const controller = new AbortController();
    const attempt = vi.fn(async () => {
      controller.abort();
      throw conflict();
    });
    const { error } = await settle(retryOnConflict(attempt, { signal: controller.signal }));
    expect(isEventflowError(error, 'E_EVENTFLOW_ABORTED'), String(error)).toBe(true);
    expect(attempt).toHaveBeenCalledTimes(1);
  });
});

describe('retry', () => {
  it('retries what shouldRetry accepts, passing it the error and the try number', async () => {
    const flaky = new Error('flaky');
    const { attempt } = scripted([flaky, flaky]);
    const shouldRetry = vi.fn((error: unknown) => error === flaky);
    expect(await settle(retry(attempt, { shouldRetry }))).toEqual({ value: 'done' });
    expect(shouldRetry.mock.calls).toEqual([
      [flaky, 1],
      [flaky, 2],
    ]);
  });

  it('rethrows what shouldRetry refuses, conflicts included', async () => {
    const failure = conflict();
    const { attempt } = scripted([failure]);
    const { error } = await settle(retry(attempt, { shouldRetry: () => false }));
    expect(error).toBe(failure);
    expect(attempt).toHaveBeenCalledTimes(1);
  });

  it('does not ask shouldRetry once retries are used up', async () => {
    const { attempt } = scripted([new Error('a'), new Error('b'), new Error('c')]);
    const shouldRetry = vi.fn(() => true);
    const { error } = await settle(retry(attempt, { shouldRetry, retries: 1 }));
    expect((error as Error).message).toBe('b');
    expect(shouldRetry).toHaveBeenCalledTimes(1);
  });
});
