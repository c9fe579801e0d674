#!/usr/bin/env node
// bench resume: a subscriber (@eventflow/node) goes away, 10,000 events are published, it comes
// back and its subscription resumes by itself from its last position. Measures the time from the
// reconnect (the client's state turning 'open') until all 10,000 missed events were delivered to
// its listener, and checks them: in position order, no gap, no duplicate, exactly the events the
// publishers were acknowledged.
// The gateway runs in its own process with its DEFAULT limits (publish rate, requests in flight,
// send buffer): resuming must work with what users get. The subscriber reaches it through a TCP
// proxy in this process, which is how it "goes away": the proxy drops its connection and refuses
// new ones until the events are published. Publishers connect directly, 10 of them with 1,000
// events each, at most 200 unanswered at a time (within the default limits of 1,000 events/s
// burst and 256 requests in flight per connection).
import { createServer, connect } from 'node:net';
import { createNodeClient } from '@eventflow/node';
import { startServer } from './server-support.mjs';
import { printEnvironment, writeResult } from './results.mjs';

const MISSED = Number(process.env.BENCH_RESUME_EVENTS ?? 10_000);
const PUBLISHERS = 10;
const LANES = 200;
const BEFORE = 100;
const TARGET_MS = 1_000;
const BUDGET_MS = 30_000;
const DOMAIN = 'resume';
const NAME = 'tick';
printEnvironment('resume');

const payload = 'x'.repeat(230);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A TCP proxy to `port` that can drop every connection and refuse new ones while down. */
async function startProxy(port) {
  let up = true;
  const sockets = new Set();
  const server = createServer((client) => {
    if (!up) return client.destroy();
    const upstream = connect(port, '127.0.0.1');
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      sockets.add(a);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        sockets.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `ws://127.0.0.1:${server.address().port}/`,
    down() {
      up = false;
      for (const socket of sockets) socket.destroy();
    },
    up() {
      up = true;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** Publishes `count` events from one connection, LANES at a time; resolves with their positions. */
async function publishFrom(url, first, count) {
  // A long request timeout: on a busy machine 200 queued publishes may wait more than the default 10 s.
  const client = createNodeClient(url, { clientName: `bench-publisher-${first}`, requestTimeout: 60_000 });
  const positions = [];
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: LANES }, async () => {
        while (next < count) {
          const seq = first + next++;
          const { position } = await client.call('publish', { event: { domain: DOMAIN, name: NAME, pid: `p${seq % 100}`, data: { seq, payload } } });
          positions.push(position);
        }
      }),
    );
    return positions;
  } finally {
    await client.close();
  }
}

const server = await startServer('gateway');
const proxy = await startProxy(server.port);
const errors = [];
// A short reconnect backoff only shortens the wait while the proxy refuses; the measure starts at the reconnect.
const subscriber = createNodeClient(proxy.url, { clientName: 'bench-subscriber', reconnect: { minDelay: 50, maxDelay: 250 }, onError: (error) => errors.push(error) });
const received = [];
let onReceived;
let result;
try {
  await subscriber.subscribe(DOMAIN, NAME, (event) => {
    received.push(event);
    onReceived?.();
  });
  const waitFor = (count, ms) =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      onReceived = () => {
        if (received.length < count) return;
        clearTimeout(timer);
        onReceived = undefined;
        resolve(true);
      };
      onReceived();
    });
  // Live first: the subscription has a position when it goes away.
  const before = await publishFrom(server.url, 0, BEFORE);
  if (!(await waitFor(BEFORE, 10_000))) throw new Error(`only ${received.length} of the first ${BEFORE} events arrived live`);

  proxy.down();
  while (subscriber.state === 'open') await sleep(5);
  const t0 = performance.now();
  const batches = await Promise.all(Array.from({ length: PUBLISHERS }, (_, p) => publishFrom(server.url, BEFORE + (p * MISSED) / PUBLISHERS, MISSED / PUBLISHERS)));
  const publishMs = performance.now() - t0;
  const missedPositions = batches.flat().sort((a, b) => a - b);
  const liveWhileAway = received.length - BEFORE;

  let reconnectedAt = 0;
  const opened = new Promise((resolve) => {
    const off = subscriber.onStateChange((state) => {
      if (state !== 'open') return;
      reconnectedAt = performance.now();
      off();
      resolve();
    });
  });
  proxy.up();
  await opened;
  const complete = await waitFor(BEFORE + MISSED, BUDGET_MS);
  const resumeMs = performance.now() - reconnectedAt;

  // Exactly the acknowledged positions, in order, once each.
  const got = received.slice(BEFORE).map((event) => event.position);
  let inOrder = true;
  for (let i = 1; i < got.length; i++) if (got[i] <= got[i - 1]) inOrder = false;
  const exact = got.length === missedPositions.length && got.every((position, i) => position === missedPositions[i]);
  const seqs = new Set(received.slice(BEFORE).map((event) => event.data.seq));
  result = {
    missed: MISSED,
    publishMs: Math.round(publishMs),
    liveWhileAway,
    delivered: got.length,
    complete,
    inOrder,
    exact,
    distinctSeqs: seqs.size,
    resumeMs: Math.round(resumeMs),
    eventsPerSecond: Math.round(got.length / (resumeMs / 1000)),
    beforePositions: before.length,
    clientErrors: errors.filter((error) => error?.code !== 'E_EVENTFLOW_CONNECTION_FAILED').map(String).slice(0, 5),
  };
} finally {
  await subscriber.close().catch(() => {});
  await proxy.close();
  await server.stop();
}

const ok = result.complete && result.inOrder && result.exact && result.liveWhileAway === 0;
console.log(`${MISSED} events published while the subscriber was away (${PUBLISHERS} publishers, ${result.publishMs} ms), gateway default limits`);
console.table([{ delivered: result.delivered, 'in order': result.inOrder, 'exactly the acked positions': result.exact, 'distinct seqs': result.distinctSeqs, 'reconnect → all delivered ms': result.resumeMs, 'events/s': result.eventsPerSecond }]);
console.log(`resume ${result.resumeMs} ms (target <= ${TARGET_MS} ms: ${ok && result.resumeMs <= TARGET_MS ? 'meets' : 'BELOW'} target)`);
if (!ok) console.log(`resume incomplete or wrong: ${JSON.stringify(result)}`);
if (result.clientErrors.length) console.log(`client errors: ${result.clientErrors.join('; ')}`);
writeResult('resume', {
  ...result,
  summary: [
    { measure: `reconnect → ${MISSED} missed events delivered, ms`, value: result.resumeMs, baseline: 'none: an absolute target (what the user waits)', target: `<= ${TARGET_MS}`, meets: ok && result.resumeMs <= TARGET_MS, note: ok ? 'in order, no gaps' : 'INCOMPLETE or out of order' },
  ],
});
