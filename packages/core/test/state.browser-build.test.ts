/**
 * The state property test again as browser builds compose (the package's "browser" field maps
 * fast-fold.ts and state-collections.ts to their .browser.ts modules: chunked fold only, JSON
 * values only), so that browsers are proven to compose exactly what Node composes for JSON data,
 * plus what the browser module does with a Map, Set or Date (packages/core/README.md says so).
 */
import { describe, expect, it, vi } from 'vitest';
import { applyEvent, composeEventlogState, emptyState } from '../src/state.js';

vi.mock('../src/fast-fold.js', () => import('../src/fast-fold.browser.js'));
vi.mock('../src/state-collections.js', () => import('../src/state-collections.browser.js'));

await import('./state.fuzz.test.js');

describe('browser builds: values JSON has no form for', () => {
  it('keeps a Map, Set or Date by reference, unfrozen, and replaces it instead of merging', () => {
    const map = new Map([['k', 1]]);
    const set = new Set([1]);
    const date = new Date(0);
    const state = composeEventlogState([{ data: { m: map, s: set, d: date } }, { data: { s: new Set([2]) } }], 1);
    expect(state['m']).toBe(map);
    expect(state['d']).toBe(date);
    expect(state['s']).toEqual(new Set([2]));
    expect(Object.isFrozen(map)).toBe(false);
    expect(Object.isFrozen(state)).toBe(true);
    const next = applyEvent(emptyState, { data: { m: map } });
    expect(next['m']).toBe(map);
    expect(applyEvent(next, { data: { m: new Map([['j', 2]]) } })['m']).toEqual(new Map([['j', 2]]));
  });
});
