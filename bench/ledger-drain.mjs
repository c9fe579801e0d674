#!/usr/bin/env node
// bench ledger-drain: the delivery ledger alone, in this process (no gateway, no sockets): 10,000
// published jobs of the default group claimed in pages and settled `success`, one claim and one
// settle batch at a time. Per job: the claim's and the settle's time, and on MariaDB the server's
// CPU (its /proc stat: the server must run on this machine) and its logical page reads
// (Innodb_buffer_pool_read_requests, which a busy machine does not move: the figure to compare
// schema and statement changes by, where times need many alternated runs).
// --open-all claims every job first, then settles them all (many deliveries open at once: long
// handlers, a large total concurrency); --page is the claim's and the settle batch's size.
// Usage: node bench/ledger-drain.mjs [--store=sqlite|mysql] [--jobs=N] [--page=N] [--open-all] [--rounds=N]
//   (after npm run build; MariaDB: EVENTFLOW_TEST_MYSQL_HOST/PORT/USER/PASSWORD as the other benches)
// Not part of `npm run bench`: a probe for the store's share of a job, not a target.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generateEventId } from '@eventflow/core';

const { values: args } = parseArgs({
  options: { store: { type: 'string', default: 'sqlite' }, jobs: { type: 'string', default: '10000' }, page: { type: 'string', default: '64' }, 'open-all': { type: 'boolean', default: false }, rounds: { type: 'string', default: '3' } },
});
const JOBS = Number(args.jobs);
const PAGE = Number(args.page);
const ROUNDS = Number(args.rounds);
if (!(args.store === 'sqlite' || args.store === 'mysql') || !(JOBS >= 1) || !(PAGE >= 1) || !(ROUNDS >= 1)) {
  console.error('bench ledger-drain: --store=sqlite|mysql, --jobs, --page and --rounds positive integers');
  process.exit(2);
}

/** The MariaDB server's CPU in ms (utime + stime of the process listening on `port`), or undefined when it is not on this machine. */
function serverCpuMs(port) {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!/mariadbd|mysqld/.test(argv[0] ?? '')) continue;
      const named = argv.find((a) => a.startsWith('--port='))?.slice(7);
      if ((named ?? '3306') !== String(port)) continue;
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1].split(' ');
      return (Number(fields[11]) + Number(fields[12])) * 10;
    } catch {
      // A process that ended while we looked.
    }
  }
  return undefined;
}

async function openStore() {
  if (args.store === 'sqlite') {
    const { SqliteStore } = await import('../gateway/dist/store/sqlite/sqlite.js');
    const dir = mkdtempSync(join(tmpdir(), 'eventflow-ledger-drain-'));
    const store = new SqliteStore({ path: join(dir, 'ledger.db') });
    await store.init();
    return { store, server: undefined, close: async () => (await store.close(), rmSync(dir, { recursive: true, force: true })) };
  }
  const { MysqlStore } = await import('../gateway/dist/store/mysql/mysql.js');
  const { freshDatabase, mysqlServer } = await import('./v4-support.mjs');
  const db = await freshDatabase('eventflow_bench_ledger');
  const mysql = (await import('mysql2/promise')).default;
  const admin = await mysql.createConnection(mysqlServer);
  const store = new MysqlStore({ ...mysqlServer, database: db.database });
  await store.init();
  const reads = async () => Number((await admin.query(`SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_read_requests'`))[0][0].Value);
  return {
    store,
    server: { cpuMs: () => serverCpuMs(mysqlServer.port), reads },
    close: async () => {
      await store.close();
      await admin.end();
      await db.drop();
    },
  };
}

async function round() {
  const { store, server, close } = await openStore();
  try {
    const ledger = store.ledger();
    const group = await ledger.ensureGroup({ domain: 'bench', name: 'job', group: '' });
    const payload = 'x'.repeat(200);
    for (let i = 0; i < JOBS; i += 500) {
      const batch = Array.from({ length: Math.min(500, JOBS - i) }, (_, j) => ({ id: generateEventId(), domain: 'bench', name: 'job', pid: `p${(i + j) % 100}`, data: { seq: i + j, payload } }));
      await Promise.all(batch.map((event) => store.append(event, { publisher: 'bench', routedBy: 'bench-hub' })));
    }
    const owner = `bench-${randomBytes(4).toString('hex')}`;
    const claim = async () => {
      const now = Date.now();
      return ledger.claim({ group, owner, consumer: owner, secret: randomBytes(16).toString('hex'), deadline: now + 600_000, now, limit: PAGE, maxAttempts: 100, known: () => undefined });
    };
    const settle = (claimed) => ledger.apply(claimed.map(({ delivery }) => ({ kind: 'outcome', delivery, outcome: 'success' })));
    let claimMs = 0;
    let settleMs = 0;
    let done = 0;
    const cpu0 = server?.cpuMs();
    const reads0 = await server?.reads();
    const started = performance.now();
    const timed = async (work) => {
      const at = performance.now();
      const result = await work();
      return [result, performance.now() - at];
    };
    if (args['open-all']) {
      const open = [];
      for (;;) {
        const [result, ms] = await timed(claim);
        claimMs += ms;
        if (result.claimed.length === 0) break;
        open.push(...result.claimed);
      }
      for (let i = 0; i < open.length; i += PAGE) settleMs += (await timed(() => settle(open.slice(i, i + PAGE))))[1];
      done = open.length;
    } else {
      for (;;) {
        const [result, ms] = await timed(claim);
        claimMs += ms;
        if (result.claimed.length === 0) break;
        settleMs += (await timed(() => settle(result.claimed)))[1];
        done += result.claimed.length;
      }
    }
    const wallMs = performance.now() - started;
    const cpu = cpu0 === undefined ? undefined : (server.cpuMs() ?? cpu0) - cpu0;
    const reads = reads0 === undefined ? undefined : (await server.reads()) - reads0;
    if (done !== JOBS) throw new Error(`claimed ${done} of ${JOBS} jobs`);
    return {
      jobsPerSecond: Math.round((done / wallMs) * 1000),
      claimUsPerJob: +((claimMs * 1000) / done).toFixed(1),
      settleUsPerJob: +((settleMs * 1000) / done).toFixed(1),
      ...(cpu === undefined ? {} : { serverCpuUsPerJob: Math.round((cpu * 1000) / done) }),
      ...(reads === undefined ? {} : { pageReadsPerJob: +(reads / done).toFixed(1) }),
    };
  } finally {
    await close();
  }
}

console.log(`ledger-drain: ${args.store}, ${JOBS} jobs, pages of ${PAGE}${args['open-all'] ? ', all open before the settles' : ''}; load average ${(await import('node:os')).loadavg()[0].toFixed(2)}`);
const rows = [];
for (let i = 0; i < ROUNDS; i++) rows.push(await round());
console.table(rows);
