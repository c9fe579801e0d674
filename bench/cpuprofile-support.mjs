// node bench/cpuprofile-support.mjs <file.cpuprofile> [rows] [--by-package]: self time by function, largest
// first. --by-package: each sample is charged to the nearest frame on its stack from a package
// (node_modules/<name>) or from this repository's dist (gateway/dist/<file>, packages/<p>/dist): what a
// start-up's loading and compiling costs per dependency.
import { readFileSync } from 'node:fs';
const args = process.argv.slice(2);
const byPackage = args.includes('--by-package');
const [file, rowsArg] = args.filter((a) => a !== '--by-package');
const prof = JSON.parse(readFileSync(file, 'utf8'));
const self = new Map();
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const dt = new Map();
for (let i = 0; i < prof.samples.length; i++) dt.set(prof.samples[i], (dt.get(prof.samples[i]) ?? 0) + (prof.timeDeltas[i] ?? 0));
const owner = (url) => {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url) ?? /((?:gateway|packages\/[^/]+)\/dist\/[^/]+)/.exec(url);
  return m?.[1];
};
const packageOf = (id) => {
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const name = owner(byId.get(at).callFrame.url);
    if (name) return name;
  }
  const f = byId.get(id).callFrame;
  return f.functionName.startsWith('(') ? f.functionName : '(node internals, no package on the stack)';
};
let total = 0;
for (const [id, t] of dt) {
  const n = byId.get(id);
  const f = n.callFrame;
  const key = byPackage ? packageOf(id) : `${f.functionName || '(anon)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + t);
  total += t;
}
const rows = [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(rowsArg ?? 30));
console.log(`total ${(total / 1000).toFixed(0)} ms`);
for (const [k, t] of rows) console.log(`${(t / 1000).toFixed(0).padStart(7)} ms ${((100 * t) / total).toFixed(1).padStart(5)}%  ${k}`);
