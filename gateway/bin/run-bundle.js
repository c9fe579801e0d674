// Runs the gateway's bundle (scripts/bundle-gateway.mjs: one CommonJS script, bundle/<build>/main.cjs)
// with V8's code cache, which Node 20 offers for scripts (vm.Script's cachedData) but not for ES
// modules (module.enableCompileCache is Node 22). A start then deserializes the functions compiled
// by an earlier run instead of parsing and compiling ~650 kB of JavaScript (bench/README.md › start).
//
// The cache is main.cjs.cache beside the script, written when the process exits (as Node 22's
// compile cache is) with what that run compiled: when there was none, when V8 rejected it (it checks
// the source, its own version and its flags), or when this run compiled more than it holds (a
// `--version` may have written it, before any gateway ran). Written aside, then renamed, so that a
// process starting meanwhile reads it whole; not written where the package cannot be written to.
const { readFileSync, renameSync, rmSync, writeFileSync } = require('node:fs');
const Module = require('node:module');
const { dirname } = require('node:path');
const vm = require('node:vm');

/** @param {string} file the bundle's main.cjs */
exports.runBundle = function runBundle(file) {
  const cacheFile = `${file}.cache`;
  let cachedData;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    cachedData = undefined;
  }
  // No import() in it (scripts/bundle-gateway.mjs › requireDynamicImports): none would work from a cache.
  const script = new vm.Script(Module.wrap(readFileSync(file, 'utf8')), { filename: file, cachedData });
  const held = script.cachedDataRejected === true ? 0 : (cachedData?.length ?? 0);
  process.once('exit', () => writeCache(script, cacheFile, held));
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, Module.createRequire(file), module, file, dirname(file));
};

/**
 * Replaces the cache when this run compiled a tenth more than it holds: it then settles after the
 * first run that started a gateway, instead of being rewritten at every exit.
 * @param {vm.Script} script @param {string} cacheFile @param {number} held bytes of usable cache read at start
 */
function writeCache(script, cacheFile, held) {
  const aside = `${cacheFile}.${process.pid}`;
  try {
    const data = script.createCachedData();
    if (data.length <= held * 1.1) return;
    writeFileSync(aside, data);
    renameSync(aside, cacheFile);
  } catch {
    // A read-only install, a full disk: the next start compiles from source, as this one did.
    rmSync(aside, { force: true });
  }
}
