/**
 * Gateway configuration: one zod schema, read from EVENTFLOW_* environment variables. An invalid
 * value fails start with a message naming the variable.
 */
import * as z from 'zod';
import { EventflowError, MAX_CONSUME_ATTEMPTS } from '@eventflow/core';
import { actions, type Action } from './connection/auth.js';
import { parseAllowedHosts, parseAllowedOrigins } from './connection/limits.js';
import type { MysqlStoreOptions } from './store/mysql/mysql.js';
import type { StoreTarget } from './startup-failure.js';
import { decimalNumbers, describeConfigIssue, expected, unknownVariables } from './config-issues.js';
import { readV4Environment, unsupported, v4Aliases } from './v4-env.js';
import { configDefaults, MAX_EXTEND_LEASES, MAX_TIMER_MS, MIN_FRAME_BYTES, MYSQL_MAX_DATA_DEPTH } from './defaults.js';

// Each classic zod schema costs some 25–40 µs to build, and this one is built at every start
// (bench/README.md › start): the number schemas take their checks in one .check() (one clone instead
// of one per .int()/.min()/.max()), and settings of the same kind share one schema.
const port = z.coerce.number({ error: expected.port }).check(z.int({ error: expected.port }), z.gte(0, { error: expected.port }), z.lte(65535, { error: expected.port }));
const positiveInt = z.coerce.number({ error: expected.positiveInt }).check(z.int({ error: expected.positiveInt }), z.gt(0, { error: expected.positiveInt }));
const nonNegativeInt = z.coerce.number({ error: expected.nonNegativeInt }).check(z.int({ error: expected.nonNegativeInt }), z.gte(0, { error: expected.nonNegativeInt }));
const text = z.string().min(1);
const optionalText = text.optional();

const wholeMs = (min: 0 | 1, max: number, error: string) => z.coerce.number({ error }).check(z.int({ error }), z.gte(min, { error }), z.lte(max, { error }));
const durations = new Map<string, ReturnType<typeof wholeMs>>();
/**
 * A duration in ms that a timer waits, at least `min`, at most `max` (MAX_TIMER_MS, or less where it
 * is multiplied): a longer one ran at once, so that an auth timeout of 25 days closed every
 * connection as it came and a poll interval that long spun.
 */
export const durationMs = (min: 0 | 1, max = MAX_TIMER_MS, why = 'the longest a timer waits') => {
  const error = `expected a whole number of ms from ${min} to ${max} (${max}: ${why})`;
  let schema = durations.get(error);
  if (schema === undefined) durations.set(error, (schema = wholeMs(min, max, error)));
  return schema;
};

/** Each key is the environment variable it is read from. */
export const configSchema = z.object({
  EVENTFLOW_HOST: text.default(configDefaults.EVENTFLOW_HOST),
  EVENTFLOW_PORT: port.default(configDefaults.EVENTFLOW_PORT),
  /** `sqlite`: an embedded file. `mysql`: MySQL 8 / MariaDB 10.11 with eventflow v4's tables, shareable with v4 hubs and spokes. */
  EVENTFLOW_STORE: z.enum(['sqlite', 'mysql']).default(configDefaults.EVENTFLOW_STORE),
  EVENTFLOW_SQLITE_PATH: text.default(configDefaults.EVENTFLOW_SQLITE_PATH),
  EVENTFLOW_SQLITE_CACHE_MB: z.coerce.number({ error: expected.cacheMb }).check(z.int({ error: expected.cacheMb }), z.gte(1, { error: expected.cacheMb }), z.lte(65_536, { error: expected.cacheMb })).default(configDefaults.EVENTFLOW_SQLITE_CACHE_MB),
  // v4's names and defaults for its mysql2 pool (eventflow-v4.md §1.4); the charset is always utf8mb4.
  // v4 spells these two EVENTFLOW_MYSQL_PASS and EVENTFLOW_MYSQL_DB: read as aliases (v4-env.ts).
  EVENTFLOW_MYSQL_HOST: text.default(configDefaults.EVENTFLOW_MYSQL_HOST),
  EVENTFLOW_MYSQL_PORT: port.min(1, { error: 'expected a port number (an integer from 1 to 65535)' }).default(configDefaults.EVENTFLOW_MYSQL_PORT),
  EVENTFLOW_MYSQL_USER: text.default(configDefaults.EVENTFLOW_MYSQL_USER),
  EVENTFLOW_MYSQL_PASSWORD: z.string().default(configDefaults.EVENTFLOW_MYSQL_PASSWORD),
  EVENTFLOW_MYSQL_DATABASE: z.string().min(1).max(64, { error: 'must be at most 64 characters (a MySQL database name)' }).default(configDefaults.EVENTFLOW_MYSQL_DATABASE),
  EVENTFLOW_MYSQL_CONNECTION_LIMIT: positiveInt.default(configDefaults.EVENTFLOW_MYSQL_CONNECTION_LIMIT),
  /**
   * `local`: this gateway routes in process. `hubs`: it joins an eventflow v4 mesh as a spoke of
   * every online hub in the shared database (needs EVENTFLOW_STORE=mysql and the EVENTFLOW_CERT_*
   * settings, at least EVENTFLOW_CERT_PASS_ENCRYPTION_KEY). `nats`: gateways on one MySQL store
   * notify each other over NATS (EVENTFLOW_NATS_*).
   */
  EVENTFLOW_ROUTER: z.enum(['local', 'hubs', 'nats']).default(configDefaults.EVENTFLOW_ROUTER),
  /** With EVENTFLOW_ROUTER=hubs: how often the `hub` table is read for hubs to connect to. */
  EVENTFLOW_MESH_POLL_MS: durationMs(1).default(configDefaults.EVENTFLOW_MESH_POLL_MS),
  /** With EVENTFLOW_ROUTER=nats: comma-separated server URLs (nats://, tls://), tried in turn. */
  EVENTFLOW_NATS_SERVERS: z
    .string()
    .refine((value) => value.split(',').every((url) => /^(nats|tls):\/\/[^\s,]+$/.test(url.trim())), { error: 'must be comma-separated nats:// or tls:// URLs' })
    .default(configDefaults.EVENTFLOW_NATS_SERVERS),
  /** The first tokens of every subject this deployment uses: several deployments can share one NATS. */
  EVENTFLOW_NATS_SUBJECT_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, { error: 'must be dot-separated tokens of A-Z a-z 0-9 _ -' })
    .default(configDefaults.EVENTFLOW_NATS_SUBJECT_PREFIX),
  /** NATS authentication, passed to nats.js: a token, a user and password, or a credentials (.creds) file. */
  EVENTFLOW_NATS_TOKEN: optionalText,
  EVENTFLOW_NATS_USER: optionalText,
  EVENTFLOW_NATS_PASSWORD: optionalText,
  EVENTFLOW_NATS_CREDS_FILE: optionalText,
  /** TLS towards NATS (PEM files): a CA to trust, a client certificate and key; any of them turns TLS on. */
  EVENTFLOW_NATS_TLS_CA_FILE: optionalText,
  EVENTFLOW_NATS_TLS_CERT_FILE: optionalText,
  EVENTFLOW_NATS_TLS_KEY_FILE: optionalText,
  /** The NAME of v4's certificate scheme for this gateway: its intermediate and id suffix. */
  EVENTFLOW_SPOKE_NAME: z
    .string()
    .regex(/^[A-Za-z0-9.-]{1,40}$/, { error: 'must be 1–40 characters of A-Z a-z 0-9 . -' })
    .default(configDefaults.EVENTFLOW_SPOKE_NAME),
  /** Frames above this many bytes close the connection with 1009. */
  EVENTFLOW_MAX_FRAME_BYTES: z.coerce
    .number({ error: expected.frameBytes })
    .check(z.int({ error: expected.frameBytes }), z.gte(MIN_FRAME_BYTES, { error: expected.frameBytes }))
    .default(configDefaults.EVENTFLOW_MAX_FRAME_BYTES),
  /** A client whose unsent frames exceed this many bytes is disconnected with 4008 and resumes. */
  EVENTFLOW_MAX_BUFFERED_BYTES: positiveInt.default(configDefaults.EVENTFLOW_MAX_BUFFERED_BYTES),
  /**
   * Live events a connection holds back while its subscriptions replay (their frames' bytes, all
   * replays of the connection together). Beyond, they are dropped and the replay reads them from
   * the store: the client still gets every event once, in order.
   */
  EVENTFLOW_MAX_PARKED_BYTES: positiveInt.default(configDefaults.EVENTFLOW_MAX_PARKED_BYTES),
  EVENTFLOW_HANDSHAKE_TIMEOUT_MS: durationMs(1).default(configDefaults.EVENTFLOW_HANDSHAKE_TIMEOUT_MS),
  /** Subscriptions + consumers + waits one connection may hold; one more is refused with E_EVENTFLOW_LIMIT_EXCEEDED. */
  EVENTFLOW_MAX_SUBSCRIPTIONS: positiveInt.default(configDefaults.EVENTFLOW_MAX_SUBSCRIPTIONS),
  /** Requests one connection may have unanswered; one more is refused with E_EVENTFLOW_LIMIT_EXCEEDED. */
  EVENTFLOW_MAX_IN_FLIGHT: positiveInt.default(configDefaults.EVENTFLOW_MAX_IN_FLIGHT),
  /**
   * Rows per second (burst one second's worth) that one connection's subscription replays may read
   * from the store without sending them (a pattern subscription's pages of other domains); past it
   * its replays pause until the budget is back, and still complete. 0 = unlimited.
   */
  EVENTFLOW_MAX_SCAN_RATE: nonNegativeInt.default(configDefaults.EVENTFLOW_MAX_SCAN_RATE),
  /**
   * Consumer groups (distinct domain, name, group) one connection may register consumers in over its
   * life; one more `consume` is refused with E_EVENTFLOW_LIMIT_EXCEEDED. Groups are durable: this
   * bounds how many one connection can create.
   */
  EVENTFLOW_MAX_GROUPS_PER_CONNECTION: positiveInt.default(configDefaults.EVENTFLOW_MAX_GROUPS_PER_CONNECTION),
  /**
   * How long a consumer has to settle a delivery (or `extend` it) before it is revoked and the event
   * goes to a consumer again, another one if there is one.
   */
  EVENTFLOW_CONSUME_LEASE_MS: durationMs(1, Math.floor(MAX_TIMER_MS / MAX_EXTEND_LEASES), `an extend grants up to ${MAX_EXTEND_LEASES} leases, and a timer waits at most ${MAX_TIMER_MS} ms`).default(configDefaults.EVENTFLOW_CONSUME_LEASE_MS),
  /**
   * Deliveries of one event; when the last one is not settled the event is marked failed and recorded
   * as a dead letter. Bounded as a consumer's retry.attempts is: a claim takes expired leases over under
   * the most lenient of the two, so an unbounded one kept an event going long after every policy gave up.
   */
  EVENTFLOW_CONSUME_MAX_ATTEMPTS: z.coerce
    .number({ error: expected.attempts })
    .check(z.int({ error: expected.attempts }), z.gte(1, { error: expected.attempts }), z.lte(MAX_CONSUME_ATTEMPTS, { error: expected.attempts }))
    .default(configDefaults.EVENTFLOW_CONSUME_MAX_ATTEMPTS),
  EVENTFLOW_MAX_GROUPS_PER_DOMAIN: positiveInt.default(configDefaults.EVENTFLOW_MAX_GROUPS_PER_DOMAIN),
  /**
   * readEventlogState stores a snapshot of the composed state when it folded this many events after
   * the latest one (store/snapshots.ts); 0: no snapshots (neither read nor stored), every read folds the whole eventlog.
   */
  EVENTFLOW_SNAPSHOT_EVERY: nonNegativeInt.default(configDefaults.EVENTFLOW_SNAPSHOT_EVERY),
  /** On stop: how long running consume handlers may still settle before their leases are released. */
  EVENTFLOW_DRAIN_TIMEOUT_MS: durationMs(0).default(configDefaults.EVENTFLOW_DRAIN_TIMEOUT_MS),
  /**
   * A client connection silent this long is pinged, and terminated when it is silent as long again
   * (server/liveness.ts): a vanished consumer's leases then end with its connection. 0 = never.
   */
  EVENTFLOW_PING_INTERVAL_MS: durationMs(0).default(configDefaults.EVENTFLOW_PING_INTERVAL_MS),
  /** publish/persist/schedule per second and connection (burst = the rate); beyond: E_EVENTFLOW_RATE_LIMITED. 0 = unlimited. */
  EVENTFLOW_MAX_PUBLISH_RATE: nonNegativeInt.default(configDefaults.EVENTFLOW_MAX_PUBLISH_RATE),
  /**
   * Bytes of inbound frames per second and connection (token bucket, burst = one second's worth;
   * a frame larger than what is left is taken and the connection pays it back). A connection over
   * its budget is not read from until the budget is back (TCP backpressure: its frames wait, none
   * is refused). Bounds the parsing work one connection can cause. 0 = unlimited.
   */
  EVENTFLOW_MAX_RECEIVE_RATE: nonNegativeInt.default(configDefaults.EVENTFLOW_MAX_RECEIVE_RATE),
  /** Values (object members + array elements, counted through every level) in one event's `data`; beyond: E_EVENTFLOW_INVALID_INPUT. */
  EVENTFLOW_MAX_DATA_KEYS: positiveInt.default(configDefaults.EVENTFLOW_MAX_DATA_KEYS),
  /** Nesting depth of one event's `data` (the object itself is depth 1); beyond: E_EVENTFLOW_INVALID_INPUT. */
  EVENTFLOW_MAX_DATA_DEPTH: positiveInt.default(configDefaults.EVENTFLOW_MAX_DATA_DEPTH),
  /** Open connections per gateway; one more WebSocket upgrade is refused with HTTP 503 and E_EVENTFLOW_LIMIT_EXCEEDED. */
  EVENTFLOW_MAX_CONNECTIONS: positiveInt.default(configDefaults.EVENTFLOW_MAX_CONNECTIONS),
  /**
   * With EVENTFLOW_AUTH=jwt: connections without a valid token yet (before `hello` or anonymous);
   * one more upgrade is refused with HTTP 503 and E_EVENTFLOW_LIMIT_EXCEEDED.
   */
  EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS: positiveInt.default(configDefaults.EVENTFLOW_MAX_UNAUTHENTICATED_CONNECTIONS),
  /**
   * With EVENTFLOW_AUTH=jwt and no EVENTFLOW_AUTH_ANONYMOUS rights: a connection that has not
   * presented a valid token (in `hello` or `authenticate`) this long after it opened is closed with 4408.
   */
  EVENTFLOW_AUTH_TIMEOUT_MS: durationMs(1).default(configDefaults.EVENTFLOW_AUTH_TIMEOUT_MS),
  /**
   * Comma-separated `Origin` values allowed to open a WebSocket (exact match, `*` = any). Unset:
   * requests without Origin (non-browser clients) and loopback pages (http(s)://localhost,
   * 127.0.0.1, [::1], any port). Other upgrades are refused with HTTP 403.
   */
  EVENTFLOW_ALLOWED_ORIGINS: z
    .string()
    .transform((value, context) => {
      const parsed = parseAllowedOrigins(value);
      if ('origins' in parsed) return parsed.origins;
      context.addIssue({ code: 'custom', message: parsed.problem });
      return z.NEVER;
    })
    .optional(),
  /**
   * Comma-separated host names the HTTP routes (/healthz, /readyz, /metrics, the console, the demo)
   * answer in the `Host` header (any port; `*` = any). Unset: loopback names, IP addresses and
   * EVENTFLOW_HOST. Others get 421: a page of another site that has its name resolve to this
   * gateway (DNS rebinding) must not read it. WebSocket upgrades are checked by their Origin instead.
   */
  EVENTFLOW_ALLOWED_HOSTS: z
    .string()
    .transform((value, context) => {
      const parsed = parseAllowedHosts(value);
      if ('hosts' in parsed) return parsed.hosts;
      context.addIssue({ code: 'custom', message: parsed.problem });
      return z.NEVER;
    })
    .optional(),
  /**
   * `none`: no authentication, every connection may do everything (keep the gateway on loopback or
   * behind a trusted proxy). `jwt`: connections present a JWT in `hello`; its `eventflow` claim
   * lists the domains allowed per action (see README "Authentication").
   */
  EVENTFLOW_AUTH: z.enum(['none', 'jwt']).default(configDefaults.EVENTFLOW_AUTH),
  /** HS256 shared secret (at least 32 characters). */
  EVENTFLOW_JWT_SECRET: z.string().min(32, { error: 'must be at least 32 characters (256 bits) for HS256' }).optional(),
  /** PEM (SPKI) public key: RSA for RS256, P-256 for ES256. Literal "\n" sequences are read as newlines. */
  EVENTFLOW_JWT_PUBLIC_KEY: optionalText,
  /** When set, tokens must carry this `iss`. */
  EVENTFLOW_JWT_ISSUER: optionalText,
  /** When set, tokens must carry this `aud`. */
  EVENTFLOW_JWT_AUDIENCE: optionalText,
  /**
   * With EVENTFLOW_AUTH=jwt: the longest a token's rights last, counted from its `iat`, and the
   * longest a connection holds token rights (`authenticate` cannot extend it): then close 4401.
   * Tokens must carry `exp`.
   */
  EVENTFLOW_JWT_MAX_LIFETIME_S: positiveInt.default(configDefaults.EVENTFLOW_JWT_MAX_LIFETIME_S),
  /** With EVENTFLOW_AUTH=jwt: comma-separated actions a connection without a token may do on every domain (default: none). */
  EVENTFLOW_AUTH_ANONYMOUS: z
    .string()
    .transform((value, context) => {
      const list = value.split(',').map((item) => item.trim()).filter(Boolean);
      const unknown = list.filter((item) => !(actions as readonly string[]).includes(item));
      if (unknown.length === 0) return list as Action[];
      context.addIssue({ code: 'custom', message: `unknown action(s) ${unknown.join(', ')}; expected a comma-separated list of ${actions.join(', ')}` });
      return z.NEVER;
    })
    .default([]),
  /** Directory with the built demo dashboard, served at `/` when it exists. */
  EVENTFLOW_DEMO_DIR: z.string().optional(),
  /**
   * Directory with the built console, served at `/` (at `/console/` when the demo is at `/`);
   * default: the build inside the gateway package (server/sites.ts). `off`: no console.
   */
  EVENTFLOW_CONSOLE_DIR: z.string().optional(),
  /**
   * The console's link from a trace id to the operator's tracing UI: an http(s) URL with `{traceId}`
   * (Jaeger `http://jaeger:16686/trace/{traceId}`, Grafana Tempo, Honeycomb). Unset: ids only.
   */
  EVENTFLOW_TRACE_LINK: z
    .string()
    .refine((value) => /^https?:\/\/[^\s]+$/.test(value) && value.includes('{traceId}'), { message: 'must be an http(s) URL containing {traceId}, e.g. http://localhost:16686/trace/{traceId}' })
    .optional(),
  EVENTFLOW_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default(configDefaults.EVENTFLOW_LOG_LEVEL),
  /**
   * `on`: Prometheus metrics at GET /metrics on the gateway's port, which is loopback unless
   * EVENTFLOW_HOST says otherwise: on a reachable host, put it behind the proxy that guards the
   * gateway or turn it `off`. They hold counts and latencies only, no event data or ids.
   */
  EVENTFLOW_METRICS: z.enum(['on', 'off']).default(configDefaults.EVENTFLOW_METRICS),
  /**
   * `on`: the consumer group gauges carry `domain`, `name` and `group` labels (the
   * METRICS_GROUP_SERIES groups with the most pending events; the rest summed under empty labels).
   * `off`: one series per gauge over all groups, naming no domain or group: /metrics answers anyone
   * who reaches the port, and those names are tenants'.
   */
  EVENTFLOW_METRICS_GROUP_LABELS: z.enum(['on', 'off']).default(configDefaults.EVENTFLOW_METRICS_GROUP_LABELS),
  /** How long /readyz waits for the store's answer before it reports the store not ready. */
  EVENTFLOW_READY_TIMEOUT_MS: durationMs(1).default(configDefaults.EVENTFLOW_READY_TIMEOUT_MS),
  /** The gateway's identity in event_published (publisher, hub, consumer); generated when unset. */
  EVENTFLOW_GATEWAY_ID: z
    .string()
    .regex(/^[A-Za-z0-9.-]{1,64}$/, { error: 'must be 1–64 characters of A-Z a-z 0-9 . -' })
    .optional(),
});

export type GatewayConfig = z.infer<typeof configSchema>;
export type GatewayConfigInput = z.input<typeof configSchema>;

/** The MySQL store's connection settings. */
export function mysqlOptions(config: GatewayConfig): MysqlStoreOptions {
  return {
    host: config.EVENTFLOW_MYSQL_HOST,
    port: config.EVENTFLOW_MYSQL_PORT,
    user: config.EVENTFLOW_MYSQL_USER,
    password: config.EVENTFLOW_MYSQL_PASSWORD,
    database: config.EVENTFLOW_MYSQL_DATABASE,
    connectionLimit: config.EVENTFLOW_MYSQL_CONNECTION_LIMIT,
    // In a hub mesh, eventflow v4 spokes write to the same tables.
    v4Writers: config.EVENTFLOW_ROUTER === 'hubs',
  };
}

/** What the store is, for messages: the SQLite file or the MySQL server, database and user. */
export function storeTarget(config: GatewayConfig): StoreTarget {
  return config.EVENTFLOW_STORE === 'mysql'
    ? { kind: 'mysql', host: config.EVENTFLOW_MYSQL_HOST, port: config.EVENTFLOW_MYSQL_PORT, database: config.EVENTFLOW_MYSQL_DATABASE, user: config.EVENTFLOW_MYSQL_USER }
    : { kind: 'sqlite', path: config.EVENTFLOW_SQLITE_PATH };
}

/** Parses a config from environment-style values; throws E_EVENTFLOW_CONFIG naming each bad variable. */
export function parseConfig(values: Record<string, string | number | undefined>): GatewayConfig {
  const v4 = readV4Environment(values);
  const relevant = Object.fromEntries(Object.entries(v4.values).filter(([key, value]) => key.startsWith('EVENTFLOW_') && value !== '' && value !== undefined));
  const parsed = configSchema
    // One .check() with every rule: a .refine() each would clone the object schema once per rule.
    .check(
      z.refine((config) => config.EVENTFLOW_ROUTER !== 'hubs' || config.EVENTFLOW_STORE === 'mysql', {
        error: 'EVENTFLOW_ROUTER=hubs needs EVENTFLOW_STORE=mysql: the hub mesh shares eventflow v4 tables',
        path: ['EVENTFLOW_ROUTER'],
      }),
      z.refine((config) => config.EVENTFLOW_STORE !== 'mysql' || config.EVENTFLOW_MAX_DATA_DEPTH <= MYSQL_MAX_DATA_DEPTH, {
        error: `EVENTFLOW_MAX_DATA_DEPTH is at most ${MYSQL_MAX_DATA_DEPTH} with EVENTFLOW_STORE=mysql: MariaDB's JSON_VALID, the check on v4's event.data, refuses deeper documents, and every such publish would fail in the store`,
        path: ['EVENTFLOW_MAX_DATA_DEPTH'],
      }),
      z.refine((config) => config.EVENTFLOW_ROUTER !== 'nats' || config.EVENTFLOW_STORE === 'mysql', {
        error: 'EVENTFLOW_ROUTER=nats needs EVENTFLOW_STORE=mysql: NATS only notifies, the gateways must share one store (a SQLite file belongs to one gateway)',
        path: ['EVENTFLOW_ROUTER'],
      }),
      z.refine((config) => (config.EVENTFLOW_NATS_USER === undefined) === (config.EVENTFLOW_NATS_PASSWORD === undefined), {
        error: 'EVENTFLOW_NATS_USER and EVENTFLOW_NATS_PASSWORD go together: set both or neither',
        path: ['EVENTFLOW_NATS_USER'],
      }),
      z.refine((config) => [config.EVENTFLOW_NATS_TOKEN, config.EVENTFLOW_NATS_USER, config.EVENTFLOW_NATS_CREDS_FILE].filter((value) => value !== undefined).length <= 1, {
        error: 'set at most one of EVENTFLOW_NATS_TOKEN, EVENTFLOW_NATS_USER/_PASSWORD and EVENTFLOW_NATS_CREDS_FILE',
        path: ['EVENTFLOW_NATS_TOKEN'],
      }),
      z.refine((config) => (config.EVENTFLOW_NATS_TLS_CERT_FILE === undefined) === (config.EVENTFLOW_NATS_TLS_KEY_FILE === undefined), {
        error: 'EVENTFLOW_NATS_TLS_CERT_FILE and EVENTFLOW_NATS_TLS_KEY_FILE go together: a client certificate needs its key',
        path: ['EVENTFLOW_NATS_TLS_CERT_FILE'],
      }),
      z.refine((config) => config.EVENTFLOW_AUTH !== 'jwt' || (config.EVENTFLOW_JWT_SECRET === undefined) !== (config.EVENTFLOW_JWT_PUBLIC_KEY === undefined), {
        error: 'EVENTFLOW_AUTH=jwt needs exactly one of EVENTFLOW_JWT_SECRET (HS256) or EVENTFLOW_JWT_PUBLIC_KEY (RS256/ES256)',
        path: ['EVENTFLOW_AUTH'],
      }),
    )
    // Parsed once: zod's compiled fast path (a generated function per object schema) costs more to
    // make than this one parse saves (~5 ms of a start, bench/README.md › start).
    .safeParse(decimalNumbers(configSchema.shape, relevant), { jitless: true });
  // One line per variable and message: a value can fail several checks of one range.
  const problems = [...new Set([...v4.problems, ...(parsed.success ? [] : parsed.error.issues.map((issue) => describeConfigIssue(issue, relevant)))])];
  if (problems.length > 0 || !parsed.success) throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid gateway configuration: ${problems.join('; ')}`);
  return parsed.data;
}

/**
 * EVENTFLOW_* names read by someone other than the gateway's schema: v4's spellings (aliases and the
 * settings refused as unsupported), and the clients' and CLI's (EVENTFLOW_URL, EVENTFLOW_TOKEN), so
 * that one environment can serve a gateway and the tools beside it.
 */
const alsoKnown = [...v4Aliases.map(([, theirs]) => theirs), ...unsupported.map(({ name }) => name), 'EVENTFLOW_URL', 'EVENTFLOW_TOKEN'];
/** Families that their own parts read and check when loaded: v4's hub, spoke and certificate settings (eventflow-v4.md §1.4), the test suites'. */
const families = ['EVENTFLOW_HUB_', 'EVENTFLOW_SPOKE_', 'EVENTFLOW_CERT_', 'EVENTFLOW_TEST_'];
const knownNames = new Set([...Object.keys(configSchema.shape), ...alsoKnown]);

const settingNames = new Set([...Object.keys(configSchema.shape), ...v4Aliases.map(([, theirs]) => theirs)]);
/** Whether `name` is a setting of the gateway (not a refused v4 one, nor a client's such as EVENTFLOW_URL). */
export const isConfigVariable = (name: string): boolean => settingNames.has(name);

/** One line per EVENTFLOW_* variable in `values` that nothing reads (a typo), naming the closest known one. */
export function unknownConfigVariables(values: Readonly<Record<string, unknown>>): string[] {
  return unknownVariables(values, knownNames, families);
}

/** Settings of EVENTFLOW_AUTH=jwt only. */
const JWT_ONLY = ['EVENTFLOW_JWT_SECRET', 'EVENTFLOW_JWT_PUBLIC_KEY', 'EVENTFLOW_JWT_ISSUER', 'EVENTFLOW_JWT_AUDIENCE', 'EVENTFLOW_JWT_MAX_LIFETIME_S', 'EVENTFLOW_AUTH_ANONYMOUS', 'EVENTFLOW_AUTH_TIMEOUT_MS'];

/**
 * Authentication settings given to a gateway that authenticates nothing: a secret set without EVENTFLOW_AUTH=jwt (the
 * variable the CLI's `eventflow token` reads too) started a gateway open to every connection, without a word.
 */
export function unusedAuthVariables(values: Readonly<Record<string, unknown>>, settings: Pick<GatewayConfig, 'EVENTFLOW_AUTH'>): string[] {
  if (settings.EVENTFLOW_AUTH === 'jwt') return [];
  const set = JWT_ONLY.filter((name) => values[name] !== undefined && String(values[name]).trim() !== '');
  return set.length === 0 ? [] : [`${set.join(', ')} ${set.length === 1 ? 'is' : 'are'} set, but EVENTFLOW_AUTH is none: no token is checked and every connection may do everything; set EVENTFLOW_AUTH=jwt to authenticate`];
}
