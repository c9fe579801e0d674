/**
 * What a CLI command that found nothing to act on ends with: a stable code (cliErrorCodes in
 * @eventflow/core's error catalog) and exit 1, so that a script (and a person) cannot take a typo for
 * success. Its own class, not EventflowError: the codes are the CLI's, and the clients' ErrorCode (which
 * every browser bundle carries) stays as it is.
 */
import type { cliErrorCodes } from '@eventflow/core';

export type CliErrorCode = keyof typeof cliErrorCodes;

export class NotFound extends Error {
  override readonly name = 'NotFound';
  readonly code: CliErrorCode;

  constructor(code: CliErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}
