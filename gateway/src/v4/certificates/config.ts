/**
 * Certificate settings, with v4's keys, environment names and defaults (eventflow-v4.md §1.4).
 * Unlike v4, environment strings are coerced and validated: a bad value fails at construction with
 * E_EVENTFLOW_CONFIG naming the key, instead of surfacing as an OpenSSL or crypto error later.
 */
import * as z from 'zod';
import { EventflowError } from '@eventflow/core';
import { CertificateError } from './errors.js';

export const CERTIFICATE_ALGORITHMS = [
  'EdDSA:Ed448',
  'EdDSA:Ed25519',
  'ECDSA:P-256',
  'ECDSA:P-384',
  'ECDSA:P-521',
  'RSA:2048',
  'RSA:4096',
] as const;
export type CertificateAlgorithm = (typeof CERTIFICATE_ALGORITHMS)[number];

const HASHES = ['sha256', 'sha384', 'sha512'] as const;
export type CertificateHash = (typeof HASHES)[number];

/** GCM ciphers only: the envelope stores a tag, and v4 uses aes-256-gcm. */
const CIPHER_KEY_BYTES = { 'aes-128-gcm': 16, 'aes-192-gcm': 24, 'aes-256-gcm': 32 } as const;
type Cipher = keyof typeof CIPHER_KEY_BYTES;

const positiveInt = z.coerce.number().int().positive();

const schema = z
  .object({
    CERT_PASS_ENCRYPTION_KEY: z.string().optional(),
    CERT_ALGORITHM: z.enum(CERTIFICATE_ALGORITHMS).default('EdDSA:Ed448'),
    CERT_HASH: z.enum(HASHES).default('sha512'),
    CERT_PASS_CIPHER: z.enum(Object.keys(CIPHER_KEY_BYTES) as [Cipher, ...Cipher[]]).default('aes-256-gcm'),
    CERT_ROOT_DAYS: positiveInt.default(365),
    CERT_INTERMEDIATE_DAYS: positiveInt.default(30),
    CERT_LEAF_DAYS: positiveInt.default(7),
    CERT_PASS_PBKDF2_HASH: z.enum(HASHES).default('sha512'),
    CERT_PASS_PBKDF2_BYTES: positiveInt.default(32),
    CERT_PASS_PBKDF2_ITERATIONS: positiveInt.default(1_000_000),
  })
  .refine((config) => CIPHER_KEY_BYTES[config.CERT_PASS_CIPHER] === config.CERT_PASS_PBKDF2_BYTES, {
    message: 'must equal the key size of CERT_PASS_CIPHER',
    path: ['CERT_PASS_PBKDF2_BYTES'],
  });

export type CertificateConfigInput = { [K in keyof z.input<typeof schema>]?: z.input<typeof schema>[K] | string };
export type CertificateConfig = Omit<z.output<typeof schema>, 'CERT_PASS_ENCRYPTION_KEY'> & { CERT_PASS_ENCRYPTION_KEY: string };

/** The settings the envelope needs (a subset of CertificateConfig). */
export type EnvelopeConfig = Pick<
  CertificateConfig,
  'CERT_PASS_ENCRYPTION_KEY' | 'CERT_PASS_CIPHER' | 'CERT_PASS_PBKDF2_HASH' | 'CERT_PASS_PBKDF2_BYTES' | 'CERT_PASS_PBKDF2_ITERATIONS'
>;

/**
 * Validates and completes a configuration. Throws E_EVENTFLOW_CERTIFICATES_MISSING_CONFIGURATION
 * without a master key (as v4's constructor), E_EVENTFLOW_CONFIG for an invalid value.
 */
export function parseCertificateConfig(input: CertificateConfigInput): CertificateConfig {
  const present = Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = schema.safeParse(present);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ');
    throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid certificate configuration: ${problems}`);
  }
  const { CERT_PASS_ENCRYPTION_KEY: key, ...rest } = parsed.data;
  if (key === undefined || key === '') throw new CertificateError('E_EVENTFLOW_CERTIFICATES_MISSING_CONFIGURATION');
  return { ...rest, CERT_PASS_ENCRYPTION_KEY: key };
}

/** Reads the CERT_* keys from their EVENTFLOW_CERT_* environment variables (§1.4). */
export function certificateConfigFromEnv(env: Record<string, string | undefined> = process.env): CertificateConfigInput {
  const keys = Object.keys(schema.shape) as Array<keyof CertificateConfigInput>;
  return Object.fromEntries(keys.map((key) => [key, env[`EVENTFLOW_${key}`]])) as CertificateConfigInput;
}
