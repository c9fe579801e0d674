/**
 * Structured JSON logs (pino), one line per entry, on stderr by default. The gateway's call sites
 * keep the `log.info(message, fields)` shape; this module maps it onto pino.
 *
 * Secrets are never passed to a log call. Redaction is the second line of defence: fields named
 * like a secret (token, password, secret, authorization, the secret EVENTFLOW_* variables) are
 * replaced by "[redacted]" wherever a call site might pass them by mistake.
 */
import { pino, stdSerializers, stdTimeFunctions, type DestinationStream, type Logger as PinoLogger } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /** A logger whose lines all carry `fields` (a connection id, a request id). Cheap until it logs. */
  child(fields: LogFields): Logger;
}

/** Where log lines go: a function given each line (without its newline), or a pino destination. */
export type LogDestination = ((line: string) => void) | DestinationStream;

const secretNames = [
  'token',
  'jwt',
  'password',
  'secret',
  'passphrase',
  'privateKey',
  'authorization',
  'cookie',
  'EVENTFLOW_JWT_SECRET',
  'EVENTFLOW_MYSQL_PASSWORD',
  'EVENTFLOW_MYSQL_PASS',
  'EVENTFLOW_CERT_PASS_ENCRYPTION_KEY',
  'EVENTFLOW_NATS_TOKEN',
  'EVENTFLOW_NATS_PASSWORD',
];
/** The secret names at the top level and one level down (`{ headers: { authorization } }`, `{ config: { … } }`). */
export const redactedPaths = [...secretNames, ...secretNames.map((name) => `*.${name}`)];

let stderrStream: DestinationStream | undefined;
/** One synchronous stderr stream for every logger of the process: a line is out before an exit. */
function stderr(): DestinationStream {
  return (stderrStream ??= pino.destination({ dest: 2, sync: true }));
}

export function createLogger(level: LogLevel, base: LogFields = {}, destination?: LogDestination): Logger {
  const stream: DestinationStream =
    typeof destination === 'function'
      ? { write: (line: string) => destination(line.endsWith('\n') ? line.slice(0, -1) : line) }
      : (destination ?? stderr());
  const root = pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: stdTimeFunctions.isoTime,
      // `level: "info"` rather than pino's numbers: the lines read the same as before pino.
      formatters: { level: (label) => ({ level: label }) },
      serializers: { error: stdSerializers.err, err: stdSerializers.err },
      redact: { paths: redactedPaths, censor: '[redacted]' },
    },
    stream,
  );
  return wrap(Object.keys(base).length > 0 ? root.child(base) : root);
}

function wrap(target: PinoLogger): Logger {
  return {
    debug: (message, fields) => target.debug(fields ?? {}, message),
    info: (message, fields) => target.info(fields ?? {}, message),
    warn: (message, fields) => target.warn(fields ?? {}, message),
    error: (message, fields) => target.error(fields ?? {}, message),
    child: (fields) => new LazyChild(target, fields),
  };
}

/**
 * A pino child is made on the first line logged: connections and requests get a child each, and
 * most of them never log (a request logs only when it fails), so the hot path pays for one small
 * object. A class rather than closures: its methods live on the prototype, so an idle connection
 * holds two fields, not five functions and their context (bench/idle-memory.mjs).
 */
class LazyChild implements Logger {
  readonly #parent: PinoLogger;
  readonly #fields: LogFields;
  #made: Logger | undefined;

  constructor(parent: PinoLogger, fields: LogFields) {
    this.#parent = parent;
    this.#fields = fields;
  }

  #log(level: 'debug' | 'info' | 'warn' | 'error', message: string, more: LogFields | undefined): void {
    if (!this.#parent.isLevelEnabled(level)) return;
    (this.#made ??= wrap(this.#parent.child(this.#fields)))[level](message, more);
  }

  debug(message: string, more?: LogFields): void {
    this.#log('debug', message, more);
  }

  info(message: string, more?: LogFields): void {
    this.#log('info', message, more);
  }

  warn(message: string, more?: LogFields): void {
    this.#log('warn', message, more);
  }

  error(message: string, more?: LogFields): void {
    this.#log('error', message, more);
  }

  child(more: LogFields): Logger {
    return new LazyChild(this.#parent, { ...this.#fields, ...more });
  }
}
