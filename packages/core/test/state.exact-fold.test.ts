/**
 * The state property test again with the browser build's fast-fold.ts (the package's "browser"
 * field maps it to fast-fold.browser.ts: no direct fold), so that browsers, which fold in chunks
 * only, are proven to compose exactly what Node composes.
 */
import { vi } from 'vitest';

vi.mock('../src/fast-fold.js', () => import('../src/fast-fold.browser.js'));

await import('./state.fuzz.test.js');
