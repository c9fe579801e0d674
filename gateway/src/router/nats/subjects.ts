/**
 * NATS subjects of the NATS router. A v4 domain or name may hold any ASCII but 0x1E/0x1F, so it
 * may contain `.` (the token separator), `*` or `>` (wildcards as whole tokens) and spaces (not
 * allowed in a subject). Each becomes one token: bytes of [A-Za-z0-9-] stay as they are (most
 * names read the same in `nats sub`), every other byte of its UTF-8 is `_` and two hex digits,
 * `_` itself included. The escape is reversible (`unescapeToken`), never empty for a 1–64
 * character value, and at most 192 characters.
 */

const plain = /^[A-Za-z0-9-]$/;

export function escapeToken(value: string): string {
  let token = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const char = String.fromCharCode(byte);
    token += plain.test(char) ? char : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return token;
}

export function unescapeToken(token: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < token.length; i++) {
    if (token[i] === '_') {
      bytes.push(Number.parseInt(token.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(token.charCodeAt(i));
  }
  return Buffer.from(bytes).toString('utf8');
}

/** The subjects of one deployment (`prefix`, EVENTFLOW_NATS_SUBJECT_PREFIX). */
export class Subjects {
  readonly #prefix: string;

  constructor(prefix: string) {
    this.#prefix = prefix;
  }

  /** Where a stored event of (domain, name) is announced. */
  event(domain: string, name: string): string {
    return `${this.#prefix}.event.${escapeToken(domain)}.${escapeToken(name)}`;
  }

  /** What a gateway interested in (domain, name) subscribes to; name `*` is every name of the domain. */
  interest(domain: string, name: string): string {
    return `${this.#prefix}.event.${escapeToken(domain)}.${name === '*' ? '*' : escapeToken(name)}`;
  }

  /** Every event subject: what a gateway with pattern subscriptions subscribes to (a pattern may match any domain). */
  get anyEvent(): string {
    return `${this.#prefix}.event.*.*`;
  }

  /** The domain of an event subject (`event`'s inverse), or undefined for another subject. */
  domainOf(subject: string): string | undefined {
    const start = `${this.#prefix}.event.`;
    if (!subject.startsWith(start)) return undefined;
    const token = subject.slice(start.length).split('.')[0] ?? '';
    return /^(?:[A-Za-z0-9-]|_[0-9A-F]{2})+$/.test(token) ? unescapeToken(token) : undefined;
  }

  /** A gateway (re)connected: everyone reads its interested domains from the store again. */
  get resync(): string {
    return `${this.#prefix}.resync`;
  }

  /** A gateway's heartbeat: its id (members.ts). */
  get gateway(): string {
    return `${this.#prefix}.gateway`;
  }

  /** An event was scheduled: everyone reads its next due time from the store again. */
  get scheduled(): string {
    return `${this.#prefix}.scheduled`;
  }
}

/**
 * Whether a message is one a gateway sends: no headers, and on an event subject a position
 * (decimal digits, no leading zero, a safe integer), on `resync` and `scheduled` nothing. Anything
 * else on our subjects comes from some other client of the server and is dropped unread.
 */
export function isPositionPayload(data: Uint8Array): boolean {
  if (data.length === 0 || data.length > 16 || data[0] === 0x30) return false;
  for (const byte of data) if (byte < 0x30 || byte > 0x39) return false;
  return Number.isSafeInteger(Number(Buffer.from(data.buffer, data.byteOffset, data.length).toString('latin1')));
}
