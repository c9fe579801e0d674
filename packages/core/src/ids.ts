/**
 * Identifiers in v4's formats (eventflow-v4.md §1.1, §1.3), generated on the client so that a
 * publish can be retried without being stored twice.
 */

/** Random 32-bit numbers drawn from the platform CSPRNG 256 at a time: one call per id cost a pipelined publisher more than its JSON. */
const pool = new Uint32Array(256);
let used = pool.length;

/** `n` (at most 256) random 32-bit numbers from the platform CSPRNG (client-generated ids must not collide across clients). */
function random(n: number): Uint32Array {
  if (used + n > pool.length) {
    crypto.getRandomValues(pool);
    used = 0;
  }
  return pool.slice(used, (used += n));
}

/** A pronounceable lower-case word of 2 to 4 consonant-vowel syllables (about 7 random bits each). */
function word(): string {
  let text = '';
  for (const r of random(2 + (random(1)[0]! % 3))) text += 'bcdfghjklmnprstvwz'[r % 18]! + 'aeiouy'[(r >>> 8) % 6]!;
  return text;
}

/**
 * `<base36 ms>-<random base36>`, like v4's ids, but with 64 random bits from the platform CSPRNG
 * instead of Math.random(), because client-generated ids must not collide across clients.
 */
export function generateEventId(now: number = Date.now()): string {
  let suffix = '';
  for (const r of random(2)) suffix += r.toString(36).padStart(7, '0');
  return `${now.toString(36)}-${suffix}`;
}

/** `<word>-<word>-<base36 ms>`, lower case, shaped like v4's `spoke.generatePid()`. */
export const generatePid = (now: number = Date.now()): string => `${word()}-${word()}-${now.toString(36)}`;
