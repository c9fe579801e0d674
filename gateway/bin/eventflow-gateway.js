#!/usr/bin/env node
// The `eventflow-gateway` bin. It is committed JavaScript rather than a file in dist/, so that npm
// links it right after `npm ci`, before anything is built. It runs, in order of preference:
// bundle/main.mjs (scripts/bundle-gateway.mjs: one bundle starts in about half the time of dist/'s
// ~700 modules), dist/main.js when the bundle is missing or older than the last `tsc -b` of the
// gateway or of @eventflow/core (in a repository checkout `tsc -b` alone does not rebuild it; an
// installed package carries both and no build info), and otherwise, in a repository checkout, the
// TypeScript sources.
import { existsSync, statSync } from 'node:fs';

const mtime = (url) => statSync(url, { throwIfNoEntry: false })?.mtimeMs ?? 0;
const bundled = new URL('../bundle/main.mjs', import.meta.url);
const built = new URL('../dist/main.js', import.meta.url);
const loader = new URL('../../scripts/source-loader.mjs', import.meta.url);
const lastBuild = Math.max(mtime(new URL('../tsconfig.tsbuildinfo', import.meta.url)), mtime(new URL('../../packages/core/tsconfig.tsbuildinfo', import.meta.url)));
if (existsSync(bundled) && mtime(bundled) >= lastBuild) {
  await import(bundled.href);
} else if (existsSync(built)) {
  await import(built.href);
} else if (existsSync(loader)) {
  await import(loader.href);
  await import(new URL('../src/main.ts', import.meta.url).href);
} else {
  process.stderr.write('eventflow-gateway: this copy of @eventflow/gateway is not built (dist/main.js is missing); reinstall it, or run `npm run build` in the repository\n');
  process.exit(1);
}
