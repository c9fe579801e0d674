// What the gateway's SQLite statements cost, by statement: loaded into the gateway
// (`BENCH_STATEMENT_PROBE_DIR=<dir> BENCH_GATEWAY_IMPORT=bench/statement-probe.mjs node bench/work.mjs …`),
// it wraps better-sqlite3's statement methods and counts every call and its time by the statement's
// text; written to <dir>/<pid>.json when the gateway exits (and on SIGUSR2, which also starts the
// counts over: send it after a warm-up, and again to take a window). Run directly, it prints a
// directory's files: `node bench/statement-probe.mjs <dir> [calls-per]`, with calls-per the number
// of jobs or requests in the window, for counts and µs per job.
// Not part of `npm run bench`: a probe for a profile (its wrapper costs ~1 µs a call). The addon is
// the one the gateway's bundle loads (one module per path), so its Statement prototype is shared.
import { createRequire } from 'node:module';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = process.env.BENCH_STATEMENT_PROBE_DIR;
const self = fileURLToPath(import.meta.url);

if (process.argv[1] === self) report(process.argv[2], Number(process.argv[3] ?? 0));
else if (dir) probe(dir);

function probe(into) {
  const require = createRequire(import.meta.url);
  const addon = require(join(dirname(require.resolve('better-sqlite3/package.json')), 'build', 'Release', 'better_sqlite3.node'));
  const prototype = addon.Statement.prototype;
  /** statement text (its method first) → { calls, ns } */
  let counts = new Map();
  for (const method of ['run', 'get', 'all', 'iterate']) {
    const original = prototype[method];
    prototype[method] = function (...args) {
      const t0 = process.hrtime.bigint();
      try {
        return original.apply(this, args);
      } finally {
        const key = `${method} ${this.source.replace(/\s+/g, ' ').trim()}`;
        const count = counts.get(key) ?? { calls: 0, ns: 0 };
        count.calls += 1;
        count.ns += Number(process.hrtime.bigint() - t0);
        counts.set(key, count);
      }
    };
  }
  let window = 0;
  const save = () => writeFileSync(join(into, `${process.pid}-${window}.json`), JSON.stringify(Object.fromEntries(counts)));
  process.on('SIGUSR2', () => {
    save();
    window += 1;
    counts = new Map();
  });
  process.on('exit', save);
}

function report(from, per) {
  if (!from) throw new Error('usage: node bench/statement-probe.mjs <dir> [calls-per]');
  for (const file of readdirSync(from).sort()) {
    const rows = Object.entries(JSON.parse(readFileSync(join(from, file), 'utf8'))).sort((a, b) => b[1].ns - a[1].ns);
    const total = rows.reduce((sum, [, { ns }]) => sum + ns, 0);
    console.log(`\n${file}: ${rows.length} statements, ${(total / 1e6).toFixed(1)} ms${per ? `, ${(total / 1e3 / per).toFixed(1)} µs per` : ''}`);
    for (const [text, { calls, ns }] of rows.slice(0, 25)) {
      const each = `${String(calls).padStart(8)} calls ${(ns / calls / 1e3).toFixed(1).padStart(7)} µs`;
      console.log(`${each}${per ? ` ${(calls / per).toFixed(2).padStart(6)}/per ${(ns / 1e3 / per).toFixed(1).padStart(6)} µs/per` : ''}  ${text.slice(0, 110)}`);
    }
  }
}
