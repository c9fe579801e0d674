#!/usr/bin/env node
/**
 * Bundles the built gateway (gateway/dist, from `tsc -b`) for start-up: one CommonJS script,
 * gateway/bundle/<build>/main.cjs, run by gateway/bundle/main.cjs through gateway/bin/run-bundle.js,
 * which keeps V8's code cache beside it. Start-up then reads one file instead of ~700 modules (zod,
 * pino, ws, prom-client, our own), and from the second start on compiles next to none of it:
 * bench/start.mjs measures both. The bin (gateway/bin/eventflow-gateway.js) runs the bundle when it
 * is at least as new as the last build of dist/.
 *
 * Each build goes to a directory of its own (bundle/<build>/); main.cjs, which runs the current
 * one, is replaced atomically (written aside, then renamed), so a gateway starting while another
 * process rebuilds (tests, `npm start` beside `npm run build`) sees either build whole, and the build
 * before is kept for a process that has read main.cjs and not yet its build. `--prune` keeps only
 * the new one, without a code cache (packing the package).
 *
 * External (resolved from node_modules at run time): better-sqlite3's native addon, and what is only
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
  return existsSync(join(bundleRoot, 'main.cjs')) && mtime(join(bundleRoot, 'main.cjs')) >= lastBuild;
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
 * Modules that bundled packages require when they are loaded but use only in code a gateway may
 * never run. Each such require gets a stand-in that requires the module on first use (a property
 * read, a call, `new`), so that it behaves as the module itself and costs nothing until then:
 * - prom-client's process CPU metric requires `@opentelemetry/api`, for exemplars the gateway does
 *   not enable: ~90 files read and compiled (~25 ms).
 * - ws requires `https` and `tls` for WebSocket clients (the gateway is a server) and `zlib` for
 *   permessage-deflate (off: gateway.ts), prom-client its Pushgateway (https, zlib), pino's
 *   sonic-boom and thread-stream `assert` for a few checks: ~10 ms of Node's own modules.
 */
const LAZY = [
  { importer: /[\\/]node_modules[\\/]prom-client[\\/]/, path: /^@opentelemetry\/api$/ },
  { importer: /[\\/]node_modules[\\/]ws[\\/]/, path: /^(https|tls|zlib)$/ },
  { importer: /[\\/]node_modules[\\/]prom-client[\\/]index\.js$/, path: /^\.\/lib\/pushgateway$/ },
  { importer: /[\\/]node_modules[\\/](sonic-boom|thread-stream)[\\/]/, path: /^assert$/ },
];
const lazyRequires = {
  name: 'lazy-requires',
  setup(build) {
    build.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind !== 'require-call' || args.pluginData?.real) return undefined;
      if (!LAZY.some(({ importer, path }) => importer.test(args.importer) && path.test(args.path))) return undefined;
      return { path: args.path, namespace: 'lazy', pluginData: { resolveDir: args.resolveDir } };
    });
    build.onLoad({ filter: /.*/, namespace: 'lazy' }, (args) => ({
      loader: 'js',
      resolveDir: args.pluginData.resolveDir,
      pluginData: { real: true },
      // A function as the target, so that calls (assert) and `new` (Pushgateway) pass through too.
      contents: `let real;
const load = () => (real ??= require(${JSON.stringify(args.path)}));
module.exports = new Proxy(function () {}, {
  get: (_, key) => load()[key],
  has: (_, key) => key in load(),
  apply: (_, self, args) => Reflect.apply(load(), self, args),
  construct: (_, args) => Reflect.construct(load(), args),
});`,
    }));
  },
};

/**
 * The packages the gateway imports dynamically (jose for EVENTFLOW_AUTH=jwt, @opentelemetry/api once
 * an SDK is registered) are required instead, in the same place and turn: an import() in a script
 * compiled with a code cache fails in Node 20 once its function is compiled lazily (a start after a
 * `--version` wrote the cache refused every JWT). jose is an ES module: require() loads it since
 * Node 20.19, the gateway's engines. Dynamic imports of our own modules stay in the bundle as lazy
 * module initialisers, with no import() either; the build fails if one is left.
 */
const requireDynamicImports = {
  name: 'require-dynamic-imports',
  setup(build) {
    build.onResolve({ filter: /.*/ }, (args) => (args.kind === 'dynamic-import' && !args.path.startsWith('.') ? { path: args.path, namespace: 'required' } : undefined));
    build.onLoad({ filter: /.*/, namespace: 'required' }, (args) => ({ loader: 'js', contents: `module.exports = require(${JSON.stringify(args.path)});` }));
  },
};

/**
 * better-sqlite3's JavaScript is bundled (~15 files the CommonJS loader read and compiled at each
 * start, ~9 ms; now in the code cache), its native addon is not: `bindings` finds it from the
 * installed package's directory, which it would otherwise guess from the caller's file (the bundle).
 */
const sqliteAddonFromPackage = {
  name: 'sqlite-addon-from-package',
  setup(build) {
    build.onResolve({ filter: /^bindings$/ }, (args) => (/[\\/]node_modules[\\/]better-sqlite3[\\/]/.test(args.importer) ? { path: 'bindings', namespace: 'sqlite-addon' } : undefined));
    build.onLoad({ filter: /.*/, namespace: 'sqlite-addon' }, () => ({
      loader: 'js',
      // build/Release first, where better-sqlite3's install puts it (prebuilt or compiled): bindings
      // tries two other places before it, each a failed require().
      contents: `const { dirname, join } = require('node:path');
const { createRequire } = require('node:module');
const root = dirname(require.resolve('better-sqlite3/package.json'));
module.exports = (name) => {
  try {
    return require(join(root, 'build', 'Release', name));
  } catch (error) {
    if (error?.code !== 'MODULE_NOT_FOUND') throw error;
  }
  return createRequire(root + '/')('bindings')({ bindings: name, module_root: root });
};`,
    }));
  },
};

const id = `${Date.now().toString(36)}-${process.pid}`;
mkdirSync(bundleRoot, { recursive: true });
const { metafile } = await build({
  entryPoints: [entry],
  outfile: join(bundleRoot, id, 'main.cjs'),
  bundle: true,
  // One CommonJS script, not ES modules: Node 20 caches compiled code for scripts only (vm.Script's
  // cachedData; gateway/bin/run-bundle.js). The lazy wings are in it, evaluated only when
  // configured; compiled only then too once the cache holds the start.
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  external: ['better-sqlite3/package.json', 'mysql2', 'mysql2/*', '@nats-io/*', 'jose', '@peculiar/*', 'reflect-metadata', 'bufferutil', 'utf-8-validate', '@opentelemetry/*'],
  // Strict, as the ES modules it is made of; import.meta.url is the bundle's (package-root.ts).
  banner: { js: `"use strict";\nconst __eventflowImportMetaUrl = require('node:url').pathToFileURL(__filename).href;` },
  define: { 'import.meta.url': '__eventflowImportMetaUrl' },
  plugins: [lazyRequires, requireDynamicImports, sqliteAddonFromPackage],
  metafile: true,
  // Whitespace and syntax only (names stay, for stack traces): a third less source to read and
  // compile at a start without the cache.
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'eof',
  logLevel: 'warning',
});
const dynamicImports = Object.values(metafile.outputs).flatMap((output) => output.imports.filter((imported) => imported.kind === 'dynamic-import'));
if (dynamicImports.length > 0) throw new Error(`bundle-gateway: import() left in the bundle (${dynamicImports.map((imported) => imported.path).join(', ')}): see requireDynamicImports`);
// dist/main.js's #! line would end up inside the function run-bundle.js wraps the script in.
const script = join(bundleRoot, id, 'main.cjs');
writeFileSync(script, readFileSync(script, 'utf8').replace(/^#!.*\n/, ''));
// main.cjs runs the current build (what the bin requires); main.mjs the same for `node gateway/bundle/main.mjs`.
const pointers = {
  'main.cjs': `// Made by scripts/bundle-gateway.mjs: runs the current build of the gateway.\nrequire('../bin/run-bundle.js').runBundle(require('node:path').join(__dirname, '${id}', 'main.cjs'));\n`,
  'main.mjs': `// Made by scripts/bundle-gateway.mjs: runs the current build of the gateway (main.cjs).\nimport './main.cjs';\n`,
};
for (const [name, text] of Object.entries(pointers)) {
  const aside = join(bundleRoot, `.${name}-${id}`);
  writeFileSync(aside, text);
  renameSync(aside, join(bundleRoot, name));
}
pruneBuilds(id);

/** The build main.cjs runs. */
function readCurrent() {
  return /join\(__dirname, '([^']+)', 'main\.cjs'\)/.exec(readFileSync(join(bundleRoot, 'main.cjs'), 'utf8'))?.[1];
}

/** Removes the builds older than `current`, keeping the one before it unless --prune. */
function pruneBuilds(current) {
  const older = readdirSync(bundleRoot, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== current)
    .map((entry) => ({ name: entry.name, at: mtime(join(bundleRoot, entry.name)) }))
    .sort((a, b) => b.at - a.at);
  for (const { name } of older.slice(prune ? 0 : 1)) rmSync(join(bundleRoot, name), { recursive: true, force: true });
  // A package carries no code cache of the machine that packed it (run-bundle.js writes its own).
  if (prune && current !== undefined) rmSync(join(bundleRoot, current, 'main.cjs.cache'), { force: true });
}
