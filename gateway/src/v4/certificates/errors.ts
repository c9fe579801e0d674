import { certificateErrorCodes as catalogued } from '@eventflow/core';

/**
 * Error codes of the v4-compatible certificate management (eventflow-v4.md §10.3, §10.4). They are
 * v4's own codes, so logs and callers can branch on the same strings as with native components.
 * Invalid configuration *values* use the core's `E_EVENTFLOW_CONFIG` instead. The E_EVENTFLOW_ ones are in the one
 * error catalog (@eventflow/core error-catalog.ts); DB_LOCK_TIMEOUT is v4's string as it is.
 */
export const certificateErrorCodes = {
  ...catalogued,
  DB_LOCK_TIMEOUT: 'The advisory lock eventflow:certificates was busy for the whole timeout (30 s). Retry later.',
} as const;

export type CertificateErrorCode = keyof typeof certificateErrorCodes;

/** The error of the certificate modules. Branch on `code`, never on message text. */
export class CertificateError extends Error {
  override readonly name = 'CertificateError';
  readonly code: CertificateErrorCode;

  constructor(code: CertificateErrorCode, message: string = certificateErrorCodes[code], options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}

export function isCertificateError(error: unknown, code?: CertificateErrorCode): error is CertificateError {
  return error instanceof CertificateError && (code === undefined || error.code === code);
}
