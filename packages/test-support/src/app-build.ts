/**
 * A production build of one of the repository's apps (the demo, the console) into `outDir`, fresh
 * for every run, so that an end-to-end test never depends on a stale build in the tree.
 */
import { join } from 'node:path';
import { build } from 'vite';

export async function buildApp(appDir: string, outDir: string): Promise<void> {
  // Vitest sets NODE_ENV=test, which would give a development JSX transform; a build is production.
  const nodeEnv = process.env['NODE_ENV'];
  process.env['NODE_ENV'] = 'production';
  try {
    await build({ configFile: join(appDir, 'vite.config.ts'), root: appDir, mode: 'production', logLevel: 'warn', build: { outDir, emptyOutDir: true } });
  } finally {
    process.env['NODE_ENV'] = nodeEnv;
  }
}
