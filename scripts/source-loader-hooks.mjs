/**
 * Module hooks (node:module register) for scripts/source-loader.mjs: workspace packages resolve
 * to their sources (the "source" export condition, as in vite.config.ts and tsconfig.json), a
 * relative `./x.js` written for the compiled output finds `./x.ts`, and .ts files are transpiled
 * one by one with vite's transformWithOxc (a root devDependency; native, so a cold start costs
 * a fraction of loading the TypeScript compiler). Types are not checked here: `npm run typecheck`
 * does that.
 */
import { readFile } from 'node:fs/promises';
import { Buffer } from 'node:buffer';
import { fileURLToPath } from 'node:url';

/** @type {typeof import('vite').transformWithOxc | undefined} */
let transform;

/** @type {import('node:module').ResolveHook} */
export async function resolve(specifier, context, nextResolve) {
  const withSource = { ...context, conditions: context.conditions.includes('source') ? context.conditions : ['source', ...context.conditions] };
  try {
    return await nextResolve(specifier, withSource);
  } catch (error) {
    const fromSource = context.parentURL?.endsWith('.ts') && /^\.\.?\//.test(specifier) && specifier.endsWith('.js');
    if (fromSource && /** @type {NodeJS.ErrnoException} */ (error).code === 'ERR_MODULE_NOT_FOUND') {
      return nextResolve(`${specifier.slice(0, -3)}.ts`, withSource);
    }
    throw error;
  }
}

/** @type {import('node:module').LoadHook} */
export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context);
  transform ??= (await import('vite')).transformWithOxc;
  const source = await readFile(new URL(url), 'utf8');
  const { code, map } = await transform(source, fileURLToPath(url), { lang: 'ts', target: 'es2022', sourcemap: true });
  // Inline, so that stack traces point into the .ts file (with --enable-source-maps).
  const outputText = `${code}\n//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
  return { format: 'module', source: outputText, shortCircuit: true };
}
