/**
 * The console's build: React, the workspace packages from their TypeScript sources (the "source"
 * condition), relative asset URLs (`base: './'`) so that the same build works at `/` and at
 * `/console/`. Output in packages/console/dist; scripts/copy-console.mjs puts it into the gateway
 * package (gateway/console), which serves it.
 */
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defaultClientConditions, defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  plugins: [react()],
  resolve: { conditions: ['source', ...defaultClientConditions] },
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 600 },
  server: { host: '127.0.0.1' },
});
