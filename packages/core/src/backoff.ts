/** Reconnect timing. Defaults are documented in the README's client options table. */
export interface BackoffOptions {
  /** First retry delay in ms (default 250). */
  minDelay?: number;
  /** Upper bound of any delay in ms (default 10 000). */
  maxDelay?: number;
  /** Growth per failed attempt (default 2). */
  factor?: number;
}

export const defaultBackoff: Required<BackoffOptions> = { minDelay: 250, maxDelay: 10_000, factor: 2 };

/**
 * "Full jitter" exponential backoff: a uniform pick in [min, cap], so that clients dropped by the
 * same gateway restart do not reconnect in lockstep.
 */
export const backoffDelay = (
  attempt: number,
  // The defaults of `defaultBackoff`, repeated so that the bundle does not carry the object.
  { minDelay = 250, maxDelay = 10_000, factor = 2 }: BackoffOptions = {},
  random: () => number = Math.random,
): number => Math.round(minDelay + random() * (Math.min(maxDelay, minDelay * factor ** Math.max(0, attempt)) - minDelay));
