#!/usr/bin/env node
/**
 * `npm start`'s build: `tsc -b` (incremental: a second or two when nothing changed) and the demo
 * dashboard's and the console's vite builds only when one of their inputs is newer than their
 * output, so a start when nothing changed costs a few seconds instead of a full rebuild. The worker
 * build of `npm run build` is not needed to serve the dashboard and is left out.
 *
 * It says what it does before each step, with how long that step takes on a first build, and how
 * long it took: a first `npm start` spends most of a minute in tsc, which must not look like a hang.
 *
 *   node scripts/build-if-stale.mjs [--packages]
 *     --packages: only what the published packages carry (dist/, the gateway's bundle and console), for `npm run pack`
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const packagesOnly = process.argv.includes('--packages');
const say = (line) => process.stdout.write(`${line}\n`);

/** Runs a step, saying what it is and, for a first build, about how long it takes (figures: 2 cores, Node 20). */
function step(what, firstTime, script, args) {
  const started = performance.now();
  say(`build: ${what}${firstTime ? ` (${firstTime})` : ''} …`);
  execFileSync(process.execPath, [join(root, script), ...args], { cwd: root, stdio: 'inherit' });
  say(`build: ${what}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/** The newest modification time under `path` (a file or a directory tree), 0 if it does not exist. */
function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(path)) if (entry !== 'node_modules' && entry !== 'dist') latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

const firstBuild = !existsSync(join(root, 'gateway/dist/main.js'));
if (firstBuild) say('build: first build of this checkout: about 30–90 s, mostly TypeScript; later starts rebuild only what changed (a few seconds)');
step('TypeScript (tsc -b: packages/*/dist, gateway/dist)', firstBuild ? 'first build: 30–80 s' : 'incremental', 'node_modules/typescript/bin/tsc', ['-b', 'tsconfig.build.json']);

// The gateway's bundle (what the bin runs), when a build of dist/ is newer than it (the bin's own rule).
step("the gateway's start-up bundle (esbuild, when dist/ changed)", firstBuild ? 'a few seconds' : '', 'scripts/bundle-gateway.mjs', ['--if-stale']);

if (!packagesOnly) {
  const demoInputs = ['demo/src', 'demo/sw', 'demo/index.html', 'demo/vite.config.ts', 'packages/browser/src', 'packages/core/src', 'package-lock.json'];
  const built = statSync(join(root, 'demo/dist/index.html'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const changed = Math.max(...demoInputs.map((input) => newest(join(root, input))));
  if (changed > built) step('the demo dashboard (vite build demo)', 'about 5–20 s', 'node_modules/vite/bin/vite.js', ['build', 'demo', '--logLevel', 'warn']);
  else say('build: demo dashboard up to date (demo/dist)');
}

// The console, served by the gateway at /console/ beside the demo (gateway/console, a copy of packages/console/dist).
const consoleInputs = ['packages/console/src', 'packages/console/index.html', 'packages/console/vite.config.ts', 'packages/browser/src', 'packages/core/src', 'package-lock.json'];
const consoleBuilt = statSync(join(root, 'gateway/console/index.html'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
if (Math.max(...consoleInputs.map((input) => newest(join(root, input)))) > consoleBuilt) {
  step('the console (vite build packages/console)', 'about 5–20 s', 'node_modules/vite/bin/vite.js', ['build', 'packages/console', '--logLevel', 'warn']);
  execFileSync(process.execPath, [join(root, 'scripts/copy-console.mjs')], { cwd: root, stdio: 'inherit' });
} else say('build: console up to date (gateway/console)');
