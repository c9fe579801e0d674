/**
 * W3C Trace Context on events (https://www.w3.org/TR/trace-context/): the `traceparent` and
 * `tracestate` an event carries from its publisher (PROTOCOL.md › Event input). Plain string rules,
 * shared by the zod schema, the clients' own checks and the gateway; no OpenTelemetry here.
 */

/**
 * Version 00, lowercase hex, neither id all zeros. A later version may append fields; a gateway that
 * knows only 00 refuses it rather than storing what it cannot vouch for.
 */
export const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;
/** W3C allows 32 list members; 512 characters is what a receiver must at least propagate. */
export const TRACESTATE_MAX_LENGTH = 512;

/** The parts of a valid `traceparent`. */
export interface TraceParent {
  traceId: string;
  spanId: string;
  /** The trace flags (bit 0: sampled). */
  flags: number;
}

/** The parts of `traceparent`, or undefined when it is not a valid version-00 value. */
export function parseTraceparent(traceparent: unknown): TraceParent | undefined {
  if (typeof traceparent !== 'string' || !TRACEPARENT.test(traceparent)) return undefined;
  return { traceId: traceparent.slice(3, 35), spanId: traceparent.slice(36, 52), flags: Number.parseInt(traceparent.slice(53, 55), 16) };
}

/** A `traceparent` (version 00) of a span context. */
export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `00-${traceId}-${spanId}-${(flags & 0xff).toString(16).padStart(2, '0')}`;
}
