/**
 * aether's MatchNamespacePattern: NATS-style patterns over dot-separated tokens, for subscribing to
 * many domains at once. `*` matches exactly one token, `>` one or more trailing tokens (only as the
 * last token); any other token matches only itself. `prod.*` matches `prod.eu` (not `prod` or
 * `prod.eu.1`), `prod.>` matches `prod.eu` and `prod.eu.1`, `*.orders` matches `eu.orders`.
 *
 * A v4 domain may itself contain `*` or `>`, so a pattern is never a domain string: it travels as a
 * typed value (`namespacePattern('prod.>')`) and in a parameter of its own (`subscribePattern`).
 * Only a whole token is a wildcard: `a*b` is a literal token. Matching is a single left-to-right
 * pass over the tokens (no backtracking): O(length of the domain).
 */
import { invalid } from './validate.js';
import { patternParams, PatternSubscriptions, type PatternParams } from './pattern-subscriptions.js';
import type { RegistrationHost } from './registrations.js';

/**
 * A namespace pattern as a value of its own, so that it cannot be mistaken for a domain. It brings
 * the client's pattern-subscription code along (`subscriptions`, and `params`, which checks a
 * subscription's names and pid), so that only applications that make patterns bundle it.
 */
export interface NamespacePattern {
  readonly kind: 'namespace-pattern';
  readonly pattern: string;
  readonly subscriptions: (host: RegistrationHost) => PatternSubscriptions;
  readonly params: (names: string | readonly string[], pid: string | undefined) => PatternParams;
}

const subscriptions = (host: RegistrationHost): PatternSubscriptions => new PatternSubscriptions(host);

/** The longest pattern accepted (a domain is at most 64 characters; `>` may stand for most of one). */
export const MAX_PATTERN_LENGTH = 64;

/** Why `pattern` is not a valid namespace pattern, or undefined when it is. */
export function namespacePatternProblem(pattern: unknown): string | undefined {
  if (typeof pattern !== 'string') return 'must be a string';
  if (pattern.length < 1 || pattern.length > MAX_PATTERN_LENGTH) return `must be 1-${MAX_PATTERN_LENGTH} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[^\x20-\x7e]/.test(pattern)) return 'must be printable ASCII';
  // As for identifiers (validate.ts): a domain never ends with one.
  if (pattern.endsWith(' ')) return 'must not end with a space';
  const tokens = pattern.split('.');
  if (tokens.some((token) => token === '')) return 'must not have empty tokens (no leading, trailing or double dots)';
  if (tokens.slice(0, -1).includes('>')) return '">" may only be the last token';
  return undefined;
}

/** A checked pattern value; throws E_EVENTFLOW_INVALID_INPUT naming the problem. */
export function namespacePattern(pattern: string): NamespacePattern {
  const problem = namespacePatternProblem(pattern);
  if (problem !== undefined) throw invalid(`namespace pattern "${String(pattern)}" ${problem}`, { pattern });
  return Object.freeze({ kind: 'namespace-pattern', pattern, subscriptions, params: (names: string | readonly string[], pid: string | undefined) => patternParams(pattern, names, pid) });
}

export function isNamespacePattern(value: unknown): value is NamespacePattern {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'namespace-pattern';
}

/** Whether `domain` matches `pattern` (a valid pattern; see namespacePatternProblem). */
export function matchNamespacePattern(pattern: string, domain: string): boolean {
  let p = 0;
  let d = 0;
  for (;;) {
    const pEnd = pattern.indexOf('.', p);
    const token = pattern.slice(p, pEnd === -1 ? undefined : pEnd);
    // Reached only at the start or after a dot of the domain: at least one token is left for it.
    if (token === '>') return true;
    const dEnd = domain.indexOf('.', d);
    const part = domain.slice(d, dEnd === -1 ? undefined : dEnd);
    if (token !== '*' && token !== part) return false;
    if (pEnd === -1) return dEnd === -1;
    if (dEnd === -1) return false;
    p = pEnd + 1;
    d = dEnd + 1;
  }
}
