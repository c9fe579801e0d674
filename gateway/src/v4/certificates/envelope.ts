/**
 * v4's envelope for keys and passphrases in the `certificate` table (eventflow-v4.md §7.4):
 * PBKDF2-HMAC-<hash>(master key as UTF-8, random 16-byte salt, iterations, key bytes), then
 * AES-GCM with a random 16-byte IV, no AAD and a 16-byte tag. The key PEM and the passphrase are
 * sealed separately, each with its own salt and IV.
 */
import { createCipheriv, createDecipheriv, pbkdf2, randomBytes, type CipherGCMTypes } from 'node:crypto';
import type { EnvelopeConfig } from './config.js';
import { CertificateError } from './errors.js';

export interface Sealed {
  data: Buffer;
  iv: Buffer;
  salt: Buffer;
  tag: Buffer;
}

const SALT_BYTES = 16;
const IV_BYTES = 16;
const TAG_BYTES = 16;

/** Asynchronous PBKDF2: a cold chain costs six 1M-iteration derivations, which run in parallel on the libuv pool. */
function deriveKey(config: EnvelopeConfig, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    pbkdf2(
      Buffer.from(config.CERT_PASS_ENCRYPTION_KEY, 'utf8'),
      salt,
      config.CERT_PASS_PBKDF2_ITERATIONS,
      config.CERT_PASS_PBKDF2_BYTES,
      config.CERT_PASS_PBKDF2_HASH,
      (error, key) => (error ? reject(error) : resolve(key)),
    );
  });
}

export async function seal(plaintext: string, config: EnvelopeConfig): Promise<Sealed> {
  const salt = randomBytes(SALT_BYTES);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(config.CERT_PASS_CIPHER as CipherGCMTypes, await deriveKey(config, salt), iv, { authTagLength: TAG_BYTES });
  const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { data, iv, salt, tag: cipher.getAuthTag() };
}

/** Throws E_EVENTFLOW_CERTIFICATES_DECRYPT when GCM authentication fails (wrong master key or settings). */
export async function open(sealed: Sealed, config: EnvelopeConfig): Promise<string> {
  const key = await deriveKey(config, sealed.salt);
  try {
    const decipher = createDecipheriv(config.CERT_PASS_CIPHER as CipherGCMTypes, key, sealed.iv, { authTagLength: TAG_BYTES });
    decipher.setAuthTag(sealed.tag);
    return Buffer.concat([decipher.update(sealed.data), decipher.final()]).toString('utf8');
  } catch (cause) {
    throw new CertificateError('E_EVENTFLOW_CERTIFICATES_DECRYPT', undefined, { cause });
  }
}
