#!/usr/bin/env node
/**
 * `npm run pack`: the four packages as tarballs, to install from files while they are not on the
 * registry. Builds what they carry (scripts/build-if-stale.mjs --packages: dist/, the gateway's
 * bundle and console), packs @eventflow/core, node, browser and gateway into one folder, and prints
 * the `npm install` lines. Each line names core's tarball too: the others depend on @eventflow/core,
 * and npm would otherwise ask the registry for it, where no package of ours is published yet.
 *
 *   node scripts/pack.mjs [--out <folder>]   (default: ./packed)
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({ options: { out: { type: 'string' } } });
const out = values.out === undefined ? join(root, 'packed') : isAbsolute(values.out) ? values.out : resolve(process.cwd(), values.out);
const workspaces = ['packages/core', 'packages/node', 'packages/browser', 'gateway'];

execFileSync(process.execPath, [join(root, 'scripts/build-if-stale.mjs'), '--packages'], { cwd: root, stdio: 'inherit' });
mkdirSync(out, { recursive: true });
process.stdout.write(`pack: packing ${workspaces.join(', ')} into ${out} …\n`);
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const json = execFileSync(npm, ['pack', '--json', '--pack-destination', out, ...workspaces.flatMap((workspace) => ['-w', workspace])], {
  cwd: root,
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
});
const packs = JSON.parse(json);
const file = (name) => join(out, packs.find((pack) => pack.name === name).filename);
// Absolute: the install runs in another project's folder.
const shown = (path) => path;
const core = shown(file('@eventflow/core'));
process.stdout.write(
  [
    '',
    ...packs.map((pack) => `  ${shown(join(out, pack.filename))}  ${pack.name}@${pack.version}, ${(pack.size / 1024).toFixed(0)} kB`),
    '',
    'Install them in your project (npm records the paths in its package.json):',
    `  npm install ${core} ${shown(file('@eventflow/node'))}       # Node client and the eventflow CLI`,
    `  npm install ${core} ${shown(file('@eventflow/browser'))}    # browser client, React hooks`,
    `  npm install ${core} ${shown(file('@eventflow/gateway'))}    # the gateway (eventflow-gateway)`,
    'then run the bins from the project: npx --no-install eventflow --help, npx --no-install eventflow-gateway',
    '',
  ].join('\n'),
);
