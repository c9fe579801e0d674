/**
 * The README's Node script, as a reader copies it: run as a real process against a gateway, it
 * prints what its comments say, exits by itself (it closes its client), and leaves no consumer
 * group behind (groups are durable: a left-over one would collect backlog forever).
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listGroups } from '@eventflow/core';
import { startHarness } from '@eventflow/test-support/harness';
import { finished, repoRoot, run } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'eventflow-readme-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The first ```js block after `heading` in the root README. */
function example(heading: string): string {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf(heading));
  const match = /```js\n([\s\S]*?)```/.exec(section);
  if (!match?.[1]) throw new Error(`no js block after ${heading}`);
  return match[1];
}

describe("the README's Node script", () => {
  it('runs as written, prints what its comments say, exits by itself, and leaves no consumer group', async () => {
    const h = await startHarness();
    try {
      const script = example('## A Node script');
      expect(script).toContain("'ws://127.0.0.1:8080/'");
      // Outside the repository, with the workspace's packages where npm would put them (run from their sources).
      symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
      const file = join(dir, 'example.mjs');
      writeFileSync(file, script.replace("'ws://127.0.0.1:8080/'", JSON.stringify(h.gateway.url)));
      // A script that did not close its client would not exit: SIGKILLed after 30 s, `signal` says so.
      const result = await finished(run(process.execPath, ['--import', join(repoRoot, 'scripts/source-loader.mjs'), file], {}, dir), 30_000);
      expect(result, result.stderr).toMatchObject({ code: 0, signal: null });
      expect(result.stdout).toContain("outcome success { shipped: true }");
      expect(result.stdout).toContain('waited success');
      expect(result.stdout).toContain("{ sku: 'book', shipped: true }");
      expect(result.stdout).toContain('saw reminder');
      const client = h.client();
      expect(await listGroups(client)).toEqual([]);
    } finally {
      await h.stop();
    }
  });
});
