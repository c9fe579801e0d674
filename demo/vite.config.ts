/**
 * The dashboard's build: React, workspace packages from their TypeScript sources (the "source"
 * export condition, so no prior tsc build is needed), output in demo/dist, which the gateway
 * serves at `/`. A small plugin emits the service worker with the list of files to precache.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defaultClientConditions, defineConfig, type Plugin } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

/**
 * Emits `sw.js`: sw/service-worker.js preceded by the build's version and its files. The version
 * is a hash of every emitted file, so each new build installs a new worker that replaces the
 * previous cache.
 */
function serviceWorker(): Plugin {
  const templatePath = fileURLToPath(new URL('./sw/service-worker.js', import.meta.url));
  return {
    name: 'eventflow-demo:service-worker',
    apply: 'build',
    enforce: 'post',
    generateBundle(_options, bundle) {
      const template = readFileSync(templatePath, 'utf8');
      const files = Object.keys(bundle)
        .filter((file) => !file.endsWith('.map'))
        .sort();
      const hash = createHash('sha256').update(template);
      for (const file of files) {
        const output = bundle[file];
        hash.update(file).update(output?.type === 'chunk' ? output.code : (output?.source ?? ''));
      }
      const precache = [...new Set(['index.html', ...files])];
      this.emitFile({
        type: 'asset',
        fileName: 'sw.js',
        source: `const VERSION = ${JSON.stringify(hash.digest('hex').slice(0, 16))};\nconst PRECACHE = ${JSON.stringify(precache)};\n\n${template}`,
      });
    },
  };
}

export default defineConfig({
  root,
  plugins: [react(), serviceWorker()],
  resolve: { conditions: ['source', ...defaultClientConditions] },
  build: { outDir: 'dist', emptyOutDir: true },
  server: { host: '127.0.0.1' },
});
