import { describe, expect, it } from 'vitest';
import { isNamespacePattern, matchNamespacePattern, namespacePattern, namespacePatternProblem } from '../src/namespace-pattern.js';
import { prng } from './prng.js';

/** The reference: NATS subject matching written token by token, the obvious way. */
function reference(pattern: string, domain: string): boolean {
  const p = pattern.split('.');
  const d = domain.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return d.length > i;
    if (i >= d.length) return false;
    if (p[i] !== '*' && p[i] !== d[i]) return false;
  }
  return p.length === d.length;
}

describe('matchNamespacePattern', () => {
  it.each([
    ['prod.*', 'prod.eu', true],
    ['prod.*', 'prod', false],
    ['prod.*', 'prod.eu.1', false],
    ['prod.>', 'prod.eu', true],
    ['prod.>', 'prod.eu.1', true],
    ['prod.>', 'prod', false],
    ['*.orders', 'eu.orders', true],
    ['*.orders', 'orders', false],
    ['*.tenant.*', 'a.tenant.b', true],
    ['*.tenant.*', 'a.tenant', false],
    ['>', 'anything.at.all', true],
    ['*', 'one', true],
    ['*', 'one.two', false],
    ['a*b', 'axb', false],
    ['a*b', 'a*b', true],
    ['prod.eu', 'prod.eu', true],
    ['prod.eu', 'prod.eu2', false],
    ['x.*', 'x.', true],
  ])('%s against %s: %s', (pattern, domain, expected) => {
    expect(matchNamespacePattern(pattern, domain)).toBe(expected);
  });

  it('equals the token-by-token reference for random patterns and domains', () => {
    const random = prng(0xa37e);
    const tokens = ['a', 'b', 'ab', '*x', 'x>', ''];
    const pick = <T,>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    for (let i = 0; i < 20_000; i++) {
      const domain = Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(tokens)).join('.') || 'a';
      const parts = Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick([...tokens.filter(Boolean), '*', '*']));
      if (random() < 0.3) parts.push('>');
      const pattern = parts.join('.');
      if (namespacePatternProblem(pattern) !== undefined) continue;
      expect(matchNamespacePattern(pattern, domain), `${pattern} ~ ${domain}`).toBe(reference(pattern, domain));
    }
  });
});

describe('namespacePattern', () => {
  it('makes a typed value, never a string, and refuses malformed patterns with the problem named', () => {
    const value = namespacePattern('prod.>');
    expect(isNamespacePattern(value)).toBe(true);
    expect(isNamespacePattern('prod.>')).toBe(false);
    expect(Object.isFrozen(value)).toBe(true);
    for (const [pattern, problem] of [
      ['', /1-64 characters/],
      ['a..b', /empty tokens/],
      ['.a', /empty tokens/],
      ['a.', /empty tokens/],
      ['a.>.b', /">" may only be the last token/],
      ['ä', /printable ASCII/],
      ['x'.repeat(65), /1-64 characters/],
    ] as const) {
      expect(() => namespacePattern(pattern), pattern).toThrow(problem);
    }
  });
});
