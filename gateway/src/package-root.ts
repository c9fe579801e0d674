/**
 * The gateway package's directory (`gateway/`, or `node_modules/@eventflow/gateway/`), for the files
 * it ships beside its code (package.json, console/) and the repository's demo build: the nearest
 * directory above this module holding a package.json. Searched, not computed as `../` from here: the
 * module is one level down in src/ and dist/, two in a bundle (bundle/<build>/, see
 * scripts/bundle-gateway.mjs).
 */
import { existsSync } from 'node:fs';

function nearestPackage(from: URL): URL {
  for (let dir = new URL('./', from); ; ) {
    if (existsSync(new URL('package.json', dir))) return dir;
    const parent = new URL('../', dir);
    if (parent.href === dir.href) return new URL('../', from);
    dir = parent;
  }
}

export const packageRoot = nearestPackage(new URL(import.meta.url));
