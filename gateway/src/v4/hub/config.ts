/**
 * Settings of the v4-compatible hub: one zod schema over EVENTFLOW_* environment variables, with v4's
 * keys and defaults (eventflow-v4.md §1.4) plus our own lease settings. An invalid value fails at
 * parse time with E_EVENTFLOW_CONFIG naming the variable; the EVENTFLOW_CERT_* variables are checked
 * by the certificate module's own schema (../certificates/config.ts), reported under their variable names.
 */
import { isIPv4 } from 'node:net';
import * as z from 'zod';
import { EventflowError, generatePid } from '@eventflow/core';
import { configSchema, durationMs } from '../../config.js';
import { MAX_TIMER_MS } from '../../defaults.js';
import { decimalNumbers, describeConfigIssue, expected, unknownVariables } from '../../config-issues.js';
import { readV4Environment } from '../../v4-env.js';
import type { MysqlStoreOptions } from '../../store/mysql/mysql.js';
import { certificateConfigFromEnv, parseCertificateConfig, type CertificateConfig } from '../certificates/config.js';

/**
 * The longest NAME for which every generated ID fits VARCHAR(64): the pid part (§1.3, core's
 * generatePid) is kept within 32 characters (two words of at most 11, two hyphens, 8 base-36 ms
 * digits until 2059), then ".". generateHubId checks the length anyway.
 */
export const MAX_HUB_NAME_LENGTH = 31;

const ipv4 = z.string().refine((value) => isIPv4(value), { error: 'must be an IPv4 address (the hub table holds VARCHAR(16))' });
const port = z.coerce.number({ error: expected.port }).int({ error: expected.port }).min(0, { error: expected.port }).max(65535, { error: expected.port });

/** Each key is the environment variable it is read from. */
export const hubConfigSchema = z.object({
  /** The ID suffix, and the intermediate certificate's id. */
  EVENTFLOW_HUB_NAME: z
    .string()
    .regex(/^[A-Za-z0-9.-]+$/, { error: 'must contain only A-Z a-z 0-9 . -' })
    .max(MAX_HUB_NAME_LENGTH, { error: `must be at most ${MAX_HUB_NAME_LENGTH} characters, so that the hub ID fits in 64` })
    .refine((value) => value.toUpperCase() !== 'EVENTFLOW-ROOT-CA', { error: 'must not be the root certificate id EVENTFLOW-ROOT-CA' })
    .default('EVENTFLOW-HUB'),
  /** Listen address. */
  EVENTFLOW_HUB_INTERNAL_IP: ipv4.default('127.0.0.1'),
  /** Listen port; 0 picks a free one (tests). */
  EVENTFLOW_HUB_INTERNAL_PORT: port.default(50001),
  /** The address written to the `hub` table and sent in `online` records. */
  EVENTFLOW_HUB_EXTERNAL_IP: ipv4.default('127.0.0.1'),
  /** Default: the port actually listened on (50001 with v4's defaults). */
  EVENTFLOW_HUB_EXTERNAL_PORT: port.min(1, { error: 'expected a port number (an integer from 1 to 65535)' }).optional(),
  /** Connect + STX deadline when announcing to a peer hub. */
  EVENTFLOW_HUB_PEER_HUB_ONLINE_TIMEOUT: durationMs(1).default(5000),
  /** TCP keep-alive initial delay on accepted sockets. */
  EVENTFLOW_HUB_KEEP_ALIVE_INTERVAL: durationMs(1).default(60_000),
  /**
   * (sic, v4's key) How often the scheduled-event table is re-read to re-arm the due timer. Events a v4
   * spoke schedules are announced to nobody, so this bounds how late such an event can fire.
   */
  EVENTFLOW_HUB_SHEDULED_INTERVAL_DELAY: durationMs(1).default(1000),
  /** Ours: a routing or consumer claim without outcome older than this is redelivered. ≥ 1 s (the columns hold seconds). */
  EVENTFLOW_HUB_CLAIM_LEASE_MS: durationMs(1).min(1000, { error: `expected a whole number of ms from 1000 (claim times have whole seconds) to ${MAX_TIMER_MS}` }).default(30_000),
  /** Ours: redeliveries per event before giving up; 0 turns redelivery off. */
  EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES: z.coerce.number({ error: expected.nonNegativeInt }).int({ error: expected.nonNegativeInt }).min(0, { error: expected.nonNegativeInt }).default(3),
  EVENTFLOW_LOG_LEVEL: configSchema.shape.EVENTFLOW_LOG_LEVEL,
  EVENTFLOW_MYSQL_HOST: configSchema.shape.EVENTFLOW_MYSQL_HOST,
  EVENTFLOW_MYSQL_PORT: configSchema.shape.EVENTFLOW_MYSQL_PORT,
  EVENTFLOW_MYSQL_USER: configSchema.shape.EVENTFLOW_MYSQL_USER,
  EVENTFLOW_MYSQL_PASSWORD: configSchema.shape.EVENTFLOW_MYSQL_PASSWORD,
  EVENTFLOW_MYSQL_DATABASE: configSchema.shape.EVENTFLOW_MYSQL_DATABASE,
  EVENTFLOW_MYSQL_CONNECTION_LIMIT: configSchema.shape.EVENTFLOW_MYSQL_CONNECTION_LIMIT,
});

type Parsed = z.output<typeof hubConfigSchema>;

export interface HubConfig {
  name: string;
  internalIp: string;
  internalPort: number;
  externalIp: string;
  /** undefined: the port listened on. */
  externalPort: number | undefined;
  peerHubOnlineTimeoutMs: number;
  keepAliveIntervalMs: number;
  scheduledPollMs: number;
  claimLeaseMs: number;
  claimMaxRedeliveries: number;
  logLevel: Parsed['EVENTFLOW_LOG_LEVEL'];
  mysql: MysqlStoreOptions;
  certificates: CertificateConfig;
}

export type HubEnv = Record<string, string | number | undefined>;

/** Parses the hub's settings from environment-style values; throws E_EVENTFLOW_CONFIG naming each bad variable. */
export function parseHubConfig(env: HubEnv = process.env): HubConfig {
  const v4 = readV4Environment(env);
  const relevant = Object.fromEntries(
    Object.entries(v4.values).filter(([key, value]) => key in hubConfigSchema.shape && value !== '' && value !== undefined),
  );
  const parsed = hubConfigSchema.safeParse(decimalNumbers(hubConfigSchema.shape, relevant));
  const problems = [...new Set([...v4.problems, ...(parsed.success ? [] : parsed.error.issues.map((issue) => describeConfigIssue(issue, relevant)))])];
  if (problems.length > 0 || !parsed.success) throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid hub configuration: ${problems.join('; ')}`);
  const c = parsed.data;
  let certificates: CertificateConfig;
  try {
    const strings = Object.fromEntries(Object.entries(env).map(([key, value]) => [key, value === undefined ? undefined : String(value)]));
    certificates = parseCertificateConfig(certificateConfigFromEnv(strings));
  } catch (error) {
    // ../certificates/config.ts names its keys (CERT_…); the variables are EVENTFLOW_CERT_….
    if (error instanceof EventflowError) throw new EventflowError('E_EVENTFLOW_CONFIG', error.message.replace(/(?<![A-Z_])CERT_/g, 'EVENTFLOW_CERT_'), { cause: error });
    throw error;
  }
  return {
    name: c.EVENTFLOW_HUB_NAME,
    internalIp: c.EVENTFLOW_HUB_INTERNAL_IP,
    internalPort: c.EVENTFLOW_HUB_INTERNAL_PORT,
    externalIp: c.EVENTFLOW_HUB_EXTERNAL_IP,
    externalPort: c.EVENTFLOW_HUB_EXTERNAL_PORT,
    peerHubOnlineTimeoutMs: c.EVENTFLOW_HUB_PEER_HUB_ONLINE_TIMEOUT,
    keepAliveIntervalMs: c.EVENTFLOW_HUB_KEEP_ALIVE_INTERVAL,
    scheduledPollMs: c.EVENTFLOW_HUB_SHEDULED_INTERVAL_DELAY,
    claimLeaseMs: c.EVENTFLOW_HUB_CLAIM_LEASE_MS,
    claimMaxRedeliveries: c.EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES,
    logLevel: c.EVENTFLOW_LOG_LEVEL,
    mysql: {
      host: c.EVENTFLOW_MYSQL_HOST,
      port: c.EVENTFLOW_MYSQL_PORT,
      user: c.EVENTFLOW_MYSQL_USER,
      password: c.EVENTFLOW_MYSQL_PASSWORD,
      database: c.EVENTFLOW_MYSQL_DATABASE,
      connectionLimit: c.EVENTFLOW_MYSQL_CONNECTION_LIMIT,
    },
    certificates,
  };
}

/**
 * A process ID as v4 generates it (§1.2): `<characteristic>-<name>-<Date.now() base36>.<NAME>`,
 * upper-cased. A restart gets a new ID.
 */
export function generateHubId(name: string, now: number = Date.now()): string {
  const id = `${generatePid(now)}.${name}`.toUpperCase();
  if (id.length > 64) throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid hub configuration: EVENTFLOW_HUB_NAME: the hub ID ${id} exceeds 64 characters`);
  return id;
}

/**
 * EVENTFLOW_HUB_* variables the hub does not read, one line each with the closest it does: a typo (EVENTFLOW_HUB_PORT for
 * EVENTFLOW_HUB_INTERNAL_PORT) was ignored without a word and the hub listened on its default. The gateway leaves this
 * family to the hub (config.ts), and the gateway's own variables, which an environment shared by both holds, are not the hub's to judge.
 */
export function unknownHubVariables(env: HubEnv): string[] {
  const family = (name: string): boolean => name.startsWith('EVENTFLOW_HUB_');
  const read = new Set(Object.keys(hubConfigSchema.shape).filter(family));
  return unknownVariables(Object.fromEntries(Object.entries(env).filter(([name]) => family(name))), read, []);
}
