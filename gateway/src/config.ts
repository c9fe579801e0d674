/**
 * Gateway configuration: one zod schema, read from EVENTFLOW_* environment variables. An invalid
 * value fails start with a message naming the variable.
 */
import { z } from 'zod';
import { EventflowError } from '@eventflow/core';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();

/** Each key is the environment variable it is read from. */
export const configSchema = z.object({
  EVENTFLOW_HOST: z.string().min(1).default('127.0.0.1'),
  EVENTFLOW_PORT: port.default(8080),
  EVENTFLOW_STORE: z.enum(['sqlite']).default('sqlite'),
  EVENTFLOW_SQLITE_PATH: z.string().min(1).default('./data/eventflow.db'),
  /** Frames above this many bytes close the connection with 1009. */
  EVENTFLOW_MAX_FRAME_BYTES: positiveInt.default(1024 * 1024),
  /** A client whose unsent frames exceed this many bytes is disconnected with 4008 and resumes. */
  EVENTFLOW_MAX_BUFFERED_BYTES: positiveInt.default(16 * 1024 * 1024),
  EVENTFLOW_HANDSHAKE_TIMEOUT_MS: positiveInt.default(10_000),
  /** Directory with the built demo dashboard, served at `/` when it exists. */
  EVENTFLOW_DEMO_DIR: z.string().optional(),
  EVENTFLOW_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /** The gateway's identity in event_published (publisher, hub, consumer); generated when unset. */
  EVENTFLOW_GATEWAY_ID: z
    .string()
    .regex(/^[A-Za-z0-9.-]{1,64}$/, { error: 'must be 1–64 characters of A-Z a-z 0-9 . -' })
    .optional(),
});

export type GatewayConfig = z.infer<typeof configSchema>;
export type GatewayConfigInput = z.input<typeof configSchema>;

/** Parses a config from environment-style values; throws E_EVENTFLOW_CONFIG naming each bad variable. */
export function parseConfig(values: Record<string, string | number | undefined>): GatewayConfig {
  const relevant = Object.fromEntries(Object.entries(values).filter(([key, value]) => key.startsWith('EVENTFLOW_') && value !== '' && value !== undefined));
  const parsed = configSchema.safeParse(relevant);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ');
    throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid gateway configuration: ${problems}`);
  }
  return parsed.data;
}
