/**
 * Token authentication and per-action authorization. With EVENTFLOW_AUTH=jwt a connection
 * presents a JWT in `hello` (or later with the `authenticate` operation); its `eventflow` claim
 * lists, per action, the domain patterns it may act on (`*` matches any run of characters).
 * Without a token a connection gets the actions of EVENTFLOW_AUTH_ANONYMOUS (none by default).
 * EVENTFLOW_AUTH=none (the default) gives every connection every action on every domain.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import * as z from 'zod';
import { EventflowError, type OperationName } from '@eventflow/core';
import { glob, type Glob } from './glob.js';

/**
 * `wildcard` is aether's privileged capability: pattern subscriptions cross tenant isolation, so
 * they need a grant of their own, whose patterns are matched against the subscription's namespace
 * pattern text (`"wildcard": ["tenant-a.*"]` allows `tenant-a.>` and `tenant-a.*.orders`). Each event
 * is then delivered only if `subscribe` allows its own domain.
 */
/** `manage`: delete consumer groups, requeue and discard dead letters (per domain). */
export const actions = ['read', 'subscribe', 'publish', 'consume', 'schedule', 'delete', 'wildcard', 'manage'] as const;
export type Action = (typeof actions)[number];

/** What one connection may do: per action, the domain patterns allowed. */
export interface Authorization {
  /** False for a connection without a (valid) token. */
  readonly authenticated: boolean;
  readonly grants: { readonly [A in Action]?: readonly DomainPattern[] };
  /** When the token stops being valid, in epoch ms; undefined when it does not expire. */
  readonly expiresAt: number | undefined;
}

/** A domain pattern of a token: matched in bounded time (glob.ts), never as a regular expression. */
export type DomainPattern = Glob;

export function domainPattern(source: string): DomainPattern {
  return glob(source);
}

const everything = [domainPattern('*')];

/** EVENTFLOW_AUTH=none: every action on every domain. */
export const fullAccess: Authorization = {
  authenticated: true,
  grants: Object.fromEntries(actions.map((action) => [action, everything])),
  expiresAt: undefined,
};

/** True when `auth` allows `action` on `domain`. */
export function allows(auth: Authorization, action: Action, domain: string): boolean {
  return auth.grants[action]?.some((pattern) => pattern.test(domain)) ?? false;
}

/** True when `auth` allows `action` on at least one domain. */
export function allowsAny(auth: Authorization, action: Action): boolean {
  return (auth.grants[action]?.length ?? 0) > 0;
}

/** The error for a request `auth` does not allow: UNAUTHORIZED without credentials, FORBIDDEN with insufficient ones. Nothing is done. */
export function denied(auth: Authorization, op: OperationName, action: Action, domain: string | undefined): EventflowError {
  const where = domain === undefined ? '' : ` on domain "${domain}"`;
  return auth.authenticated
    ? new EventflowError('E_EVENTFLOW_FORBIDDEN', `${op}: the token does not allow "${action}"${where}`, { details: { action, ...(domain === undefined ? {} : { domain }) } })
    : new EventflowError('E_EVENTFLOW_UNAUTHORIZED', `${op}: anonymous connections may not "${action}"${where}; send a token in "hello"`, {
        details: { action, ...(domain === undefined ? {} : { domain }) },
      });
}

/**
 * The `eventflow` claim. Unknown actions are ignored, so that newer tokens work with older gateways.
 * Made with the first JWT authenticator: a gateway without authentication does not build it at start.
 */
const eventflowClaim = () =>
  z.object(
    Object.fromEntries(actions.map((action) => [action, z.array(z.string().min(1).max(MAX_PATTERN)).max(MAX_PATTERNS).optional()])) as {
      [A in Action]: z.ZodOptional<z.ZodArray<z.ZodString>>;
    },
  );
let claim: ReturnType<typeof eventflowClaim> | undefined;

export interface AuthSettings {
  mode: 'none' | 'jwt';
  secret?: string | undefined;
  publicKey?: string | undefined;
  issuer?: string | undefined;
  audience?: string | undefined;
  anonymous: readonly Action[];
  /**
   * EVENTFLOW_JWT_MAX_LIFETIME_S: the longest a token's rights last, from its `iat` (from when the
   * gateway first sees it when it has none), and the longest a connection holds token rights.
   */
  maxLifetimeS: number;
}

export interface Authenticator {
  readonly mode: 'none' | 'jwt';
  /** The rights of a connection that sent no token. */
  readonly anonymous: Authorization;
  /** How long after it opened a connection may hold token rights (EVENTFLOW_JWT_MAX_LIFETIME_S); undefined: no end. */
  readonly maxLifetimeMs: number | undefined;
  /**
   * Verifies a token; throws E_EVENTFLOW_UNAUTHORIZED when it is malformed, forged, expired, has no
   * `exp`, is older than the maximum lifetime or is not for this gateway. The rights end at `exp`,
   * or at `iat` (now when absent) + the maximum lifetime when that is earlier.
   */
  verify(token: string): Promise<Authorization>;
}

/** The longest token a client may send (the protocol's limit on `hello` and `authenticate`). */
export const MAX_TOKEN_LENGTH = 8192;

/** The longest domain pattern of a grant, and the most patterns per action (the claim's schema). */
const MAX_PATTERN = 256;
const MAX_PATTERNS = 1000;

/**
 * A claim the schema refuses, with where (only known action names and indexes: the schema drops other
 * keys) and what a valid one looks like, so that whoever mints the token can fix it.
 */
function malformedClaim(path: readonly PropertyKey[]): EventflowError {
  const at = ['eventflow', ...path.map(String)].join('.');
  return new EventflowError(
    'E_EVENTFLOW_UNAUTHORIZED',
    `the token's "eventflow" claim is malformed at ${at}: it must map actions to arrays of at most ${MAX_PATTERNS} domain patterns of 1 to ${MAX_PATTERN} characters, e.g. { "consume": ["billing-*"] }; get a token with such a claim and reconnect`,
  );
}

/** Seconds of clock skew tolerated for exp/nbf/iat. */
const CLOCK_TOLERANCE = 5;

export function createAuthenticator(settings: AuthSettings): Authenticator {
  if (settings.mode === 'none') {
    return {
      mode: 'none',
      anonymous: fullAccess,
      maxLifetimeMs: undefined,
      verify: () => Promise.resolve(fullAccess),
    };
  }
  let key: Uint8Array | KeyObject;
  let algorithms: string[];
  if (settings.secret !== undefined) {
    key = new TextEncoder().encode(settings.secret);
    algorithms = ['HS256'];
  } else if (settings.publicKey !== undefined) {
    let publicKey: KeyObject;
    try {
      // Environment variables often carry PEM with literal "\n".
      publicKey = createPublicKey(settings.publicKey.replace(/\\n/g, '\n'));
    } catch (error) {
      throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid gateway configuration: EVENTFLOW_JWT_PUBLIC_KEY: not a PEM public key (${(error as Error).message})`);
    }
    const type = publicKey.asymmetricKeyType;
    if (type === 'rsa') algorithms = ['RS256'];
    else if (type === 'ec' && publicKey.asymmetricKeyDetails?.namedCurve === 'prime256v1') algorithms = ['ES256'];
    else throw new EventflowError('E_EVENTFLOW_CONFIG', `invalid gateway configuration: EVENTFLOW_JWT_PUBLIC_KEY: must be an RSA (RS256) or P-256 (ES256) key, not ${type ?? 'unknown'}`);
    key = publicKey;
  } else {
    throw new EventflowError('E_EVENTFLOW_CONFIG', 'invalid gateway configuration: EVENTFLOW_AUTH=jwt needs EVENTFLOW_JWT_SECRET or EVENTFLOW_JWT_PUBLIC_KEY');
  }
  const anonymous: Authorization = {
    authenticated: false,
    grants: Object.fromEntries(settings.anonymous.map((action) => [action, everything])),
    expiresAt: undefined,
  };
  const maxLifetimeMs = settings.maxLifetimeS * 1000;
  const claimSchema = (claim ??= eventflowClaim());
  // jose (~180 modules) is loaded only with EVENTFLOW_AUTH=jwt, and from here on, so that a gateway
  // without authentication starts without it and the first hello does not wait for it.
  const jose = import('jose');
  jose.catch(() => undefined); // a failure is reported by the first verify
  return {
    mode: 'jwt',
    anonymous,
    maxLifetimeMs,
    async verify(token) {
      if (token.length > MAX_TOKEN_LENGTH) {
        throw new EventflowError(
          'E_EVENTFLOW_UNAUTHORIZED',
          `the token has ${token.length} characters, more than the ${MAX_TOKEN_LENGTH} a gateway accepts: give it fewer or shorter grants (a pattern with * covers many domains) and reconnect`,
        );
      }
      const { errors: joseErrors, jwtVerify } = await jose;
      let payload;
      try {
        ({ payload } = await jwtVerify(token, key, {
          algorithms,
          clockTolerance: CLOCK_TOLERANCE,
          ...(settings.issuer === undefined ? {} : { issuer: settings.issuer }),
          ...(settings.audience === undefined ? {} : { audience: settings.audience }),
        }));
      } catch (error) {
        const reason = error instanceof joseErrors.JWTExpired ? 'the token has expired' : error instanceof joseErrors.JOSEError ? `the token is not valid (${error.code})` : 'the token is not valid';
        throw new EventflowError('E_EVENTFLOW_UNAUTHORIZED', `${reason}; get a new one and reconnect`);
      }
      const parsed = claimSchema.safeParse(payload['eventflow'] ?? {});
      if (!parsed.success) throw malformedClaim(parsed.error.issues[0]?.path ?? []);
      const grants: { [A in Action]?: DomainPattern[] } = {};
      for (const action of actions) {
        const patterns = parsed.data[action];
        if (patterns) grants[action] = patterns.map(domainPattern);
      }
      return { authenticated: true, grants, expiresAt: rightsEnd(payload.exp, payload.iat, maxLifetimeMs) };
    },
  };
}

/**
 * How each operation is authorized: its action and the domain(s) in its params. `byEvent`: the
 * domain is only known once the event is loaded, which the handler checks (Session.eventFor) before
 * returning or changing anything, or the operation returns events of several domains, which leave
 * only for domains the connection may read (visibility.ts keepReadable). `own`: the operation only
 * touches this connection's own registrations, which any grant of the action covers.
 */
export type Rule =
  | { kind: 'none' }
  | { kind: 'domain'; action: Action; domain: (params: Record<string, unknown>) => string }
  | { kind: 'byEvent'; action: Action }
  | { kind: 'own'; action: Action };

const param = (params: Record<string, unknown>): string => params['domain'] as string;
const eventDomain = (params: Record<string, unknown>): string => (params['event'] as { domain: string }).domain;

export const rules: { readonly [O in OperationName]: Rule } = {
  publish: { kind: 'domain', action: 'publish', domain: eventDomain },
  persist: { kind: 'domain', action: 'publish', domain: eventDomain },
  schedule: { kind: 'domain', action: 'schedule', domain: eventDomain },
  subscribe: { kind: 'domain', action: 'subscribe', domain: param },
  unsubscribe: { kind: 'domain', action: 'subscribe', domain: param },
  subscribePattern: { kind: 'domain', action: 'wildcard', domain: (params) => params['pattern'] as string },
  unsubscribePattern: { kind: 'own', action: 'wildcard' },
  wait: { kind: 'domain', action: 'subscribe', domain: param },
  cancelWait: { kind: 'own', action: 'subscribe' },
  consume: { kind: 'domain', action: 'consume', domain: param },
  removeConsumer: { kind: 'own', action: 'consume' },
  settle: { kind: 'own', action: 'consume' },
  settleMany: { kind: 'own', action: 'consume' },
  extend: { kind: 'own', action: 'consume' },
  delete: { kind: 'byEvent', action: 'delete' },
  deleteEventlog: { kind: 'domain', action: 'delete', domain: param },
  read: { kind: 'byEvent', action: 'read' },
  readEventlog: { kind: 'domain', action: 'read', domain: param },
  readEventlogState: { kind: 'domain', action: 'read', domain: param },
  readEventlogByTimestamp: { kind: 'domain', action: 'read', domain: param },
  readEventlogFilteredByNames: { kind: 'domain', action: 'read', domain: param },
  readEventlogByChildProcess: { kind: 'domain', action: 'read', domain: param },
  readEventlogByEid: { kind: 'byEvent', action: 'read' },
  readEventlogByDomainAndEid: { kind: 'domain', action: 'read', domain: param },
  readDistinctPidByDomain: { kind: 'domain', action: 'read', domain: param },
  persistEntityAssociation: { kind: 'byEvent', action: 'publish' },
  persistChildProcessAssociation: { kind: 'domain', action: 'publish', domain: param },
  // Listed for the domains the connection may consume (the handler filters).
  groups: { kind: 'own', action: 'consume' },
  deadLetters: { kind: 'own', action: 'consume' },
  deleteGroup: { kind: 'domain', action: 'manage', domain: param },
  requeueDeadLetter: { kind: 'domain', action: 'manage', domain: param },
  discardDeadLetter: { kind: 'domain', action: 'manage', domain: param },
  authenticate: { kind: 'none' },
  ping: { kind: 'none' },
  // The console's reads: answers are filtered by the rights (connection/catalog-operations.ts).
  listDomains: { kind: 'none' },
  listProcesses: { kind: 'domain', action: 'read', domain: param },
  readTimeline: { kind: 'domain', action: 'read', domain: param },
  readLatency: { kind: 'domain', action: 'read', domain: param },
  listScheduled: { kind: 'byEvent', action: 'read' },
  cancelScheduled: { kind: 'byEvent', action: 'schedule' },
  gatewayStats: { kind: 'own', action: 'read' },
};

/**
 * When a token's rights end: at `exp`, capped at `iat` + the maximum lifetime. A token without
 * `exp` is refused rather than capped: it would stay usable for new connections forever. An `iat`
 * in the future counts as now, so that it cannot push the cap out; without `iat` the cap counts
 * from now.
 */
function rightsEnd(exp: number | undefined, iat: number | undefined, maxLifetimeMs: number): number {
  if (exp === undefined) {
    throw new EventflowError('E_EVENTFLOW_UNAUTHORIZED', 'the token has no "exp": this gateway accepts only tokens that expire; get one with an expiry and reconnect');
  }
  const now = Date.now();
  const issued = iat === undefined ? now : Math.min(iat * 1000, now);
  const end = Math.min(exp * 1000, issued + maxLifetimeMs);
  if (end <= now - CLOCK_TOLERANCE * 1000) {
    throw new EventflowError('E_EVENTFLOW_UNAUTHORIZED', 'the token was issued longer ago than EVENTFLOW_JWT_MAX_LIFETIME_S allows; get a new one and reconnect');
  }
  return end;
}

/** The check of `op` that needs only its params (`rules`): the error to answer with, or undefined when allowed. */
export function refusalOf(auth: Authorization, op: OperationName, params: unknown): EventflowError | undefined {
  const rule = rules[op];
  switch (rule.kind) {
    case 'none':
      return undefined;
    case 'domain': {
      const domain = rule.domain(params as Record<string, unknown>);
      return allows(auth, rule.action, domain) ? undefined : denied(auth, op, rule.action, domain);
    }
    case 'byEvent':
    case 'own':
      return allowsAny(auth, rule.action) ? undefined : denied(auth, op, rule.action, undefined);
  }
}
