/**
 * What a consumer's thrown error leads to (`consume(…, { retry })`): the event is delivered again
 * after a backoff, up to `attempts` deliveries in all (lease expiries count too), then it is failed
 * for the group and becomes a dead letter carrying the last error. Without a policy a throw records
 * `failed` at once (eventflow v4's rule) and only lease expiries are delivered again, up to
 * EVENTFLOW_CONSUME_MAX_ATTEMPTS. The vocabulary is JetStream's MaxDeliver + BackOff and BullMQ's
 * attempts + backoff.
 */
export interface RetryPolicy {
  /** Deliveries of an event in all (the first included) before it is a dead letter. */
  attempts: number;
  /** `exponential`: delayMs × 2^(attempt − 1), capped at maxDelayMs, with jitter; `fixed`: delayMs each time. */
  backoff: 'exponential' | 'fixed';
  delayMs: number;
  maxDelayMs: number;
}

/** The policy's defaults for what a client leaves out (README's consumer defaults table). */
export const RETRY_DEFAULTS: Omit<RetryPolicy, 'attempts'> = { backoff: 'exponential', delayMs: 1_000, maxDelayMs: 60_000 };

export function retryPolicy(given: Partial<RetryPolicy> & { attempts: number }): RetryPolicy {
  const policy = { ...RETRY_DEFAULTS, ...definedOnly(given) } as RetryPolicy;
  return { ...policy, maxDelayMs: Math.max(policy.maxDelayMs, policy.delayMs) };
}

/**
 * How long to wait before the delivery after `attempt` failed. Exponential delays get "equal
 * jitter" (half fixed, half random), so that events that failed together do not come back together
 * and still wait at least half the nominal delay.
 */
export function retryDelay(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  if (policy.backoff === 'fixed') return policy.delayMs;
  const nominal = Math.min(policy.maxDelayMs, policy.delayMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(nominal / 2 + (random() * nominal) / 2);
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
