#!/usr/bin/env node
/**
 * Bundles the built gateway (gateway/dist, from `tsc -b`) for start-up: gateway/bundle/main.mjs and
 * the chunks of what it imports lazily (the MySQL store, the hub mesh, the NATS router, the hub CLI).
 * Start-up then reads and compiles a handful of files instead of ~700 modules (zod, pino, ws,
 * prom-client, our own): bench/start.mjs measures both. The bin (gateway/bin/eventflow-gateway.js)
 * runs the bundle when it is at least as new as the last build of dist/.
 *
 * Each build goes to a directory of its own (bundle/<build>/); main.mjs, which imports the current
 * one, is replaced atomically (written aside, then renamed), so a gateway starting while another
 * process rebuilds (tests, `npm start` beside `npm run build`) sees either build whole, and the build
 * before is kept for a process still loading its lazy chunks. `--prune` keeps only the new one
 * (packing the package).
 *
 * External (resolved from node_modules at run time): better-sqlite3 (native), and what is only
 * loaded for one configuration (mysql2, NATS, jose for EVENTFLOW_AUTH=jwt, @peculiar/x509 for
 * certificates, OpenTelemetry for tracing), so that the bundle does not grow by what a SQLite gateway never runs; ws's optional
 * native helpers.
 *
 *   node scripts/bundle-gateway.mjs [--prune] [--if-stale]
 *     (`npm run build` and `npm start` run it; the gateway package's prepack runs it with --prune --if-stale)
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const bundleRoot = join(root, 'gateway/bundle');
const entry = join(root, 'gateway/dist/main.js');
const mtime = (path) => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? 0;
const prune = process.argv.includes('--prune');

/** The bin's rule: the bundle is current when no build of dist/ (the gateway's or core's) is newer. */
function bundleIsCurrent() {
  const lastBuild = Math.max(mtime(join(root, 'gateway/tsconfig.tsbuildinfo')), mtime(join(root, 'packages/core/tsconfig.tsbuildinfo')));
  return existsSync(join(bundleRoot, 'main.mjs')) && mtime(join(bundleRoot, 'main.mjs')) >= lastBuild;
}

if (!existsSync(entry)) {
  process.stderr.write('bundle-gateway: gateway/dist/main.js is missing (run `npm run build`); no bundle made\n');
  process.exit(process.argv.includes('--if-stale') ? 0 : 1);
}
if (process.argv.includes('--if-stale') && bundleIsCurrent()) {
  if (prune) pruneBuilds(readCurrent());
  process.exit(0);
}

/**
 * prom-client's process CPU metric requires `@opentelemetry/api` when it is loaded, for exemplars
 * the gateway does not enable: ~90 files read and compiled before listening (~25 ms of a start).
 * In the bundle that require gets a stand-in that loads the API on first use, so the metric works
 * as before, exemplars included, and a gateway without them never loads it.
 */
const lazyOpenTelemetryForPromClient = {
  name: 'lazy-opentelemetry-for-prom-client',
  setup(build) {
    build.onResolve({ filter: /^@opentelemetry\/api$/ }, (args) =>
      /[\\/]node_modules[\\/]prom-client[\\/]/.test(args.importer) ? { path: 'prom-client-opentelemetry-api', namespace: 'lazy' } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'lazy' }, () => ({
      loader: 'js',
      contents: `let api;
const load = () => (api ??= require('@opentelemetry/api'));
module.exports = new Proxy({}, { get: (_, key) => load()[key], has: (_, key) => key in load() });`,
    }));
  },
};

const id = `${Date.now().toString(36)}-${process.pid}`;
mkdirSync(bundleRoot, { recursive: true });
await build({
  entryPoints: [entry],
  outdir: join(bundleRoot, id),
  bundle: true,
  // Lazy imports stay lazy: each becomes a chunk loaded when the configuration needs it.
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outExtension: { '.js': '.mjs' },
  external: ['better-sqlite3', 'mysql2', 'mysql2/*', '@nats-io/*', 'jose', '@peculiar/*', 'reflect-metadata', 'bufferutil', 'utf-8-validate', '@opentelemetry/*'],
  // CommonJS dependencies bundled into ES modules still call require() for Node built-ins.
  banner: { js: "import { createRequire as __eventflowRequire } from 'node:module'; const require = __eventflowRequire(import.meta.url);" },
  plugins: [lazyOpenTelemetryForPromClient],
  // Whitespace and syntax only (names stay, for stack traces): a third less source to read and
  // compile at each start (bench/README.md › start).
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'eof',
  logLevel: 'warning',
});
const aside = join(bundleRoot, `.main-${id}.mjs`);
writeFileSync(aside, `// Made by scripts/bundle-gateway.mjs: the current build of the gateway.\nawait import('./${id}/main.mjs');\n`);
renameSync(aside, join(bundleRoot, 'main.mjs'));
pruneBuilds(id);

/** The build main.mjs imports. */
function readCurrent() {
  return /import\('\.\/([^/]+)\/main\.mjs'\)/.exec(readFileSync(join(bundleRoot, 'main.mjs'), 'utf8'))?.[1];
}

/** Removes the builds older than `current`, keeping the one before it unless --prune. */
function pruneBuilds(current) {
  const older = readdirSync(bundleRoot, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== current)
    .map((entry) => ({ name: entry.name, at: mtime(join(bundleRoot, entry.name)) }))
    .sort((a, b) => b.at - a.at);
  for (const { name } of older.slice(prune ? 0 : 1)) rmSync(join(bundleRoot, name), { recursive: true, force: true });
}
