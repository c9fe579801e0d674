/**
 * Error codes of the v4-compatible certificate management (eventflow-v4.md §10.3, §10.4). They are
 * v4's own codes, so logs and callers can branch on the same strings as with native components.
 * Invalid configuration *values* use the core's `E_EVENTFLOW_CONFIG` instead.
 */
export const certificateErrorCodes = {
  E_EVENTFLOW_CERTIFICATES_MISSING_CONFIGURATION:
    'CERT_PASS_ENCRYPTION_KEY (env EVENTFLOW_CERT_PASS_ENCRYPTION_KEY) is not set. Set it to the value every hub and spoke sharing the database uses.',
  E_EVENTFLOW_CERTIFICATES_INVALID_ID:
    'revoke(id) was given an id that is neither the root, this process\'s intermediate nor its leaf.',
  E_EVENTFLOW_CERTIFICATES_DECRYPT:
    'A stored key or passphrase could not be decrypted (GCM authentication failed): CERT_PASS_ENCRYPTION_KEY or the CERT_PASS_* settings differ from the ones that wrote the row.',
  E_EVENTFLOW_INVALID_HOSTNAME:
    'A TLS client asked (SNI) for a hub id other than this hub\'s; the handshake was aborted. The client must send SNI = the hub id.',
  E_EVENTFLOW_DB_CERTIFICATE_READ: 'Reading a certificate row failed; see `cause`.',
  E_EVENTFLOW_DB_CERTIFICATE_NOT_FOUND: 'There is no active certificate row with this id.',
  E_EVENTFLOW_DB_CERTIFICATE_PERSIST: 'Inserting a certificate row failed (other than a duplicate); see `cause`.',
  E_EVENTFLOW_DB_CERTIFICATE_REVOKE: 'Revoking a certificate row failed; see `cause`.',
  E_EVENTFLOW_DB_CERTIFICATE_REVOKE_PAST_VALIDITY: 'Revoking expired certificate rows failed; see `cause`.',
  DB_LOCK_TIMEOUT: 'The advisory lock eventflow:certificates was busy for the whole timeout (30 s). Retry later.',
  E_EVENTFLOW_DB_ADVISORY_LOCK_NULL_RESULT: 'GET_LOCK returned NULL (the server reported an error). Retry; check the database.',
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
