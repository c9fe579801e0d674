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
  if (now !== idTime) idTimeText = (idTime = now).toString(36);
  if (used + 2 > pool.length) {
    crypto.getRandomValues(pool);
    used = 0;
  }
  return `${idTimeText}-${base36(pool[used++]!)}${base36(pool[used++]!)}`;
}

// Number#toString(36) was most of an id's cost (~1.3 µs an id, a pipelined publisher's third-largest
// item): the time is converted once per millisecond and the random words by hand.
let idTime = -1;
let idTimeText = '';
const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';

/** A 32-bit number in base 36, padded to 7 digits (2^32 − 1 is "1z141z3"). */
function base36(n: number): string {
  let text = '';
  for (let i = 0; i < 7; i++) {
    text = DIGITS[n % 36]! + text;
    n = Math.floor(n / 36);
  }
  return text;
}

/** `<word>-<word>-<base36 ms>`, lower case, shaped like v4's `spoke.generatePid()`. */
export const generatePid = (now: number = Date.now()): string => `${word()}-${word()}-${now.toString(36)}`;
