#!/usr/bin/env node
/**
 * `npm start`'s build: `tsc -b` (incremental: a few hundred ms when nothing changed) and the demo
 * dashboard's vite build only when one of its inputs is newer than its output, so a start when
 * nothing changed costs about a second instead of a full rebuild. The worker build of `npm run
 * build` is not needed to serve the dashboard and is left out.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const node = (script, args) => execFileSync(process.execPath, [join(root, script), ...args], { cwd: root, stdio: 'inherit' });

/** The newest modification time under `path` (a file or a directory tree), 0 if it does not exist. */
function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(path)) if (entry !== 'node_modules' && entry !== 'dist') latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

node('node_modules/typescript/bin/tsc', ['-b', 'tsconfig.build.json']);

// The gateway's bundle (what the bin runs), when a build of dist/ is newer than it (the bin's own rule).
node('scripts/bundle-gateway.mjs', ['--if-stale']);

const demoInputs = ['demo/src', 'demo/sw', 'demo/index.html', 'demo/vite.config.ts', 'packages/browser/src', 'packages/core/src', 'package-lock.json'];
const built = statSync(join(root, 'demo/dist/index.html'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
const changed = Math.max(...demoInputs.map((input) => newest(join(root, input))));
if (changed > built) node('node_modules/vite/bin/vite.js', ['build', 'demo', '--logLevel', 'warn']);
else process.stdout.write('demo dashboard up to date (demo/dist)\n');

// The console, served by the gateway at /console/ beside the demo (gateway/console, a copy of packages/console/dist).
const consoleInputs = ['packages/console/src', 'packages/console/index.html', 'packages/console/vite.config.ts', 'packages/browser/src', 'packages/core/src', 'package-lock.json'];
const consoleBuilt = statSync(join(root, 'gateway/console/index.html'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
if (Math.max(...consoleInputs.map((input) => newest(join(root, input)))) > consoleBuilt) {
  node('node_modules/vite/bin/vite.js', ['build', 'packages/console', '--logLevel', 'warn']);
  node('scripts/copy-console.mjs', []);
} else process.stdout.write('console up to date (gateway/console)\n');
