#!/usr/bin/env node
// bench idle-memory: what one idle connection costs the gateway, at 10,000 connections.
//   gateway:  gateway/dist in its own process, run with --expose-gc (SQLite temp file, defaults).
//             Raw `ws` clients in another process connect and do the protocol's hello/welcome;
//             then, second reading, each also subscribes once (same domain and name).
//   baseline: a plain `ws` server (no per-connection state of its own) holding the same number of
//             idle connections from the same client process.
// Memory is read in the server's process after full GCs (process.memoryUsage()) before the
// clients connect and after they are all connected (and subscribed); per connection =
// difference / connections, for RSS and for the JS heap + external (Buffers, ws, sockets' JS side).
import { startClients } from './clients-support.mjs';
import { startServer } from './server-support.mjs';
import { printEnvironment, writeResult } from './results.mjs';

const CONNECTIONS = Number(process.env.BENCH_IDLE_CONNECTIONS ?? 10_000);
const TARGET_KB = 10;
printEnvironment('idle-memory');

const kb = (bytes) => +(bytes / 1024).toFixed(2);
const perConnection = (before, after) => ({
  rssKb: kb((after.rss - before.rss) / CONNECTIONS),
  heapKb: kb((after.heapUsed + after.external - before.heapUsed - before.external) / CONNECTIONS),
});
const settle = () => new Promise((resolve) => setTimeout(resolve, 500));

async function run(kind) {
  const server = await startServer(kind, { exposeGc: true });
  const clients = await startClients();
  try {
    // A few connections first, so that lazily loaded code and first-use allocations are not counted.
    const warm = await startClients();
    await warm.ask({ cmd: 'connect', url: server.url, count: 20, hello: kind === 'gateway', subscribe: kind === 'gateway' ? { domain: 'idle', name: 'tick' } : undefined });
    await warm.close();
    await settle();
    const before = await server.memory();
    const connected = await clients.ask({ cmd: 'connect', url: server.url, count: CONNECTIONS, hello: kind === 'gateway' });
    await settle();
    const idle = await server.memory();
    const result = { connected: connected.connected, connectMs: connected.ms, before, idle, perConnection: perConnection(before, idle) };
    if (kind === 'gateway') {
      const subscribed = await clients.ask({ cmd: 'subscribe', domain: 'idle', name: 'tick' });
      await settle();
      result.subscribed = await server.memory();
      result.subscribeMs = subscribed.ms;
      result.perSubscribedConnection = perConnection(before, result.subscribed);
    }
    return result;
  } finally {
    await clients.close();
    await server.stop();
  }
}

const gateway = await run('gateway');
const baseline = await run('idle');
const mb = (bytes) => +(bytes / 2 ** 20).toFixed(1);
console.log(`${CONNECTIONS} connections; server memory after full GCs; per connection = (after − before) / ${CONNECTIONS}`);
console.table(
  [
    ['gateway, hello/welcome', gateway.before, gateway.idle, gateway.perConnection],
    ['gateway, + 1 subscription each', gateway.before, gateway.subscribed, gateway.perSubscribedConnection],
    ['plain ws server', baseline.before, baseline.idle, baseline.perConnection],
  ].map(([name, before, after, per]) => ({
    server: name,
    'rss MB before': mb(before.rss),
    'rss MB after': mb(after.rss),
    'heap+ext MB before': mb(before.heapUsed + before.external),
    'heap+ext MB after': mb(after.heapUsed + after.external),
    'rss kB/conn': per.rssKb,
    'heap+ext kB/conn': per.heapKb,
  })),
);
// RSS is what the process costs the machine, so it is what the target is judged on.
const worst = Math.max(gateway.perConnection.rssKb, gateway.perSubscribedConnection.rssKb);
const complete = gateway.connected === CONNECTIONS && baseline.connected === CONNECTIONS;
console.log(`gateway: ${worst} kB RSS per connection at most (target <= ${TARGET_KB} kB: ${worst <= TARGET_KB ? 'meets' : 'BELOW'} target); plain ws: ${baseline.perConnection.rssKb} kB`);
writeResult('idle-memory', {
  connections: CONNECTIONS, gateway, baseline,
  summary: [
    { measure: `gateway RSS kB per idle connection (hello/welcome), ${CONNECTIONS}`, value: gateway.perConnection.rssKb, baseline: `plain ws ${baseline.perConnection.rssKb}`, ratio: `${(gateway.perConnection.rssKb / baseline.perConnection.rssKb).toFixed(2)}x`, target: `<= ${TARGET_KB}`, meets: complete && gateway.perConnection.rssKb <= TARGET_KB },
    { measure: 'gateway RSS kB per connection with 1 subscription', value: gateway.perSubscribedConnection.rssKb, baseline: `plain ws ${baseline.perConnection.rssKb}`, ratio: `${(gateway.perSubscribedConnection.rssKb / baseline.perConnection.rssKb).toFixed(2)}x`, target: `<= ${TARGET_KB}`, meets: complete && gateway.perSubscribedConnection.rssKb <= TARGET_KB },
    { measure: 'gateway heap+external kB per connection (idle / subscribed)', value: `${gateway.perConnection.heapKb} / ${gateway.perSubscribedConnection.heapKb}`, target: '' },
    { measure: 'plain ws RSS / heap+external kB per idle connection (the baseline)', value: `${baseline.perConnection.rssKb} / ${baseline.perConnection.heapKb}`, target: '' },
  ],
});
