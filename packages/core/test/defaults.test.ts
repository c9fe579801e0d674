/**
 * defaults.ts is the one place of the client's timing and limit defaults: the README's table
 * lists every constant with its value, and the options table quotes the same values.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as defaults from '../src/defaults.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const table = readme.slice(readme.indexOf('<!-- defaults:start -->'), readme.indexOf('<!-- defaults:end -->'));
/** constant → value, from the README's defaults table. */
const documented = new Map([...table.matchAll(/^\| `(\w+)` \| `(\d+)` \|/gm)].map((match) => [match[1], Number(match[2])]));

describe('defaults', () => {
  it('the README lists every constant of defaults.ts with its value, and nothing else', () => {
    expect(Object.fromEntries(documented)).toEqual({ ...defaults });
  });

  it('the options table quotes the same values', () => {
    const option = (name: string): number => Number(new RegExp(`^\\| \`${name.replace('.', '\\.')}\` \\| \`(\\d+)\``, 'm').exec(readme)?.[1]);
    expect(option('requestTimeout')).toBe(defaults.DEFAULT_REQUEST_TIMEOUT);
    expect(option('handshakeTimeout')).toBe(defaults.DEFAULT_HANDSHAKE_TIMEOUT);
    expect(option('heartbeatInterval')).toBe(defaults.DEFAULT_HEARTBEAT_INTERVAL);
    expect(option('reconnect.minDelay')).toBe(defaults.DEFAULT_RECONNECT_MIN_DELAY);
    expect(option('reconnect.maxDelay')).toBe(defaults.DEFAULT_RECONNECT_MAX_DELAY);
    expect(option('reconnect.factor')).toBe(defaults.DEFAULT_RECONNECT_FACTOR);
  });
});
