/**
 * The NATS router under faults the server does not report: a link that stops carrying bytes
 * without closing (a partition, made by a proxy of the test's own in front of a private
 * nats-server), and another client of the same NATS flooding the gateways' subjects.
 */
import { spawn } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '@eventflow/core';
import type { Gateway } from '../src/index.js';
import type { NatsRouter } from '../src/router/nats/router.js';
import { NATS_MAX_PINGS_OUT, NATS_PING_INTERVAL_MS } from '../src/defaults.js';
import { eventually, fence, FENCE_PID, isFence } from '@eventflow/test-support/wait';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { natsServerUnavailable, natsUnavailable, natsUrl, startPrivateNats } from '@eventflow/test-support/nats';
import { metric, readyz, startCluster } from './nats-support.js';
import { startPartitionProxy } from './partition-proxy.js';

const databases = useTestDatabases();
const unavailable = mysqlUnavailable ?? natsUnavailable;
if (unavailable !== undefined) console.warn(`Skipping the NATS fault tests: ${unavailable}`);
if (unavailable === undefined && natsServerUnavailable !== undefined) console.warn(`Skipping the NATS partition test: ${natsServerUnavailable}`);

const gatewayDir = fileURLToPath(new URL('..', import.meta.url));

/**
 * The flooder: `node -e FLOODER <servers> <prefix> <count>` publishes `count` messages on the
 * gateways' subjects (scheduled, resync, an event subject), a quarter of them what gateways send,
 * the rest payloads they never send, in chunks of 1,000 with a flush after each.
 */
const FLOODER = `
import { connect } from '@nats-io/transport-node';
const [servers, prefix, count] = process.argv.slice(1);
const nc = await connect({ servers });
const encoder = new TextEncoder();
const subjects = [prefix + '.scheduled', prefix + '.resync', prefix + '.event.orders.placed', prefix + '.event.orders.placed'];
const payloads = [undefined, encoder.encode('999999'), encoder.encode('not a position'), encoder.encode('x'.repeat(200))];
for (let sent = 0; sent < Number(count); ) {
  for (let i = 0; i < 1000; i++, sent++) nc.publish(subjects[sent % 4], payloads[(sent >> 2) % 4]);
  await nc.flush();
}
await nc.close();
`;

/** How many store calls of `operation` a gateway made (its /metrics histogram's count). */
const storeCalls = async (gateway: Gateway, operation: string): Promise<number> => (await metric(gateway, `eventflow_store_operation_seconds_count{operation="${operation}"}`)) ?? 0;

describe.skipIf(unavailable !== undefined)('the NATS router under faults', () => {
  it.skipIf(natsServerUnavailable !== undefined)('a silent link (partition, no close) is reported degraded within seconds, and the resync on healing delivers what peers published meanwhile', async () => {
    const nats = await startPrivateNats();
    databases.onCleanup(() => nats.dispose());
    const proxy = await startPartitionProxy(nats.port);
    databases.onCleanup(() => proxy.close());
    // a reaches NATS through the proxy, b directly.
    const { gateways, client } = await startCluster(databases, 2, [proxy.url, nats.url]);
    const [a, b] = gateways as [Gateway, Gateway];
    const seen: StoredEvent[] = [];
    let fenced = false;
    await client(a).subscribe('orders', '*', (event) => void (isFence(event) ? (fenced = true) : seen.push(event)));
    const publisher = client(b);
    const ids: string[] = [];
    const publish = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) ids.push(await publisher.publish({ domain: 'orders', name: 'placed', pid: `p${ids.length}` }));
    };
    await publish(3);
    await eventually(() => seen.length === 3, 10_000, 'before the partition');
    expect((await readyz(a)).body.status).toBe('ready');

    proxy.partition();
    const partitionedAt = Date.now();
    await eventually(async () => (await readyz(a)).body.status === 'degraded', 10_000, 'a degraded');
    const detectedMs = Date.now() - partitionedAt;
    console.info(`silent NATS link reported degraded after ${detectedMs} ms (pings every ${NATS_PING_INTERVAL_MS} ms, ${NATS_MAX_PINGS_OUT} unanswered)`);
    expect(detectedMs).toBeLessThan((NATS_MAX_PINGS_OUT + 2) * NATS_PING_INTERVAL_MS + 1_000);
    expect(await readyz(a)).toMatchObject({ status: 200, body: { status: 'degraded', checks: { router: { ready: true, degraded: true, kind: 'nats' } } } });
    expect(await metric(a, 'eventflow_router_degraded')).toBe(1);
    // b is unaffected and stores on; a cannot hear of it.
    expect((await readyz(b)).body.status).toBe('ready');
    await publish(5);

    proxy.heal();
    const healedAt = Date.now();
    await eventually(() => seen.length === 8, 10_000, 'what b published during the partition, at a');
    const caughtUpMs = Date.now() - healedAt;
    await eventually(async () => (await readyz(a)).body.status === 'ready', 10_000, 'a ready again');
    console.info(`after healing: the partition's events at a's subscriber in ${caughtUpMs} ms, ready in ${Date.now() - healedAt} ms`);
    expect(caughtUpMs).toBeLessThan(3_000);
    // Live again, once each and in order.
    await publish(2);
    await fence(() => publisher.publish({ domain: 'orders', name: 'placed', pid: `${FENCE_PID}1` }), () => fenced, 10_000);
    expect(seen.map((event) => event.id)).toEqual(ids);
  }, 60_000);

  it('50,000 messages flooded at its subjects by another NATS client: a few store reads, flat memory, normal publish latency', async () => {
    const { gateways, client, prefix } = await startCluster(databases, 2, natsUrl);
    const [a, b] = gateways as [Gateway, Gateway];
    const router = a.router as NatsRouter;
    const arrived = new Map<string, number>();
    await client(a).subscribe('orders', '*', (event) => void arrived.set(event.id, Date.now()));
    const publisher = client(b);
    /** Publish on b → the event at a's subscriber, in ms. */
    const latency = async (): Promise<number> => {
      const sent = Date.now();
      const id = await publisher.publish({ domain: 'orders', name: 'placed', pid: 'legit' });
      await eventually(() => arrived.has(id), 10_000, 'a legitimate event at a');
      return (arrived.get(id) as number) - sent;
    };
    const before: number[] = [];
    for (let i = 0; i < 10; i++) before.push(await latency());

    const readsBefore = (await storeCalls(a, 'readPublishedAfter')) + (await storeCalls(a, 'nextScheduled'));
    const receivedBefore = router.counts.accepted + router.counts.ignored;
    const pullsBefore = router.counts.pulls;
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 20);
    // Both gateways run in this process: the longest the event loop was held, parsing the flood included.
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const during: number[] = [];
    try {
      // Another process, as a flooder would be: its own work does not slow this one down.
      const flooder = spawn(process.execPath, ['--input-type=module', '-e', FLOODER, natsUrl, prefix, '50000'], { cwd: gatewayDir, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      flooder.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => flooder.once('exit', resolve));
      databases.onCleanup(async () => flooder.kill());
      let flooding = true;
      void exited.finally(() => (flooding = false));
      while (flooding) during.push(await latency());
      expect(await exited, stderr).toBe(0);
      // Every flooded message has reached a (the server delivers them in order, before this latency's event).
      await eventually(() => router.counts.accepted + router.counts.ignored - receivedBefore >= 50_000, 20_000, 'the flood at a');
      during.push(await latency());
    } finally {
      clearInterval(sampler);
      loopDelay.disable();
    }
    const reads = (await storeCalls(a, 'readPublishedAfter')) + (await storeCalls(a, 'nextScheduled')) - readsBefore;
    const grewMb = (rssPeak - rssBefore) / 2 ** 20;
    const max = (list: number[]): number => Math.max(...list);
    const median = (list: number[]): number => [...list].sort((x, y) => x - y)[Math.floor(list.length / 2)] as number;
    console.info(
      `NATS flood of 50,000 messages: ${router.counts.pulls - pullsBefore} pulls and ${reads} store reads at the flooded gateway; ` +
        `RSS +${grewMb.toFixed(1)} MB at peak; publish → subscriber latency median / max ${median(before)} / ${max(before)} ms before, ` +
        `${median(during)} / ${max(during)} ms during (${during.length} publishes); event loop held at most ${Math.round(loopDelay.max / 1e6)} ms`,
    );
    // Message count is not query count: coalesced per domain and per rescan.
    expect(router.counts.ignored).toBeGreaterThanOrEqual(25_000);
    expect(reads).toBeLessThan(1_000);
    expect(grewMb).toBeLessThan(64);
    // Normal latency: what is left is the CPU time of receiving the messages at all (nats.js parses each), which
    // holds both gateways' event loop here for as long as a burst takes; before, a legitimate event waited for
    // tens of thousands of queries (over 10 s).
    expect(median(during)).toBeLessThan(Math.max(250, 5 * median(before)));
    expect(max(during)).toBeLessThan(5_000);
  }, 60_000);
});
