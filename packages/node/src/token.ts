/**
 * `eventflow token`: a token for a gateway with EVENTFLOW_AUTH=jwt and a shared secret
 * (EVENTFLOW_JWT_SECRET), so that the first token needs nothing but this package. It carries the
 * claims gateway/README.md "Authentication" documents: `sub`, `iat`, `exp` (the gateway refuses a
 * token without one), `iss`/`aud` when the gateway checks them, and the `eventflow` claim (per
 * action, the domain patterns allowed), signed with HS256, the one algorithm a secret verifies.
 * Signed with node:crypto: a JWT of this shape is one HMAC, not worth a dependency.
 */
import { createHmac } from 'node:crypto';
import { EventflowError } from '@eventflow/core';

/** The gateway's actions (gateway/src/connection/auth.ts; a test holds them equal through a real gateway). */
export const tokenActions = ['read', 'subscribe', 'publish', 'consume', 'schedule', 'delete', 'wildcard', 'manage'] as const;
export type TokenAction = (typeof tokenActions)[number];

/** The gateway's minimum for EVENTFLOW_JWT_SECRET: shorter secrets do not start it. */
const MIN_SECRET_LENGTH = 32;
/** EVENTFLOW_JWT_MAX_LIFETIME_S's default: rights of a longer token end there anyway. */
const GATEWAY_MAX_LIFETIME_S = 86_400;
export const DEFAULT_EXPIRES = '1h';
/** The gateway's limits (gateway/src/connection/auth.ts): longer tokens and patterns are refused at hello. */
const MAX_TOKEN_LENGTH = 8192;
const MAX_PATTERN = 256;

export interface TokenOptions {
  /** The gateway's EVENTFLOW_JWT_SECRET. */
  secret: string;
  /** Who the token is for (`sub`), e.g. "ops-cli". */
  subject: string;
  /** `--allow` values: `<domain-pattern>:<action>[,<action>…]`, `*` for every action. */
  allow: readonly string[];
  /** `--expires`: 90s, 15m, 1h, 7d, or seconds. */
  expires: string;
  issuer?: string | undefined;
  audience?: string | undefined;
  /** Epoch ms (default Date.now()). */
  now?: number;
}

export interface MintedToken {
  token: string;
  claims: { sub: string; iat: number; exp: number; iss?: string; aud?: string; eventflow: Partial<Record<TokenAction, string[]>> };
  /** Set when something about the token deserves a word on stderr. */
  warning?: string;
}

const invalid = (message: string): EventflowError => new EventflowError('E_EVENTFLOW_INVALID_INPUT', message);

export function mintToken(options: TokenOptions): MintedToken {
  if (options.secret.length < MIN_SECRET_LENGTH) {
    throw invalid(
      `secret: must be the gateway's EVENTFLOW_JWT_SECRET, which has at least ${MIN_SECRET_LENGTH} characters (got ${options.secret.length}); pass it with --secret or EVENTFLOW_JWT_SECRET`,
    );
  }
  if (options.subject.trim() === '') throw invalid('--sub: must name who the token is for, e.g. --sub ops-cli');
  if (options.allow.length === 0) {
    throw invalid("--allow: give at least one grant, e.g. --allow 'orders:publish,subscribe' (a token without grants may do nothing)");
  }
  const lifetime = parseDuration(options.expires);
  const grants: Partial<Record<TokenAction, string[]>> = {};
  for (const grant of options.allow) {
    for (const [action, pattern] of parseGrant(grant)) {
      const patterns = (grants[action] ??= []);
      if (!patterns.includes(pattern)) patterns.push(pattern);
    }
  }
  const iat = Math.floor((options.now ?? Date.now()) / 1000);
  const claims: MintedToken['claims'] = {
    sub: options.subject,
    iat,
    exp: iat + lifetime,
    ...(options.issuer ? { iss: options.issuer } : {}),
    ...(options.audience ? { aud: options.audience } : {}),
    eventflow: grants,
  };
  const header = encode({ alg: 'HS256', typ: 'JWT' });
  const body = encode(claims);
  const signature = createHmac('sha256', options.secret).update(`${header}.${body}`).digest('base64url');
  const warning =
    lifetime > GATEWAY_MAX_LIFETIME_S
      ? `note: the token's rights end after EVENTFLOW_JWT_MAX_LIFETIME_S on the gateway (default ${GATEWAY_MAX_LIFETIME_S} s = 24 h), earlier than its exp`
      : undefined;
  const token = `${header}.${body}.${signature}`;
  if (token.length > MAX_TOKEN_LENGTH) {
    throw invalid(`--allow: these grants make a token of ${token.length} characters; the gateway accepts at most ${MAX_TOKEN_LENGTH}: give fewer or shorter grants (a pattern with * covers many domains)`);
  }
  return { token, claims, ...(warning ? { warning } : {}) };
}

const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

/** `orders:publish,subscribe` → [['publish','orders'], ['subscribe','orders']]; the pattern is whatever precedes the last colon. */
function parseGrant(grant: string): Array<[TokenAction, string]> {
  const colon = grant.lastIndexOf(':');
  const pattern = colon < 0 ? '' : grant.slice(0, colon);
  const list = colon < 0 ? '' : grant.slice(colon + 1);
  if (pattern.length > MAX_PATTERN) {
    throw invalid(`--allow: the domain pattern ${JSON.stringify(pattern.slice(0, 32))}… has ${pattern.length} characters; the gateway accepts at most ${MAX_PATTERN} (a * matches any run of characters)`);
  }
  if (pattern === '' || list === '') {
    throw invalid(`--allow ${JSON.stringify(grant)}: expected <domain-pattern>:<action>[,<action>…], e.g. 'orders:publish,subscribe' or 'billing-*:read' (actions: ${tokenActions.join(', ')}, or * for all)`);
  }
  const actions = list.split(',').map((action) => action.trim());
  const result: Array<[TokenAction, string]> = [];
  for (const action of actions) {
    if (action === '*') for (const each of tokenActions) result.push([each, pattern]);
    else if ((tokenActions as readonly string[]).includes(action)) result.push([action as TokenAction, pattern]);
    else throw invalid(`--allow ${JSON.stringify(grant)}: unknown action ${JSON.stringify(action)}; the actions are ${tokenActions.join(', ')} (or * for all)`);
  }
  return result;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** Seconds of `90s`, `15m`, `1h`, `7d`, or a plain number of seconds. */
export function parseDuration(raw: string): number {
  const match = /^(\d+)([smhd]?)$/.exec(raw.trim());
  const seconds = match ? Number(match[1]) * (UNITS[match[2] || 's'] as number) : NaN;
  if (!Number.isSafeInteger(seconds) || seconds <= 0) {
    throw invalid(`--expires: expected a duration such as 90s, 15m, 1h or 7d (or seconds), got ${JSON.stringify(raw)}; tokens must expire`);
  }
  return seconds;
}
