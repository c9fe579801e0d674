/**
 * Every default limit and timing of the gateway, in one place (as nats.js keeps its `DEFAULT_*`
 * in options.ts). `configDefaults` are the EVENTFLOW_* variables' defaults: config.ts applies
 * them, and gateway/test/defaults.test.ts checks that the README's configuration table states
 * the same values. The other constants are not configurable; they are named here so that code,
 * comments and documentation refer to one number.
 */

const KiB = 1024;
const MiB = 1024 * KiB;

/** The defaults of the EVENTFLOW_* variables that have one (config.ts; README "Configuration"). */
export const configDefaults = {
  EVENTFLOW_HOST: '127.0.0.1',
  EVENTFLOW_PORT: 8080,
  EVENTFLOW_STORE: 'sqlite',
  EVENTFLOW_SQLITE_PATH: './data/eventflow.db',
  EVENTFLOW_SQLITE_CACHE_MB: 64,
  // v4's defaults for its mysql2 pool (eventflow-v4.md §1.4).
  EVENTFLOW_MYSQL_HOST: '127.0.0.1',
  EVENTFLOW_MYSQL_PORT: 3306,
  EVENTFLOW_MYSQL_USER: 'root',
  EVENTFLOW_MYSQL_PASSWORD: '',
  EVENTFLOW_MYSQL_DATABASE: 'eventflow',
  EVENTFLOW_MYSQL_CONNECTION_LIMIT: 10,
  EVENTFLOW_ROUTER: 'local',
  EVENTFLOW_MESH_POLL_MS: 3_000,
  EVENTFLOW_NATS_SERVERS: 'nats://127.0.0.1:4222',
  EVENTFLOW_NATS_SUBJECT_PREFIX: 'eventflow',
  EVENTFLOW_SPOKE_NAME: 'EVENTFLOW-GATEWAY',
  EVENTFLOW_MAX_FRAME_BYTES: 1 * MiB,
  EVENTFLOW_MAX_BUFFERED_BYTES: 16 * MiB,
  EVENTFLOW_MAX_PARKED_BYTES: 4 * MiB,
  EVENTFLOW_HANDSHAKE_TIMEOUT_MS: 10_000,
  EVENTFLOW_MAX_SUBSCRIPTIONS: 1000,
  EVENTFLOW_MAX_IN_FLIGHT: 256,
  EVENTFLOW_MAX_SCAN_RATE: 50_000,
  EVENTFLOW_MAX_GROUPS_PER_CONNECTION: 100,
  EVENTFLOW_CONSUME_LEASE_MS: 30_000,
  EVENTFLOW_CONSUME_MAX_ATTEMPTS: 5,
  EVENTFLOW_MAX_GROUPS_PER_DOMAIN: 256,
  EVENTFLOW_DRAIN_TIMEOUT_MS: 10_000,
  EVENTFLOW_PING_INTERVAL_MS: 15_000,
  EVENTFLOW_MAX_PUBLISH_RATE: 1000,
  EVENTFLOW_MAX_RECEIVE_RATE: 1 * MiB,
  EVENTFLOW_MAX_DATA_KEYS: 10_000,
  // MariaDB's JSON_VALID (the check on v4's `event.data`) refuses documents nested deeper than 31
  // levels: one limit for both stores, so that an event one store takes the other takes too.
  EVENTFLOW_MAX_DATA_DEPTH: 31,
  EVENTFLOW_MAX_CONNECTIONS: 10_000,
  EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS: 1_000,
  EVENTFLOW_AUTH_TIMEOUT_MS: 10_000,
  EVENTFLOW_AUTH: 'none',
  EVENTFLOW_JWT_MAX_LIFETIME_S: 86_400,
  EVENTFLOW_LOG_LEVEL: 'info',
  EVENTFLOW_METRICS: 'on',
  EVENTFLOW_METRICS_GROUP_LABELS: 'off',
  EVENTFLOW_READY_TIMEOUT_MS: 2_000,
  EVENTFLOW_SNAPSHOT_EVERY: 100,
} as const;

// ── connections ──

/**
 * The least EVENTFLOW_MAX_FRAME_BYTES: a client's `hello` with its token must fit (an identity provider's JWT runs to a
 * few KiB). Below it every connection was closed 1009 during its handshake, and the gateway served no one.
 */
export const MIN_FRAME_BYTES = 4 * KiB;

/** After the gateway sends a close frame, how long it waits for the client's before it drops the socket. */
export const CLOSE_GRACE_MS = 1_000;
/**
 * How long the answer to a request()'s publish may wait for the request's outcome, to leave in one
 * write with it (connection/outbound.ts › holdBriefly). Far below any client's request timeout.
 */
export const REQUEST_ANSWER_HOLD_MS = 25;

/** Subscription replay pages: large enough to be quick, small enough to bound memory per subscription. */
export const REPLAY_PAGE = 500;

/**
 * Replay pages read at once, gateway-wide (connection/read-turns.ts): on SQLite each takes a turn of
 * the event loop anyway; on MySQL this leaves the rest of the pool to requests.
 */
export const REPLAY_READS_AT_ONCE = 2;

/**
 * Rows one listing request (listScheduled) reads at most; past it, the answer ends early with a
 * `next` cursor from which the client reads on.
 */
export const LIST_SCAN_ROWS = 5_000;

/**
 * Settled deliveries one latency request (readLatency) reads at most, the newest first; past it the
 * figures are of those (`truncated`), so that a window of a busy name costs one bounded index range.
 */
export const LATENCY_SCAN_ROWS = 10_000;

/** How long a replay waits for a client that takes none of its buffered frames before cutting it off (4008). */
export const REPLAY_STALL_MS = 30_000;

/** How often a replay waiting for the client's backlog looks at it again. */
export const REPLAY_DRAIN_POLL_MS = 5;

/** While a condition repeats, one summary line per this long at most (condition-log.ts). */
export const SUMMARY_EVERY_MS = 60_000;

// ── metrics ──

/**
 * With EVENTFLOW_METRICS_GROUP_LABELS=on: the consumer groups with a series of their own per gauge
 * (the most pending first); the others are summed into one series with empty labels.
 */
export const METRICS_GROUP_SERIES = 50;

// ── delivery ──

/** The dispatcher reads a domain's newly published events in pages of this many. */
export const PUMP_PAGE = 500;

/** A returning consumer's unclaimed events are read in pages of this many (Dispatcher.catchUp). */
export const CATCH_UP_PAGE = 200;

/** A claim takes at most this many events of a group's backlog in one store transaction. */
export const CLAIM_BATCH = 256;

/**
 * A group whose last claim found nothing looks again at least this often, so that what changed on
 * another gateway (a release, a settle that frees an ordered pid, a lease left by a gateway that
 * died) or a store that came back is seen without a notification.
 */
export const GROUP_POLL_MS = 1_000;

/**
 * The longest wait before a consumer's report the store has not recorded is written again by the
 * gateway (delivery/waiting-reports.ts): from GROUP_POLL_MS, doubling up to this, while the store
 * fails; all of them at once as soon as one is recorded.
 */
export const REPORT_RETRY_MAX_MS = 30_000;

/** The deepest event data MariaDB's JSON_VALID takes (31 nested objects or arrays; EVENTFLOW_MAX_DATA_DEPTH's bound with the MySQL store). */
export const MYSQL_MAX_DATA_DEPTH = 31;

/** Ledger writes (settles, releases) in one store transaction at most. */
export const LEDGER_BATCH = 500;

/** The longest delay a timer takes: Node runs a longer one after 1 ms (with a warning). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `extend` grants at most this many leases (EVENTFLOW_CONSUME_LEASE_MS) at once. */
export const MAX_EXTEND_LEASES = 10;

/** A gateway pings a hub that answers pings (ours) this often (v4/hub-pings.ts). */
export const HUB_PING_INTERVAL_MS = 2_000;

/** A hub that answers pings and sends nothing for this long is dropped and dialled again (a stopped process, a partition). */
export const HUB_PING_TIMEOUT_MS = 6_000;

/** Bytes a gateway's link to a hub may hold unsent before it is dropped as not reading (v4/mesh-router.ts). */
export const HUB_MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

/** The scheduler's poll for events scheduled by other processes; events scheduled here re-arm its timer at once. */
export const SCHEDULER_POLL_MS = 30_000;

// ── NATS router ──

/** How long start-up waits for a first NATS connection before the gateway serves without one (degraded). */
export const NATS_FIRST_CONNECT_WAIT_MS = 2_000;

/** Between attempts to reach NATS again (nats.js adds up to 100 ms jitter). */
export const NATS_RECONNECT_WAIT_MS = 500;

/**
 * nats.js sends a PING this often and drops the connection as stale when NATS_MAX_PINGS_OUT are
 * unanswered at the next one: a link that stops carrying bytes without closing (a partition) is
 * noticed within (NATS_MAX_PINGS_OUT + 1) × NATS_PING_INTERVAL_MS (3 s), then reported degraded and
 * reconnected. nats.js's own default (2 min × 2) left such a link "ready" for minutes.
 */
export const NATS_PING_INTERVAL_MS = 1_000;
export const NATS_MAX_PINGS_OUT = 2;

/**
 * Each NATS gateway says its id over NATS this often (router/nats/members.ts), so that the others tell
 * a publisher in their store that does not announce its events (router/elsewhere.ts) from one that does.
 */
export const MEMBER_HEARTBEAT_MS = 5_000;

/** A (re)connect attempt that has no answer (INFO, PONG) within this is abandoned and tried again (nats.js: 20 s). */
export const NATS_CONNECT_TIMEOUT_MS = 5_000;

/**
 * A pull of published events the store failed (a domain's, the pattern subscriptions') is made again
 * this long after, and again while it fails: it waited for the next routed event, so a request()'s
 * outcome stored just before reached no wait (nor subscriber) until then.
 */
export const PULL_AGAIN_MS = 1_000;
