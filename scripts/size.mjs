#!/usr/bin/env node
/**
 * Size budget of the browser client: @eventflow/browser plus @eventflow/core, bundled the way an
 * application would ship them (vite library build, ES module, minified, React external, production
 * mode), then gzipped at level 9. Prints a table and the biggest contributors, writes
 * bench/size.json, and exits 1 when the gzip size is over the budget.
 *
 *   node scripts/size.mjs            measure and enforce the budget
 *   node scripts/size.mjs --json     also print the JSON report to stdout
 *
 * Per-package figures come from each module's rendered code in the bundle: "min" and "gzip" are
 * that package's code minified and gzipped on its own (an estimate; gzip across package
 * boundaries shares a dictionary, so the parts add up to a little more than the total).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync, constants } from 'node:zlib';
import { build, minifySync } from 'vite';

/** 15 KiB of gzip for core + browser together. */
export const BUDGET_GZIP_BYTES = 15_360;

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const coreEntry = join(root, 'packages/core/src/index.ts');
const browserEntry = join(root, 'packages/browser/src/index.ts');
const reactEntry = ['react.ts', 'react.tsx'].map((file) => join(root, 'packages/browser/src', file)).find((file) => existsSync(file)) ?? join(root, 'packages/browser/src/react.ts');
const reportPath = join(root, 'bench/size.json');
const conditions = ['source', 'browser', 'module', 'import', 'default'];
const external = ['react', 'react-dom', 'react/jsx-runtime', 'react/jsx-dev-runtime', 'react-dom/client'];
/** Imports and modules that mean Node-only code was bundled (or left as an import) for the browser. */
const nodeOnly = /^(node:|ws$|fs$|path$|os$|crypto$|net$|tls$|http$|https$|stream$|events$|buffer$|util$|zlib$|child_process$|worker_threads$|better-sqlite3$)/;
const nodeOnlyModule = /__vite-browser-external|[\\/]node_modules[\\/](ws|better-sqlite3|mysql2)[\\/]|[\\/]isows[\\/]_(esm|cjs)[\\/]index\.js$/;

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

/** Bundles `entryCode` (written to a temp dir) and returns the ES chunk and its modules. */
async function bundle(entryCode, label) {
  const dir = mkdtempSync(join(tmpdir(), `eventflow-size-${label}-`));
  try {
    const entry = join(dir, 'entry.js');
    writeFileSync(entry, entryCode);
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
        outDir: join(dir, 'out'),
        emptyOutDir: true,
        write: true,
        copyPublicDir: false,
        reportCompressedSize: false,
        sourcemap: false,
        minify: true,
        target: 'es2022',
        lib: { entry, formats: ['es'], fileName: 'eventflow' },
        rolldownOptions: {
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
    const written = readFileSync(join(dir, 'out', chunk.fileName), 'utf8');
    return { code: written, chunk };
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
  return { min: Buffer.byteLength(code), gzip: gzip(code), imports, nodeOnlyModules, packages };
}

const pad = (text, width) => String(text).padStart(width);

async function main() {
  const started = performance.now();
  const hasBrowser = existsSync(browserEntry) && existsSync(reactEntry);
  // What an application ships: the browser client, the React hooks and the error class it
  // branches on. Everything else either package exports (zod schemas for servers, the error
  // catalogue's prose, test transports) is tree-shaken away, as in the application's own build.
  const clientEntry = hasBrowser
    ? [
        `export { createBrowserClient, EventflowError, isEventflowError } from ${JSON.stringify(browserEntry)};`,
        `export { EventflowProvider, useEventflowClient, useEventlogState, useSubscription, useConnectionState } from ${JSON.stringify(reactEntry)};`,
      ].join('\n')
    : `export { createClient, EventflowError, isEventflowError } from ${JSON.stringify(coreEntry)};\n`;
  const client = measure(await bundle(clientEntry, 'client'));
  const coreAlone = measure(await bundle(`export * from ${JSON.stringify(coreEntry)};\n`, 'core'));

  const over = client.gzip > BUDGET_GZIP_BYTES;
  const nodeImports = client.imports.filter((id) => nodeOnly.test(id));

  const bytes = (n) => `${n.toLocaleString('en-US')} B`;
  const rows = [
    ['bundle (minified, gzip -9)', 'min', 'gzip', 'budget (gzip)', ''],
    [hasBrowser ? 'browser client (core + browser + hooks)' : 'core client (browser package not there yet)', bytes(client.min), bytes(client.gzip), bytes(BUDGET_GZIP_BYTES), over ? `OVER by ${bytes(client.gzip - BUDGET_GZIP_BYTES)}` : `ok, ${bytes(BUDGET_GZIP_BYTES - client.gzip)} left`],
    ['core, every export (for reference)', bytes(coreAlone.min), bytes(coreAlone.gzip), '', ''],
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  console.log('');
  for (const [i, row] of rows.entries()) {
    console.log(row.map((cell, c) => (c === 0 || c === 4 ? cell.padEnd(widths[c]) : pad(cell, widths[c]))).join('   ').trimEnd());
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('   '));
  }

  console.log('\ntop contributors (per package, each minified + gzipped alone; estimates):');
  const totalRendered = Object.values(client.packages).reduce((sum, p) => sum + p.rendered, 0);
  for (const [name, p] of Object.entries(client.packages)) {
    const share = ((p.rendered / totalRendered) * 100).toFixed(1);
    console.log(`  ${name.padEnd(12)} ${pad(bytes(p.min), 10)} min ${pad(bytes(p.gzip), 9)} gzip  ${pad(share, 5)}% of the code`);
    for (const m of p.modules.slice(0, 4)) console.log(`      ${pad(m.rendered, 7)} B rendered  ${m.id}`);
  }

  const report = {
    budgetGzipBytes: BUDGET_GZIP_BYTES,
    measured: hasBrowser ? 'createBrowserClient + React hooks + EventflowError (core + browser, React external)' : 'createClient (core only)',
    client: { min: client.min, gzip: client.gzip, overBudget: over },
    coreAlone: { min: coreAlone.min, gzip: coreAlone.gzip },
    packages: Object.fromEntries(Object.entries(client.packages).map(([name, p]) => [name, { rendered: p.rendered, min: p.min, gzip: p.gzip }])),
  };
  writeFileSync(reportPath, `${JSON.stringify(report, null, 2)}\n`);
  if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
  console.log(`\nwrote ${relative(root, reportPath)} in ${((performance.now() - started) / 1000).toFixed(1)} s`);

  let failed = false;
  if (nodeImports.length > 0 || client.nodeOnlyModules.length > 0) {
    console.error(`\nsize: Node-only code in the browser bundle: ${[...nodeImports, ...client.nodeOnlyModules].join(', ')}`);
    failed = true;
  }
  if (over) {
    console.error(
      `\nsize: over budget: the browser client is ${client.gzip} B gzip, ${client.gzip - BUDGET_GZIP_BYTES} B more than the ${BUDGET_GZIP_BYTES} B budget. ` +
        'See the top contributors above; raise BUDGET_GZIP_BYTES in scripts/size.mjs only with a reason.',
    );
    failed = true;
  }
  if (failed) process.exit(1);
}

main().catch((error) => {
  console.error('size: measuring failed:', error);
  process.exit(1);
});
