// One worker process of bench/work.mjs: a consumer of the system under test with a no-op handler
// (or, in the request mode, one that answers), forked by startWorkers() below and driven by IPC:
//   connect { system, url, mode, jobs, concurrency, domain, name, stream, consumer, queue } → { connected }
//          opens the connection and everything but the consumer itself.
//   go      {} → { going }          registers the consumer (ours: consume() resolved; JetStream:
//                                    consume() started; BullMQ: the Worker created), so both
//                                    workers start together, when the parent says so.
//   watch   {} → { watching }       from now on sends { progress: handled } every 5 ms when the
//                                    count changed, for the parent waiting on the total.
//   report  {} → { handled, counts, latencies, firstAt, lastAt, cpuUs (since `go`) }
//   close   {} → exits (ours: client.close() lets running handlers settle first).
// Progress is sent only once watched: a message every 5 ms from each worker woke the parent (the
// publisher, in the steady row) 400 times a second and took ~15% of a worker's CPU at 500 jobs/s
// (a CPU profile), load that every system's row carried on these two cores.
// Every job's data is { seq, t, w, payload, reply? }: seq numbers the job (counts[seq] is how many
// times this process handled it), t is process.hrtime.bigint() in ns taken by the publisher just
// before its publish call (CLOCK_MONOTONIC: one clock for every process on the machine), w marks a
// warm-up job (no latency sample). The latency sample is taken at the handler's first line.
//   system 'eventflow': createNodeClient(url).consume(domain, name, handler, { concurrency }): the
//          public client; the request mode publishes `success` (same domain and pid, rid = the
//          event's id) before the handler resolves, which is what client.request() waits for.
//   system 'jetstream': a durable pull consumer (explicit ack) of `stream`, consume({ max_messages:
//          concurrency }); each message is parsed (m.json()), handled, then acked; the request
//          mode first publishes the answer on the core subject data.reply.
//   system 'bullmq': new Worker(queue, handler, { concurrency }) on the machine's Redis.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const hrNow = () => Number(process.hrtime.bigint());

/** Forks `count` workers; resolves once each is connected (the `connect` message answered). */
export async function startWorkers(count, connect) {
  const workers = await Promise.all(Array.from({ length: count }, () => startWorker()));
  try {
    await Promise.all(workers.map((worker) => worker.ask({ cmd: 'connect', ...connect })));
  } catch (error) {
    await Promise.all(workers.map((worker) => worker.close()));
    throw error;
  }
  return {
    workers,
    /** Jobs handled by all of them so far (from their progress messages, sent once `watch` was asked). */
    handled: () => workers.reduce((sum, worker) => sum + worker.progress, 0),
    watch: () => Promise.all(workers.map((worker) => worker.ask({ cmd: 'watch' }))),
    go: () => Promise.all(workers.map((worker) => worker.ask({ cmd: 'go' }))),
    report: () => Promise.all(workers.map((worker) => worker.ask({ cmd: 'report' }))),
    close: () => Promise.all(workers.map((worker) => worker.close())),
  };
}

function startWorker() {
  const child = fork(self, [], { ...(process.env.BENCH_WORKER_PROF ? { execArgv: ['--cpu-prof', '--cpu-prof-dir=' + process.env.BENCH_WORKER_PROF] } : {}), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = [];
  const worker = {
    progress: 0,
    ask(message) {
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.send(message);
      }).then((answer) => {
        if (answer.error) throw new Error(`work worker: ${answer.error}`);
        return answer;
      });
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ cmd: 'close' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  child.on('message', (message) => {
    if ('progress' in message) worker.progress = message.progress;
    else waiting.shift()?.resolve(message);
  });
  child.on('exit', (code, signal) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`work worker exited (${code ?? signal})`));
  });
  return new Promise((resolve, reject) => {
    child.once('spawn', () => resolve(worker));
    child.once('error', reject);
  });
}

async function run() {
  let options;
  let counts = new Uint16Array(0);
  let outOfRange = 0;
  let handled = 0;
  let firstAt = 0;
  let lastAt = 0;
  let latencies = new Float64Array(1 << 14);
  let samples = 0;
  let start;
  let cpuAtGo;
  let close = async () => {};

  /** Called on the first line of every handler. */
  const record = (data, at) => {
    handled++;
    if (firstAt === 0) firstAt = at;
    lastAt = at;
    const seq = data?.seq;
    if (Number.isInteger(seq) && seq >= 0 && seq < counts.length) counts[seq]++;
    else outOfRange++;
    if (data?.w === 0 && typeof data.t === 'number') {
      if (samples === latencies.length) {
        const grown = new Float64Array(latencies.length * 2);
        grown.set(latencies);
        latencies = grown;
      }
      latencies[samples++] = (at - data.t) / 1e6;
    }
  };

  let reported = -1;
  let watched = false;
  setInterval(() => {
    if (watched && handled !== reported && process.connected) {
      reported = handled;
      process.send({ progress: handled });
    }
  }, 5).unref();

  const systems = {
    async eventflow() {
      const { createNodeClient } = await import('@eventflow/node');
      const client = createNodeClient(options.url, { clientName: 'bench-work-worker', requestTimeout: 60_000 });
      await client.ready();
      close = () => client.close({ drainTimeout: 2_000 });
      // Only passed when set: today's client ignores options it does not know, a later one may refuse them.
      const consumeOptions = options.concurrency ? { concurrency: options.concurrency } : {};
      const { domain, name } = options;
      start = async () => {
        await client.consume(
          domain,
          name,
          async (event) => {
            record(event.data, hrNow());
            if (options.mode === 'request') await client.publish({ domain, name: 'success', pid: event.pid, rid: event.id, data: { seq: event.data.seq } });
          },
          consumeOptions,
        );
      };
    },
    async jetstream() {
      const { connect } = await import('@nats-io/transport-node');
      const { jetstream } = await import('@nats-io/jetstream');
      const nc = await connect({ servers: options.url, name: 'bench-work-worker' });
      const consumer = await jetstream(nc).consumers.get(options.stream, options.consumer);
      let messages;
      let loop = Promise.resolve();
      close = async () => {
        await messages?.close();
        await loop;
        await nc.drain();
      };
      start = async () => {
        messages = await consumer.consume({ max_messages: options.concurrency || 100 });
        loop = (async () => {
          for await (const m of messages) {
            const at = hrNow();
            const data = m.json();
            record(data, at);
            if (options.mode === 'request') nc.publish(data.reply, JSON.stringify({ seq: data.seq }));
            m.ack();
          }
        })();
      };
    },
    async bullmq() {
      const { Worker } = await import('bullmq');
      const connection = { host: options.redisHost, port: options.redisPort, maxRetriesPerRequest: null };
      let worker;
      close = async () => worker?.close();
      start = async () => {
        worker = new Worker(
          options.queue,
          async (job) => {
            record(job.data, hrNow());
            return options.mode === 'request' ? { seq: job.data.seq } : undefined;
          },
          { connection, concurrency: options.concurrency || 1, autorun: true },
        );
        await worker.waitUntilReady();
      };
    },
  };

  process.on('message', async (message) => {
    try {
      if (message.cmd === 'connect') {
        options = message;
        counts = new Uint16Array(options.jobs);
        await systems[options.system]();
        process.send({ connected: true });
      } else if (message.cmd === 'go') {
        cpuAtGo = process.cpuUsage();
        await start();
        process.send({ going: true });
      } else if (message.cmd === 'watch') {
        watched = true;
        process.send({ watching: true });
      } else if (message.cmd === 'report') {
        process.send({ handled, outOfRange, counts: Array.from(counts), latencies: Array.from(latencies.subarray(0, samples)), firstAt, lastAt, cpuUs: process.cpuUsage(cpuAtGo) });
      } else if (message.cmd === 'close') {
        await close().catch(() => {});
        process.exit(0);
      }
    } catch (error) {
      process.send({ error: String(error?.stack ?? error) });
    }
  });
}

if (process.argv[1] === self) await run();
