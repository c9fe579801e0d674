/**
 * The one error class of eventflow and its stable codes. What each code means and what to do
 * about it is in error-catalog.ts (kept apart so that the browser bundle does not carry the prose).
 */
export const errorCodeNames = [
  'E_EVENTFLOW_INVALID_INPUT',
  'E_EVENTFLOW_INVALID_FRAME',
  'E_EVENTFLOW_UNKNOWN_OPERATION',
  'E_EVENTFLOW_PROTOCOL_VERSION',
  'E_EVENTFLOW_HANDSHAKE_REQUIRED',
  'E_EVENTFLOW_EVENT_NOT_FOUND',
  'E_EVENTFLOW_DUPLICATE_ID',
  'E_EVENTFLOW_REFERENCE_NOT_FOUND',
  'E_EVENTFLOW_INVALID_DATE',
  'E_EVENTFLOW_UNKNOWN_DELIVERY',
  'E_EVENTFLOW_WAIT_TIMEOUT',
  'E_EVENTFLOW_REQUEST_TIMEOUT',
  'E_EVENTFLOW_ABORTED',
  'E_EVENTFLOW_CLIENT_CLOSED',
  'E_EVENTFLOW_CONNECTION_FAILED',
  'E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE',
  'E_EVENTFLOW_CONSUMER_HANDLER_MISSING',
  'E_EVENTFLOW_CONSUMER_FAILED',
  'E_EVENTFLOW_STORE_FAILED',
  'E_EVENTFLOW_INTERNAL',
  'E_EVENTFLOW_CONFIG',
  'E_EVENTFLOW_LISTEN_FAILED',
  'E_EVENTFLOW_STORE_UNAVAILABLE',
  'E_EVENTFLOW_LIMIT_EXCEEDED',
  'E_EVENTFLOW_RATE_LIMITED',
  'E_EVENTFLOW_UNAUTHORIZED',
  'E_EVENTFLOW_FORBIDDEN',
  'E_EVENTFLOW_VERSION_CONFLICT',
  'E_EVENTFLOW_OUTBOX_FULL',
  'E_EVENTFLOW_OUTBOX_EXPIRED',
] as const;

export type ErrorCode = (typeof errorCodeNames)[number];

export interface EventflowErrorOptions {
  cause?: unknown;
  details?: Record<string, unknown>;
}

/** The one error class of eventflow. Branch on `code`. */
export class EventflowError extends Error {
  override readonly name = 'EventflowError';
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: EventflowErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details;
  }
}

export function isEventflowError(error: unknown, code?: ErrorCode): error is EventflowError {
  return error instanceof EventflowError && (code === undefined || error.code === code);
}

export const isErrorCode = (code: unknown): code is ErrorCode => typeof code === 'string' && (errorCodeNames as readonly string[]).includes(code);
