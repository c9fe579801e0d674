#!/usr/bin/env node
// The `eventflow-gateway` bin. It is committed JavaScript rather than a file in dist/, so that npm
// links it right after `npm ci`, before anything is built: it runs dist/main.js when the package is
// built (an installed package always is), and otherwise, in a repository checkout, the TypeScript
// sources.
import { existsSync } from 'node:fs';

const built = new URL('../dist/main.js', import.meta.url);
const loader = new URL('../../scripts/source-loader.mjs', import.meta.url);
if (existsSync(built)) {
  await import(built.href);
} else if (existsSync(loader)) {
  await import(loader.href);
  await import(new URL('../src/main.ts', import.meta.url).href);
} else {
  process.stderr.write('eventflow-gateway: this copy of @eventflow/gateway is not built (dist/main.js is missing); reinstall it, or run `npm run build` in the repository\n');
  process.exit(1);
}
