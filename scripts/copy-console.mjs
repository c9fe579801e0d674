#!/usr/bin/env node
/**
 * Puts the console's build (packages/console/dist, from `vite build packages/console`) into the
 * gateway package (gateway/console), which ships it (gateway/package.json `files`) and serves it.
 */
import { cpSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const from = join(root, 'packages/console/dist');
const to = join(root, 'gateway/console');
if (!existsSync(join(from, 'index.html'))) {
  process.stderr.write('copy-console: packages/console/dist/index.html is missing; run `vite build packages/console` first\n');
  process.exit(1);
}
rmSync(to, { recursive: true, force: true });
cpSync(from, to, { recursive: true });
process.stdout.write(`console build copied to ${to}\n`);
