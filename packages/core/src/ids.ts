/**
 * Identifiers in v4's formats (eventflow-v4.md §1.1, §1.3), generated on the client so that a
 * publish can be retried without being stored twice.
 */
const characteristics = [
  'amber', 'bold', 'brave', 'calm', 'clever', 'crimson', 'daring', 'eager', 'emerald', 'fearless',
  'fierce', 'gentle', 'golden', 'happy', 'jolly', 'keen', 'lucky', 'mighty', 'nimble', 'proud',
  'quiet', 'rapid', 'silent', 'silver', 'stalking', 'swift', 'tidy', 'vivid', 'wise', 'zealous',
];
const onsets = ['b', 'br', 'd', 'dr', 'g', 'gr', 'k', 'l', 'm', 'n', 'r', 's', 't', 'th', 'v', 'z'];
const vowels = ['a', 'e', 'i', 'o', 'u', 'ae', 'ai', 'or', 'en'];

function randomInt(max: number): number {
  const buffer = new Uint32Array(1);
  globalThis.crypto.getRandomValues(buffer);
  return (buffer[0] ?? 0) % max;
}

function pick<T>(items: readonly T[]): T {
  return items[randomInt(items.length)] as T;
}

function randomName(): string {
  let name = '';
  const syllables = 2 + randomInt(2);
  for (let i = 0; i < syllables; i++) name += pick(onsets) + pick(vowels);
  return name + pick(['n', 'rn', 'd', 'l', '']);
}

/**
 * `<base36 ms>-<random base36>`, like v4's ids, but with 64 random bits from the platform CSPRNG
 * instead of Math.random(), because client-generated ids must not collide across clients.
 */
export function generateEventId(now: number = Date.now()): string {
  const random = new Uint32Array(2);
  globalThis.crypto.getRandomValues(random);
  const suffix = (random[0] ?? 0).toString(36).padStart(7, '0') + (random[1] ?? 0).toString(36).padStart(7, '0');
  return `${now.toString(36)}-${suffix}`;
}

/** `<characteristic>-<name>-<base36 ms>`, lower case, as v4's `spoke.generatePid()`. */
export function generatePid(now: number = Date.now()): string {
  return `${pick(characteristics)}-${randomName()}-${now.toString(36)}`;
}
