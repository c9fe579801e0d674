/**
 * Every timing and limit default of the client, in one place (as nats.js's `DEFAULT_*`). Code,
 * JSDoc and the option tables of packages/core/README.md refer to these; defaults.test.ts checks
 * that the README says the same. Separate constants rather than one object: bundlers inline them,
 * so the browser bundle carries no table of names.
 *
 * `GATEWAY_*` are what the client assumes of a gateway whose `welcome` does not announce a limit
 * (older gateways announced only maxFrameBytes): the gateway's own defaults.
 */

/** ClientOptions.requestTimeout: ms until a request fails, counted from the call. */
export const DEFAULT_REQUEST_TIMEOUT = 10_000;
/** ClientOptions.handshakeTimeout: ms allowed for hello → welcome. */
export const DEFAULT_HANDSHAKE_TIMEOUT = 10_000;
/** ClientOptions.heartbeatInterval: idle ms before a ping; as long again without an answer drops the connection. */
export const DEFAULT_HEARTBEAT_INTERVAL = 20_000;
/** ClientOptions.reconnect.minDelay: first reconnect delay and lower bound of every delay, ms. */
export const DEFAULT_RECONNECT_MIN_DELAY = 250;
/** ClientOptions.reconnect.maxDelay: upper bound of any reconnect delay, ms. */
export const DEFAULT_RECONNECT_MAX_DELAY = 10_000;
/** ClientOptions.reconnect.factor: growth of the delay cap per failed attempt. */
export const DEFAULT_RECONNECT_FACTOR = 2;
/** wait() and request(): ms to wait for the outcome once the wait is registered. */
export const DEFAULT_WAIT_TIMEOUT = 10_000;
/** close({ drainTimeout }): ms running consume handlers get to finish and settle. */
export const DEFAULT_DRAIN_TIMEOUT = 30_000;
/** events({ bufferSize }): events an unread iterator holds before it drops the oldest. */
export const DEFAULT_BUFFER_SIZE = 1024;
/** retry() / retryOnConflict() `retries`: retries after the first attempt. */
export const DEFAULT_RETRY_RETRIES = 5;
/** retry() `minDelay`: lower bound of every delay and the first retry's cap, ms. */
export const DEFAULT_RETRY_MIN_DELAY = 20;
/** retry() `maxDelay`: upper bound of any delay, ms. */
export const DEFAULT_RETRY_MAX_DELAY = 1000;
/** retry() `factor`: growth of the delay cap per failed attempt. */
export const DEFAULT_RETRY_FACTOR = 2;

/** The gateway's EVENTFLOW_MAX_IN_FLIGHT, when its welcome does not announce `maxInFlight`. */
export const GATEWAY_MAX_IN_FLIGHT = 256;
/** The gateway's EVENTFLOW_MAX_PUBLISH_RATE (writes per second, 0 = unlimited), when not announced. */
export const GATEWAY_MAX_PUBLISH_RATE = 1000;
/** The gateway's EVENTFLOW_CONSUME_LEASE_MS, when its welcome does not announce `leaseMs`. */
export const GATEWAY_LEASE_MS = 30_000;
/**
 * consume({ concurrency }): deliveries open to one consumer at once when it does not say (the
 * gateway's default, which protects a worker from a backlog: BullMQ's `concurrency` per worker,
 * JetStream's MaxAckPending per consumer).
 */
export const DEFAULT_CONSUME_CONCURRENCY = 16;
/** The largest consume({ concurrency }) a gateway takes. */
export const MAX_CONSUME_CONCURRENCY = 1000;
/**
 * Deliveries of one event at most, for a consumer's `retry.attempts` and the gateway's
 * EVENTFLOW_CONSUME_MAX_ATTEMPTS alike: a claim dead-letters expired leases past the most lenient of
 * the two, so one bound keeps either from outliving the other.
 */
export const MAX_CONSUME_ATTEMPTS = 100;
/** Settles in one settleMany request, at most (a gateway announces its own in welcome.limits.maxSettleBatch). */
export const MAX_SETTLE_BATCH = 256;
