/**
 * Waiting in tests: `eventually` polls for a condition, `fence` proves "nothing (more) arrived",
 * `sleep` is for the few tests where time itself is what is tested (leases, timers, rate windows).
 */

export interface EventuallyOptions {
  /** Milliseconds between two checks (default 10). */
  every?: number;
}

/** Polls until `check` returns a value other than undefined/null/false, or fails after `timeout` ms. */
export async function eventually<T>(
  check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeout = 5_000,
  what = 'condition',
  options: EventuallyOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await sleep(options.every ?? 10);
  }
}

/**
 * Waits `ms` milliseconds. Only where the passing of time is what a test proves (a lease expires,
 * a timer has not fired yet, a rate window reopens); "nothing more arrives" is a `fence`.
 */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The event name of fence markers that need no listener of the test's own. */
export const FENCE_NAME = 'test-fence';

/** Every fence marker's pid starts so: listeners that count events leave markers out (`isFence`). */
export const FENCE_PID = 'test-fence-';

/** Whether an event is a fence marker (see `fence`). */
export const isFence = (event: { pid: string }): boolean => event.pid.startsWith(FENCE_PID);

/**
 * Proves that whatever was going to arrive has arrived, without sleeping: `mark` sends a marker
 * down the same ordered stream as the things under test (publishes an event in their domain, which
 * the gateway hands out in position order after every earlier one; or sends a request on the same
 * connection, answered after every frame already sent) and `arrived(marker)` says when the marker
 * came out at the other end. Once it has, everything sent before it has arrived too, so an
 * assertion that nothing (more) arrived is now final.
 */
export async function fence<M>(
  mark: () => M | Promise<M>,
  /** Omitted for a request whose answer is the marker: `mark` resolves once it is back. */
  arrived: (marker: M) => boolean | Promise<boolean> = () => true,
  timeout = 5_000,
  what = 'the fence marker',
): Promise<void> {
  const marker = await mark();
  await eventually(() => arrived(marker), timeout, what);
}
