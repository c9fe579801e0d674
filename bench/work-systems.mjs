// The systems bench/work.mjs compares, each behind the same small interface:
//   { label, workerConnect (what each work-worker.mjs process is told), publish(data) → Promise,
//     settled() → Promise<boolean> (nothing pending and nothing in flight, by the system's own
//     account), cpuUs() (CPU µs so far of the server process: the gateway; the shared nats-server or
//     redis-server, whose figure includes whatever else it serves meanwhile), close() }
//   ours:      the gateway as an operator runs it, `node gateway/bin/eventflow-gateway.js` (the
//              bundle, or dist/ when the bundle is older than the last build), in its own process,
//              on a temp SQLite file or on a fresh MariaDB database; the publisher is
//              createNodeClient in the bench process. The consumer group is created before any job
//              is published (events published before a group exists are not its work).
//   jetstream: a stream of its own on the NATS server at 127.0.0.1:4222 (file storage, work-queue
//              retention: what a job queue on JetStream is), one durable pull consumer (explicit
//              ack, JetStream's defaults otherwise: max_ack_pending 1,000, ack_wait 30 s like our
//              lease); the publisher awaits every PubAck (the stored ack, as ours); the stream is
//              deleted by close().
//   bullmq:    a queue of its own on the Redis at 127.0.0.1:6379, obliterated by close().
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createNodeClient, listGroups } from '@eventflow/node';
import { spawnGateway } from './server-support.mjs';
import { freshDatabase } from './v4-support.mjs';

export const NATS_URL = process.env.BENCH_NATS_URL ?? 'nats://127.0.0.1:4222';
export const REDIS = { host: process.env.BENCH_REDIS_HOST ?? '127.0.0.1', port: Number(process.env.BENCH_REDIS_PORT ?? 6379) };
const DOMAIN = 'work';
const NAME = 'job';

// The bench's limits, as in publish-throughput: one publisher here stands for many, so the
// per-connection publish rate, receive rate and in-flight limits are off.
const GATEWAY_ENV = {
  EVENTFLOW_MAX_PUBLISH_RATE: '0',
  EVENTFLOW_MAX_RECEIVE_RATE: '0',
  EVENTFLOW_MAX_IN_FLIGHT: '100000',
  EVENTFLOW_CONSOLE_DIR: 'off',
  // A run that ends with jobs still queued (a time budget hit) stops at once.
  EVENTFLOW_DRAIN_TIMEOUT_MS: '1000',
};

/** CPU µs of a process so far, from /proc (user + system; 10 ms ticks). */
function processCpuUs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
  } catch {
    return NaN;
  }
}

/**
 * The pid of the shared server process (`nats-server`, `redis-server`) that serves `port` on this
 * machine, found by its command line, or undefined: only to read its CPU time (which includes any
 * other traffic it serves meanwhile).
 */
function serverPid(comm, port, defaultPort) {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== comm) continue;
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      // redis-server's title is `redis-server host:port`; nats-server takes -p / --port.
      if (argv.some((a) => a.endsWith(`:${port}`))) return Number(entry);
      const i = argv.findIndex((a) => a === '-p' || a === '--port');
      const named = i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith('--port='))?.slice(7);
      if (named === String(port) || (named === undefined && String(port) === String(defaultPort))) return Number(entry);
    } catch {
      // A process that ended while we looked.
    }
  }
  return undefined;
}

/** Ours on `store` ('sqlite' | 'mysql'): a gateway process on a fresh store, the consumer group created. */
export async function startOurs(store) {
  let dir;
  let db;
  let env;
  if (store === 'sqlite') {
    dir = mkdtempSync(join(tmpdir(), 'eventflow-bench-work-'));
    env = { EVENTFLOW_SQLITE_PATH: join(dir, 'work.db') };
  } else {
    db = await freshDatabase('eventflow_bench_work');
    env = { ...db.env, EVENTFLOW_STORE: 'mysql' };
  }
  const cleanUp = async () => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    await db?.drop();
  };
  let gateway;
  let client;
  try {
    gateway = await spawnGateway({ ...GATEWAY_ENV, ...env });
    client = createNodeClient(gateway.url, { clientName: 'bench-work-publisher', requestTimeout: 60_000 });
    await client.ready();
    // The group exists from its first registration; jobs published after it are its backlog.
    const { remove } = await client.consume(DOMAIN, NAME, () => {});
    await remove();
  } catch (error) {
    await client?.close().catch(() => {});
    await gateway?.stop();
    await cleanUp();
    throw error;
  }
  return {
    label: store === 'sqlite' ? 'ours, SQLite' : 'ours, MariaDB',
    workerConnect: { system: 'eventflow', url: gateway.url, domain: DOMAIN, name: NAME },
    publish: (data, pid) => client.publish({ domain: DOMAIN, name: NAME, pid, data }),
    request: (data, pid) => client.request({ domain: DOMAIN, name: NAME, pid, data }, { timeout: 30_000 }),
    async settled() {
      const [group] = await listGroups(client, DOMAIN);
      return group !== undefined && group.pending === 0 && group.inFlight === 0;
    },
    cpuUs: () => processCpuUs(gateway.pid),
    async close() {
      await client.close().catch(() => {});
      await gateway.stop();
      await cleanUp();
    },
  };
}

/** JetStream: a stream and durable pull consumer of their own; close() deletes the stream. */
export async function startJetStream() {
  const { connect, createInbox } = await import('@nats-io/transport-node');
  const { jetstream, jetstreamManager, AckPolicy, DeliverPolicy, RetentionPolicy, StorageType } = await import('@nats-io/jetstream');
  const nc = await connect({ servers: NATS_URL, name: 'bench-work-publisher' });
  const stream = `bench_work_${randomBytes(5).toString('hex')}`;
  const subject = `${stream}.jobs`;
  const consumer = 'workers';
  const jsm = await jetstreamManager(nc);
  try {
    await jsm.streams.add({ name: stream, subjects: [subject], storage: StorageType.File, retention: RetentionPolicy.Workqueue });
    await jsm.consumers.add(stream, { durable_name: consumer, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All });
  } catch (error) {
    await jsm.streams.delete(stream).catch(() => {});
    await nc.close();
    throw error;
  }
  const js = jetstream(nc);
  const natsPid = serverPid('nats-server', new URL(NATS_URL).port || 4222, 4222);
  const encode = (data) => JSON.stringify(data);
  // request(): the requester's inbox, subscribed once; answers resolve the waiting call by seq.
  const inbox = createInbox();
  const answers = new Map();
  nc.subscribe(inbox, {
    callback: (error, msg) => {
      if (error) return;
      const { seq } = msg.json();
      answers.get(seq)?.(msg);
      answers.delete(seq);
    },
  });
  await nc.flush();
  return {
    label: 'NATS JetStream pull consumer',
    workerConnect: { system: 'jetstream', url: NATS_URL, stream, consumer },
    publish: (data) => js.publish(subject, encode(data)),
    async request(data) {
      const answered = new Promise((resolve) => answers.set(data.seq, resolve));
      await js.publish(subject, encode({ ...data, reply: inbox }));
      return answered;
    },
    async settled() {
      const info = await jsm.consumers.info(stream, consumer);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    },
    cpuUs: () => (natsPid ? processCpuUs(natsPid) : NaN),
    async close() {
      await jsm.streams.delete(stream).catch(() => {});
      await nc.close();
    },
  };
}

/** BullMQ on Redis (when the package is installed and Redis answers): a queue of its own, obliterated by close(). */
export async function startBullMQ() {
  const { Queue, QueueEvents } = await import('bullmq');
  const queueName = `bench-work-${randomBytes(5).toString('hex')}`;
  const connection = { ...REDIS, maxRetriesPerRequest: null };
  const queue = new Queue(queueName, { connection });
  await queue.waitUntilReady();
  const redisPid = serverPid('redis-server', REDIS.port, 6379);
  let events;
  const options = { removeOnComplete: true, removeOnFail: true };
  return {
    label: 'BullMQ (Redis)',
    workerConnect: { system: 'bullmq', queue: queueName, redisHost: REDIS.host, redisPort: REDIS.port },
    publish: (data) => queue.add('job', data, options),
    async request(data) {
      if (!events) {
        events = new QueueEvents(queueName, { connection });
        await events.waitUntilReady();
      }
      const job = await queue.add('job', data, { removeOnComplete: false });
      return job.waitUntilFinished(events, 30_000);
    },
    async settled() {
      const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      return Object.values(counts).every((n) => n === 0);
    },
    cpuUs: () => (redisPid ? processCpuUs(redisPid) : NaN),
    async close() {
      await events?.close().catch(() => {});
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close().catch(() => {});
    },
  };
}

/** Why BullMQ cannot run here, or undefined when it can. */
export async function bullmqUnavailable() {
  try {
    await import('bullmq');
  } catch {
    return 'bullmq is not installed (an optional reference row)';
  }
  const { createConnection } = await import('node:net');
  return new Promise((resolve) => {
    const socket = createConnection(REDIS);
    const done = (reason) => {
      socket.destroy();
      resolve(reason);
    };
    socket.setTimeout(2_000, () => done(`no Redis at ${REDIS.host}:${REDIS.port} (timeout)`));
    socket.once('connect', () => done(undefined));
    socket.once('error', (error) => done(`no Redis at ${REDIS.host}:${REDIS.port} (${error.code ?? error})`));
  });
}

/** Why JetStream cannot run here, or undefined when it can. */
export async function jetstreamUnavailable() {
  try {
    const { connect } = await import('@nats-io/transport-node');
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const nc = await connect({ servers: NATS_URL, timeout: 3_000 });
    try {
      await (await jetstreamManager(nc)).getAccountInfo();
    } finally {
      await nc.close();
    }
    return undefined;
  } catch (error) {
    return `no NATS server with JetStream at ${NATS_URL} (${error?.code ?? error?.message ?? error})`;
  }
}
