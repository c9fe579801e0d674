/** Reconnect timing. Defaults: defaults.ts (DEFAULT_RECONNECT_*), listed in the README's options table. */
import { DEFAULT_RECONNECT_FACTOR, DEFAULT_RECONNECT_MAX_DELAY, DEFAULT_RECONNECT_MIN_DELAY } from './defaults.js';

export interface BackoffOptions {
  /** First retry delay in ms (default 250). */
  minDelay?: number;
  /** Upper bound of any delay in ms (default 10 000). */
  maxDelay?: number;
  /** Growth per failed attempt (default 2). */
  factor?: number;
}

export const defaultBackoff: Required<BackoffOptions> = { minDelay: DEFAULT_RECONNECT_MIN_DELAY, maxDelay: DEFAULT_RECONNECT_MAX_DELAY, factor: DEFAULT_RECONNECT_FACTOR };

/**
 * "Full jitter" exponential backoff: a uniform pick in [min, cap], so that clients dropped by the
 * same gateway restart do not reconnect in lockstep.
 */
export const backoffDelay = (
  attempt: number,
  // The constants rather than `defaultBackoff`, so that the bundle does not carry the object.
  { minDelay = DEFAULT_RECONNECT_MIN_DELAY, maxDelay = DEFAULT_RECONNECT_MAX_DELAY, factor = DEFAULT_RECONNECT_FACTOR }: BackoffOptions = {},
  random: () => number = Math.random,
): number => Math.round(minDelay + random() * (Math.min(maxDelay, minDelay * factor ** Math.max(0, attempt)) - minDelay));
