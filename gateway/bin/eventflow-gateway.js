#!/usr/bin/env node
// The `eventflow-gateway` bin. It is committed JavaScript rather than a file in dist/, so that npm
// links it right after `npm ci`, before anything is built. It runs, in order of preference:
// bundle/main.cjs (scripts/bundle-gateway.mjs: one script, compiled from V8's code cache, starts in
// about a third of the time of dist/'s ~700 modules), dist/main.js when the bundle is missing or
// older than the last `tsc -b` of the gateway or of @eventflow/core (in a repository checkout
// `tsc -b` alone does not rebuild it; an installed package carries both and no build info), and
// otherwise, in a repository checkout, the TypeScript sources.
//
// CommonJS (bin/package.json), as the bundle is: a start through it never sets up Node's ES module
// loader, ~10 ms of an empty process's ~40.
const { existsSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

const mtime = (path) => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? 0;
const bundled = join(__dirname, '../bundle/main.cjs');
const built = join(__dirname, '../dist/main.js');
const loader = join(__dirname, '../../scripts/source-loader.mjs');
const lastBuild = Math.max(mtime(join(__dirname, '../tsconfig.tsbuildinfo')), mtime(join(__dirname, '../../packages/core/tsconfig.tsbuildinfo')));
if (existsSync(bundled) && mtime(bundled) >= lastBuild) {
  require(bundled);
} else if (existsSync(built)) {
  void import(pathToFileURL(built).href);
} else if (existsSync(loader)) {
  void import(pathToFileURL(loader).href).then(() => import(pathToFileURL(join(__dirname, '../src/main.ts')).href));
} else {
  process.stderr.write('eventflow-gateway: this copy of @eventflow/gateway is not built (dist/main.js is missing); reinstall it, or run `npm run build` in the repository\n');
  process.exit(1);
}
