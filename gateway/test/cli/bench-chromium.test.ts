/** `npm run bench` finds Chromium as .ci/run does (on PATH, or CHROMIUM_PATH), or skips browser-open with the reason. */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findChromium } from '@eventflow/bench/chromium';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-chromium-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bench: finding Chromium', () => {
  it('a CHROMIUM_PATH that does not exist is a reason to skip, saying how to get one', () => {
    expect(findChromium({ CHROMIUM_PATH: join(dir, 'missing/chromium'), PATH: '' })).toEqual({
      missing: `CHROMIUM_PATH=${join(dir, 'missing/chromium')} is not an executable file; install Debian's (apt-get install chromium, as .ci/run does) or set CHROMIUM_PATH`,
    });
  });

  it('without CHROMIUM_PATH, chromium on PATH is used, as .ci/run finds it', () => {
    const fake = join(dir, 'chromium');
    writeFileSync(fake, '#!/bin/sh\n');
    chmodSync(fake, 0o755);
    expect(findChromium({ PATH: `/nonexistent:${dir}` })).toEqual({ path: fake });
  });
});
