/**
 * The gateway on its embedded store starts without the optional wings: the static import graph of
 * the bin's entry (main.ts, and server/gateway.ts behind its dynamic import) reaches neither the v4
 * wing (v4/: hub, mesh router, certificate stack with @peculiar/x509 and reflect-metadata) nor the
 * MySQL store (store/mysql/, mysql2), nor jose (only EVENTFLOW_AUTH=jwt needs it), nor the NATS router
 * (router/nats/, nats.js: only EVENTFLOW_ROUTER=nats), nor OpenTelemetry (its SDK only when OTEL_*
 * variables ask for it, its API once an SDK is registered). They are imported dynamically, when configured.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './support.js';

const src = join(repoRoot, 'gateway/src');

/** Value imports (not `import type`, not `import(…)`) of a module: relative files and package names. */
function staticImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(/^import\s+(?!type\s)(?:[^'"]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) found.push(match[1]!);
  return found;
}

function graph(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (files.has(file)) return;
    files.add(file);
    for (const specifier of staticImports(file)) {
      if (specifier.startsWith('.')) visit(join(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else packages.add(specifier);
    }
  };
  visit(entry);
  return { files, packages };
}

describe('optional wings load lazily', () => {
  it.each(['main.ts', 'server/gateway.ts'])('%s does not statically reach the hub mesh, the certificates, mysql2, jose, nats.js or OpenTelemetry', (entry) => {
    const { files, packages } = graph(join(src, entry));
    const reached = [...files].map((file) => relative(src, file));
    expect(reached.filter((file) => file.startsWith('v4/') || file.startsWith('store/mysql/') || file.startsWith('router/nats/'))).toEqual([]);
    expect([...packages].filter((name) => /^(@peculiar\/|reflect-metadata|mysql2|tsyringe|jose|@nats-io\/|@opentelemetry\/)/.test(name))).toEqual([]);
    // The OpenTelemetry SDK only when OTEL_* variables ask for it (main.ts), the API only once an SDK is registered (tracing.ts).
    expect(reached.filter((file) => file === 'tracing-sdk.ts')).toEqual([]);
  });

  it('main.ts loads only the argument parsing, the signal handling and the package root before it knows what to run', () => {
    expect(graph(join(src, 'main.ts')).files.size).toBeLessThanOrEqual(5);
  });
});
