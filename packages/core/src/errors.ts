/**
 * The one error class of eventflow and its stable codes. What each code means and what to do
 * about it is in error-catalog.ts (kept apart so that the browser bundle does not carry the prose).
 */
/** The codes without their common prefix: each code is `E_EVENTFLOW_` and one of these (the bundle carries the prefix once). */
const codeSuffixes = [
  'INVALID_INPUT',
  'INVALID_FRAME',
  'UNKNOWN_OPERATION',
  'PROTOCOL_VERSION',
  'HANDSHAKE_REQUIRED',
  'EVENT_NOT_FOUND',
  'DUPLICATE_ID',
  'REFERENCE_NOT_FOUND',
  'INVALID_DATE',
  'UNKNOWN_DELIVERY',
  'WAIT_TIMEOUT',
  'REQUEST_TIMEOUT',
  'OFFLINE',
  'ABORTED',
  'CLIENT_CLOSED',
  'CONNECTION_FAILED',
  'CONSUMER_NAME_UNMAPPABLE',
  'CONSUMER_HANDLER_MISSING',
  'CONSUMER_FAILED',
  'STORE_FAILED',
  'INTERNAL',
  'CONFIG',
  'LISTEN_FAILED',
  'STORE_UNAVAILABLE',
  'STORE_LOCKED',
  'STORE_UNSUPPORTED',
  'LIMIT_EXCEEDED',
  'RATE_LIMITED',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'VERSION_CONFLICT',
  'OUTBOX_FULL',
  'OUTBOX_EXPIRED',
  'NO_CONSUMER',
  'FEATURE_NOT_ENABLED',
  'GROUP_IN_USE',
  'GROUP_DELETED',
] as const;

export type ErrorCode = `E_EVENTFLOW_${(typeof codeSuffixes)[number]}`;

/** Every code, in catalog order. */
export const errorCodeNames: readonly ErrorCode[] = /* @__PURE__ */ codeSuffixes.map((suffix) => `E_EVENTFLOW_${suffix}` as const);


export interface EventflowErrorOptions {
  cause?: unknown;
  details?: Record<string, unknown>;
}

/** The one error class of eventflow. Branch on `code`. */
export class EventflowError extends Error {
  override readonly name = 'EventflowError';
  // `declare`: set by the constructor, so bundles carry no empty field definitions first.
  declare readonly code: ErrorCode;
  declare readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: EventflowErrorOptions = {}) {
    // The options as they are: Error takes `cause` from them when they have one (an own `cause` of undefined when asked for one).
    super(message, options);
    this.code = code;
    this.details = options.details;
  }
}

export function isEventflowError(error: unknown, code?: ErrorCode): error is EventflowError {
  return error instanceof EventflowError && (code === undefined || error.code === code);
}

/**
 * The default `onError`: a failed connection (reported once per outage; the client says when it
 * is back) is a warning, since the client retries by itself; anything else goes to console.error.
 */
export const logError = (error: unknown): void =>
  isEventflowError(error, 'E_EVENTFLOW_CONNECTION_FAILED') ? console.warn(`[eventflow] ${error.message}${/backoff/.test(error.message) ? '' : ' (retrying with backoff)'}`) : console.error('[eventflow]', error);

/** What a closed client (and its outbox) answers new work with. */
export const closedError = (): EventflowError => new EventflowError('E_EVENTFLOW_CLIENT_CLOSED', 'client closed; create a new one');

export const isErrorCode = (code: unknown): code is ErrorCode => typeof code === 'string' && (errorCodeNames as readonly string[]).includes(code);

/**
 * Whether `code` has the shape of an eventflow code: a gateway newer than this client may send one
 * this client does not list, which is still the stable code its catalog documents.
 */
export const isCodeShaped = (code: unknown): code is ErrorCode => typeof code === 'string' && /^E_EVENTFLOW_[A-Z0-9_]+$/.test(code);

/** E_EVENTFLOW_FEATURE_NOT_ENABLED: `method` needs the client feature `name`; the message says what to pass. */
export const featureNotEnabled = (name: string, method: string): EventflowError =>
  new EventflowError('E_EVENTFLOW_FEATURE_NOT_ENABLED', `${method}() needs the ${name} feature: create the client with { features: [${name}] } (import { ${name} } from '@eventflow/browser/work')`, { details: { feature: name } });
