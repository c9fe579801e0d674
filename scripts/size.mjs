#!/usr/bin/env node
/**
 * Size budget of the browser client: @eventflow/browser plus @eventflow/core, bundled the way an
 * application would ship them (ES module, minified, React external, production mode), then
 * gzipped at level 9, with every bundler an application may use: vite (rolldown), esbuild and
 * webpack. Four bundles: the client; the client with the opt-in outbox (`@eventflow/browser/outbox`
 * and `useOutbox`); the client with the opt-in work features (`consuming` and `waiting` from
 * `@eventflow/browser/work`) and the client with opt-in tracing (`@eventflow/browser/tracing`, with
 * `@opentelemetry/api`), both reported for what the opt-in costs. Each bundles the packages by
 * name, through their `exports` maps, twice: with the "source" condition (src/*.ts, as this
 * repository's demo does) and as published (dist/*.js, built here first with `tsc -b`; webpack
 * only this way, having no TypeScript loader). Every bundle must fit its budget (BUDGETS) and
 * carry no zod and no Node-only code; the client must not depend on how an application bundles
 * it. Prints a table and the biggest contributors (vite), writes bench/size.json, and exits 1
 * when a bundle breaks a rule.
 *
 *   node scripts/size.mjs            measure and enforce the budget
 *   node scripts/size.mjs --json     also print the JSON report to stdout
 *
 * Per-package figures come from each module's rendered code in the vite bundle: "min" and "gzip"
 * are that package's code minified and gzipped on its own (an estimate; gzip across package
 * boundaries shares a dictionary, so the parts add up to a little more than the total).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync, constants } from 'node:zlib';
import { build, minifySync } from 'vite';

/** 15 KiB of gzip for core + browser together, in every bundler. */
export const BUDGET_GZIP_BYTES = 15_360;
/**
 * The budget of each bundle, in every bundler (undefined: reported, not enforced). The client and the
 * client with the outbox both have the 15 KiB: with the outbox they measured 14,379 / 14,919 / 14,567 B
 * (vite / esbuild / webpack) on 2026-12-02, once consuming, waiting, v4's rarer reads and the async
 * iterators became opt-in features in browsers and browser builds compose JSON states only;
 * packages/browser/README.md ("Size") lists what each step weighed. The work features are opt-in for the
 * few browser apps that consume or wait: their cost is reported.
 */
export const BUDGETS = { client: BUDGET_GZIP_BYTES, 'client + outbox': BUDGET_GZIP_BYTES, 'client + work': undefined, 'client + tracing': undefined };

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const reportPath = join(root, 'bench/size.json');
/** Entries live inside the repository so that `@eventflow/*` resolve by name, as in an application. */
const workDir = join(root, 'node_modules/.cache/eventflow-size');
const conditionSets = { source: ['source', 'browser', 'module', 'import', 'default'], dist: ['browser', 'module', 'import', 'default'] };
const external = ['react', 'react-dom', 'react/jsx-runtime', 'react/jsx-dev-runtime', 'react-dom/client'];
/** Imports and modules that mean Node-only code was bundled (or left as an import) for the browser. */
const nodeOnly = /^(node:|ws$|fs$|path$|os$|crypto$|net$|tls$|http$|https$|stream$|events$|buffer$|util$|zlib$|child_process$|worker_threads$|better-sqlite3$)/;
const nodeOnlyModule = /__vite-browser-external|[\\/]node_modules[\\/](ws|better-sqlite3|mysql2)[\\/]|[\\/]isows[\\/]_(esm|cjs)[\\/]index\.js$/;
/** zod v4 keeps its internals under `_zod` (a property name, so minifiers leave it): present means zod was bundled. */
const zodMarker = /\b_zod\b/;

const gzip = (text) => gzipSync(Buffer.from(text), { level: constants.Z_BEST_COMPRESSION }).length;

function packageOf(id) {
  const clean = id.replace(/^\0/, '').split('?')[0];
  const nm = clean.lastIndexOf(`${sep}node_modules${sep}`);
  if (nm !== -1) {
    const parts = clean.slice(nm + 14).split(sep);
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? 'unknown');
  }
  if (!isAbsolute(clean)) return clean.split('/')[0] ?? clean; // virtual modules: rolldown/runtime.js, __vite-browser-external
  const rel = relative(root, clean);
  if (rel.startsWith(`packages${sep}core${sep}`)) return 'core';
  if (rel.startsWith(`packages${sep}browser${sep}`)) return 'browser';
  if (rel.startsWith('..')) return 'entry';
  return rel.split(sep)[0] ?? 'unknown';
}

/** Writes `entryCode` as an application's entry module; returns its path and an output directory. */
function entryFile(entryCode, label) {
  mkdirSync(workDir, { recursive: true });
  const dir = mkdtempSync(join(workDir, `${label}-`));
  const entry = join(dir, 'entry.js');
  writeFileSync(entry, entryCode);
  return { dir, entry, out: join(dir, 'out') };
}

/** Bundles `entryCode` with vite and returns the ES chunk and its modules. */
async function viteBundle(entryCode, label, conditions) {
  const { dir, entry, out } = entryFile(entryCode, `vite-${label}`);
  try {
    const output = await build({
      configFile: false,
      envDir: false,
      root,
      logLevel: 'silent',
      mode: 'production',
      // What an application's bundler does for production builds (immer drops its dev messages).
      define: { 'process.env.NODE_ENV': JSON.stringify('production') },
      resolve: { conditions },
      build: {
        outDir: out,
        emptyOutDir: true,
        write: true,
        copyPublicDir: false,
        reportCompressedSize: false,
        sourcemap: false,
        minify: true,
        target: 'es2022',
        // An application's build, not library mode: vite's lib mode with the `es` format keeps
        // whitespace (to preserve pure annotations for a bundler downstream), which no application
        // ships. The entry's exports are kept ('strict'), as an application's use of them would.
        rolldownOptions: {
          input: entry,
          preserveEntrySignatures: 'strict',
          output: { format: 'es', entryFileNames: 'eventflow.js' },
          external: (id) => external.includes(id),
          onLog(level, log, handler) {
            if (level === 'warn' && log.code === 'EMPTY_BUNDLE') return;
            handler(level, log);
          },
        },
      },
    });
    const outputs = (Array.isArray(output) ? output : [output]).flatMap((o) => o.output);
    const chunks = outputs.filter((o) => o.type === 'chunk');
    if (chunks.length !== 1) throw new Error(`expected one chunk, got ${chunks.length}: ${chunks.map((c) => c.fileName).join(', ')}`);
    const chunk = chunks[0];
    const written = readFileSync(join(out, chunk.fileName), 'utf8');
    return { code: written, chunk };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The issue's command line: `esbuild --bundle --minify --format=esm --platform=browser`, React external. */
async function esbuildBundle(entryCode, label, conditions) {
  const esbuild = await import('esbuild');
  const { dir, entry } = entryFile(entryCode, `esbuild-${label}`);
  try {
    const result = await esbuild.build({
      entryPoints: [entry],
      bundle: true,
      minify: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      // esbuild adds 'browser', 'import', 'module' and 'default' by itself.
      conditions: conditions.includes('source') ? ['source'] : [],
      external,
      define: { 'process.env.NODE_ENV': JSON.stringify('production') },
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    return { code: result.outputFiles[0].text, inputs: Object.keys(result.metafile.inputs) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** webpack 5 in production mode (terser), as an ES module library, React external. */
async function webpackBundle(entryCode, label, conditions) {
  const { default: webpack } = await import('webpack');
  const { dir, entry, out } = entryFile(entryCode, `webpack-${label}`);
  try {
    const stats = await new Promise((resolvePromise, reject) => {
      webpack(
        {
          mode: 'production',
          context: root,
          entry,
          target: ['web', 'es2022'],
          devtool: false,
          experiments: { outputModule: true },
          output: { path: out, filename: 'eventflow.js', library: { type: 'module' }, module: true },
          externalsType: 'module',
          externals: Object.fromEntries(external.map((id) => [id, id])),
          resolve: { conditionNames: conditions, extensions: ['.js'] },
          performance: { hints: false },
          infrastructureLogging: { level: 'error' },
        },
        (error, result) => (error ? reject(error) : resolvePromise(result)),
      );
    });
    if (stats.hasErrors()) throw new Error(stats.toString({ all: false, errors: true }));
    const inputs = [...stats.compilation.modules].map((m) => m.resource ?? m.identifier());
    return { code: readFileSync(join(out, 'eventflow.js'), 'utf8'), inputs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function measure({ code, chunk }) {
  const groups = new Map();
  for (const [id, mod] of Object.entries(chunk.modules)) {
    if (!mod.renderedLength) continue;
    const name = packageOf(id);
    const group = groups.get(name) ?? { rendered: 0, code: [], modules: [] };
    group.rendered += mod.renderedLength;
    if (mod.code) group.code.push(mod.code);
    const clean = id.replace(/^\0/, '');
    group.modules.push({ id: isAbsolute(clean) ? relative(root, clean) : clean, rendered: mod.renderedLength });
    groups.set(name, group);
  }
  const packages = {};
  for (const [name, group] of [...groups].sort((a, b) => b[1].rendered - a[1].rendered)) {
    let min = group.code.join('\n');
    try {
      min = minifySync('part.js', min, { compress: true, mangle: { toplevel: false } }).code;
    } catch {
      // A fragment that does not parse alone (rare): fall back to its rendered code.
    }
    packages[name] = {
      rendered: group.rendered,
      min: Buffer.byteLength(min),
      gzip: gzip(min),
      modules: group.modules.sort((a, b) => b.rendered - a.rendered).slice(0, 8),
    };
  }
  const imports = [...chunk.imports, ...chunk.dynamicImports];
  // Node built-ins become vite's empty "__vite-browser-external" shim; ws has a throwing browser stub.
  const nodeOnlyModules = Object.keys(chunk.modules).filter((id) => nodeOnlyModule.test(id));
  return { code, min: Buffer.byteLength(code), gzip: gzip(code), imports, nodeOnlyModules, packages };
}

const pad = (text, width) => String(text).padStart(width);

/** Builds dist/ of core and browser (incremental: well under a second when nothing changed). */
function buildDist() {
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b', join(root, 'packages/browser')], { cwd: root, stdio: 'inherit' });
}

/** What each bundle must not break: the budget, no zod, no Node-only code. */
function problems({ bundle, code, gzip: size, nodeOnly: nodeCode }) {
  const found = [];
  const budget = BUDGETS[bundle];
  if (size > budget) found.push(`over its budget (${budget} B) by ${size - budget} B (${size} B gzip)`);
  if (zodMarker.test(code)) found.push('contains zod (its "_zod" internals)');
  if (nodeCode.length > 0) found.push(`contains Node-only code: ${nodeCode.join(', ')}`);
  return found;
}

async function main() {
  const started = performance.now();
  buildDist();
  // What an application ships: the browser client, the React hooks and the error class it
  // branches on, imported by package name. Everything else either package exports (the error
  // catalogue's prose, test transports) is tree-shaken away, as in the application's own build.
  const clientEntry = [
    `export { createBrowserClient, EventflowError, isEventflowError } from '@eventflow/browser';`,
    `export { EventflowProvider, useEventflowClient, useEventlogState, useSubscription, useConnectionState } from '@eventflow/browser/react';`,
  ].join('\n');

  // The same with the durable outbox (an opt-in subpath) and its hook, and with the work features
  // (consume, wait, request: opt-in subpath), as an application passes them to createBrowserClient.
  const entries = {
    client: clientEntry,
    'client + outbox': `${clientEntry}\nexport { createOutbox } from '@eventflow/browser/outbox';\nexport { useOutbox } from '@eventflow/browser/react';`,
    'client + work': `${clientEntry}\nexport { consuming, waiting } from '@eventflow/browser/work';`,
    // Tracing (opt-in, `@eventflow/browser/tracing`): with @opentelemetry/api, which an application
    // that registers an SDK ships anyway; reported for what it costs on top of the client.
    'client + tracing': `${clientEntry}\nexport { tracing } from '@eventflow/browser/tracing';`,
  };

  const client = measure(await viteBundle(clientEntry, 'client', conditionSets.source));
  const coreAlone = measure(await viteBundle(`export * from '@eventflow/core';\n`, 'core', conditionSets.source));
  const results = [{ bundle: 'client', bundler: 'vite', via: 'source', code: client.code, min: client.min, gzip: client.gzip, nodeOnly: [...client.imports.filter((id) => nodeOnly.test(id)), ...client.nodeOnlyModules] }];
  const others = [
    ['vite', 'dist', async (entryCode, label, conditions) => {
      const bundled = measure(await viteBundle(entryCode, label, conditions));
      return { code: bundled.code, nodeOnly: [...bundled.imports.filter((id) => nodeOnly.test(id)), ...bundled.nodeOnlyModules] };
    }],
    ['esbuild', 'source', esbuildBundle],
    ['esbuild', 'dist', esbuildBundle],
    ['webpack', 'dist', webpackBundle],
  ];
  const jobs = Object.entries(entries).flatMap(([bundle, entryCode]) => [
    ...(bundle === 'client' ? [] : [['vite', 'source', others[0][2]]]),
    ...others,
  ].map(([bundler, via, run]) => [bundle, entryCode, bundler, via, run]));
  for (const [bundle, entryCode, bundler, via, run] of jobs) {
    const bundled = await run(entryCode, `${bundle.replace(/\W+/g, '-')}-${via}`, conditionSets[via]);
    const nodeCode = bundled.nodeOnly ?? bundled.inputs.filter((id) => nodeOnlyModule.test(id));
    results.push({ bundle, bundler, via, code: bundled.code, min: Buffer.byteLength(bundled.code), gzip: gzip(bundled.code), nodeOnly: nodeCode });
  }
  for (const result of results) result.problems = problems(result);

  const bytes = (n) => `${n.toLocaleString('en-US')} B`;
  const rows = [
    ['bundle (core + browser + hooks)', 'resolved via', 'min', 'gzip', ''],
    ...results.map((r) => [`${r.bundle}: ${r.bundler}`, r.via === 'source' ? '"source" (src/*.ts)' : 'exports (dist/*.js)', bytes(r.min), bytes(r.gzip), r.problems.length ? r.problems.join('; ') : BUDGETS[r.bundle] === undefined ? 'reported (no budget)' : `ok, ${bytes(BUDGETS[r.bundle] - r.gzip)} of ${bytes(BUDGETS[r.bundle])} left`]),
    ['core, every export (vite, for reference)', '"source" (src/*.ts)', bytes(coreAlone.min), bytes(coreAlone.gzip), ''],
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  console.log(`\nbudgets, gzip (-9) in every bundler: ${Object.entries(BUDGETS).map(([bundle, budget]) => `${bundle} ${budget === undefined ? 'reported' : bytes(budget)}`).join(', ')}; no zod, no Node-only code\n`);
  for (const [i, row] of rows.entries()) {
    console.log(row.map((cell, c) => (c === 2 || c === 3 ? pad(cell, widths[c]) : cell.padEnd(widths[c]))).join('   ').trimEnd());
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('   '));
  }

  console.log('\ntop contributors (vite, per package, each minified + gzipped alone; estimates):');
  const totalRendered = Object.values(client.packages).reduce((sum, p) => sum + p.rendered, 0);
  for (const [name, p] of Object.entries(client.packages)) {
    const share = ((p.rendered / totalRendered) * 100).toFixed(1);
    console.log(`  ${name.padEnd(12)} ${pad(bytes(p.min), 10)} min ${pad(bytes(p.gzip), 9)} gzip  ${pad(share, 5)}% of the code`);
    for (const m of p.modules.slice(0, 4)) console.log(`      ${pad(m.rendered, 7)} B rendered  ${m.id}`);
  }

  const failing = results.filter((r) => r.problems.length > 0);
  const report = {
    budgetGzipBytes: BUDGET_GZIP_BYTES,
    budgets: BUDGETS,
    measured: 'createBrowserClient + React hooks + EventflowError (core + browser, React external)',
    client: { min: client.min, gzip: client.gzip, overBudget: client.gzip > BUDGET_GZIP_BYTES },
    bundlers: results.map(({ bundle, bundler, via, min, gzip: size, problems: found }) => ({ bundle, bundler, via, min, gzip: size, problems: found })),
    coreAlone: { min: coreAlone.min, gzip: coreAlone.gzip },
    packages: Object.fromEntries(Object.entries(client.packages).map(([name, p]) => [name, { rendered: p.rendered, min: p.min, gzip: p.gzip }])),
  };
  writeFileSync(reportPath, `${JSON.stringify(report, null, 2)}\n`);
  if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
  console.log(`\nwrote ${relative(root, reportPath)} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  rmSync(workDir, { recursive: true, force: true });

  if (failing.length > 0) {
    for (const r of failing) console.error(`\nsize: ${r.bundle}, ${r.bundler} (${r.via}): ${r.problems.join('; ')}`);
    console.error(
      `\nThe browser client must fit ${BUDGET_GZIP_BYTES} B gzip (with the outbox ${BUDGETS['client + outbox']} B), without zod or Node-only code, in every bundler. ` +
        'zod comes along when a client module imports @eventflow/core/protocol (import only its types, with `import type`). ' +
        'See the top contributors above; raise BUDGETS in scripts/size.mjs only with a reason.',
    );
    process.exit(1);
  }
}

main().catch((error) => {
  console.error('size: measuring failed:', error);
  process.exit(1);
});
