/**
 * Token domain patterns (glob.ts): the same answers as the backtracking regular expression they
 * replace, on random small patterns and texts, and bounded work on adversarial patterns that made
 * that expression take seconds to minutes.
 */
import { describe, expect, it } from 'vitest';
import { allows, domainPattern, type Authorization } from '../src/connection/auth.js';
import { glob, globSteps } from '../src/connection/glob.js';
import { mulberry32 } from './fuzz-support.js';

/** The matcher before glob.ts, kept as the oracle: correct, but exponential on many stars. */
function oldRegex(source: string): RegExp {
  const body = source
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${body}$`, 's');
}

/** The bound glob.ts documents: at most text × pattern character comparisons. */
const bound = (pattern: string, text: string): number => Math.max(1, text.length) * Math.max(1, pattern.length);

describe('domain patterns: `*` = any run of characters, everything else literal, whole string', () => {
  it.each([
    ['orders', 'orders', true],
    ['orders', 'orders2', false],
    ['orders', 'Orders', false],
    ['*', '', true],
    ['*', 'anything at all', true],
    ['billing-*', 'billing-', true],
    ['billing-*', 'billing-eu', true],
    ['billing-*', 'billing', false],
    ['*-eu', 'billing-eu', true],
    ['a*b*c', 'abc', true],
    ['a*b*c', 'aXbYc', true],
    ['a*b*c', 'acb', false],
    ['a*a', 'a', false],
    ['a*a', 'aa', true],
    ['**', 'x', true],
    ['a.b', 'aXb', false],
    ['a.b', 'a.b', true],
    ['(x)+$', '(x)+$', true],
    ['[a]*', '[a]zz', true],
    ['\\*', '\\anything', true],
    ['a\nb', 'a\nb', true],
  ])('%j on %j → %s', (pattern, text, expected) => {
    expect(glob(pattern).test(text)).toBe(expected);
    expect(oldRegex(pattern).test(text)).toBe(expected);
  });

  it('agrees with the old regular expression on 20,000 random small patterns and texts', () => {
    const random = mulberry32(0x6106);
    const alphabet = ['a', 'b', '*', '.', '\\', '\n'];
    const word = (max: number, letters: string[]): string =>
      Array.from({ length: Math.floor(random() * (max + 1)) }, () => letters[Math.floor(random() * letters.length)]).join('');
    for (let i = 0; i < 20_000; i++) {
      const pattern = word(8, alphabet);
      const text = random() < 0.5 ? word(10, ['a', 'b', '.', '\\', '\n', '*']) : pattern.replace(/\*/g, () => word(3, ['a', 'b']));
      expect(glob(pattern).test(text), `${JSON.stringify(pattern)} on ${JSON.stringify(text)}`).toBe(oldRegex(pattern).test(text));
    }
  });

  it('bounds the work on adversarial patterns against a 64-character domain', () => {
    const a64 = 'a'.repeat(64);
    // The first took the regular expression minutes (6 stars: ~22 s); each is also checked against it where it can answer.
    const cases: Array<[string, boolean]> = [
      [`${'*a'.repeat(10)}*b`, false],
      [`*${'a*'.repeat(30)}b`, false],
      ['*'.repeat(200), true],
      [`${'*'.repeat(200)}b`, false],
      [`${'a*'.repeat(128)}`, false],
      [`${'a*'.repeat(64)}`, true],
      [`*${'a'.repeat(63)}*b`, false],
      [`${'*aaaaaaaa'.repeat(25)}*b`, false],
      [`${'*aaaaaaaa'.repeat(7)}*`, true],
      [`${'*ab'.repeat(85)}`, false],
    ];
    for (const [pattern, expected] of cases) {
      const { matched, steps } = globSteps(pattern, a64);
      expect(matched, pattern).toBe(expected);
      expect(steps, pattern).toBeLessThanOrEqual(bound(pattern, a64));
    }
    // And in time, every pattern of the claim's size (256 characters) against every domain size.
    const started = performance.now();
    for (const [pattern] of cases) for (let length = 0; length <= 64; length++) glob(pattern.slice(0, 256)).test('a'.repeat(length));
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('authorizes with it: a token of 1,000 adversarial patterns checks a domain in well under a second', () => {
    const patterns = Array.from({ length: 1000 }, () => domainPattern(`${'*a'.repeat(100)}*b`.slice(0, 256)));
    const auth: Authorization = { authenticated: true, grants: { read: patterns }, expiresAt: undefined };
    const started = performance.now();
    expect(allows(auth, 'read', 'a'.repeat(64))).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(allows({ ...auth, grants: { read: [domainPattern('a*a')] } }, 'read', 'a'.repeat(64))).toBe(true);
  });
});
