// The server under test, in a child process of its own so that neither the subscribers nor the
// publisher share its event loop: either the gateway (gateway/dist, SQLite on a temp file) or a
// plain `ws` baseline. Started by startServer() below (fork with IPC); speaks to its parent by
// IPC messages only:
//   → { ready: true, port }                           once listening
//   ← { cmd: 'memory' } → { memory }                  process.memoryUsage() after two full GCs (needs --expose-gc)
//   ← { cmd: 'stop' }                                 closes and exits
// BENCH_SERVER=gateway | ceiling | relay | idle, BENCH_GATEWAY_CONFIG (JSON, merged over the defaults below).
//   ceiling: the Node ceiling for fan-out work. Every text frame a client sends is framed ONCE
//          (ws's Sender.frame: header + the received bytes, unmasked, not copied) and the same two
//          Buffers are written to every other client's TCP socket, corked on the first write of a
//          tick and uncorked on process.nextTick (what the gateway does); the sender gets `ack`
//          (a publisher can keep a window of frames in flight). No store, no protocol: what
//          delivering one publish to every subscriber costs Node at the least.
//   relay: the naive relay (kept as a labelled reference row): `client.send(string)` per client,
//          so ws converts and frames the same frame once per subscriber.
//   idle:  accepts connections and does nothing with them.
// spawnGateway() below starts the gateway's bin instead, as an operator does (bench/work.mjs; the
// schema of publish-throughput's SQLite floor).
import { fork, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';

const self = fileURLToPath(import.meta.url);
const gatewayBin = fileURLToPath(new URL('../gateway/bin/eventflow-gateway.js', import.meta.url));

/** Forks the server; resolves with { port, memory(), stop() } once it listens. BENCH_CPU_PROF=dir profiles it. */
export async function startServer(kind, { gatewayConfig = {}, exposeGc = false } = {}) {
  const execArgv = [];
  if (exposeGc) execArgv.push('--expose-gc');
  if (process.env.BENCH_CPU_PROF) execArgv.push('--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`);
  const child = fork(self, [], {
    execArgv,
    env: { ...process.env, BENCH_SERVER: kind, BENCH_GATEWAY_CONFIG: JSON.stringify(gatewayConfig) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const replies = [];
  let onReply;
  child.on('message', (message) => (onReply ? onReply(message) : replies.push(message)));
  const next = () =>
    new Promise((resolve, reject) => {
      if (replies.length) return resolve(replies.shift());
      const onExit = (code) => reject(new Error(`${kind} server exited (${code}) before answering`));
      child.once('exit', onExit);
      onReply = (message) => {
        onReply = undefined;
        child.off('exit', onExit);
        resolve(message);
      };
    });
  const { port } = await next();
  return {
    port,
    url: `ws://127.0.0.1:${port}/`,
    pid: child.pid,
    async memory() {
      child.send({ cmd: 'memory' });
      return (await next()).memory;
    },
    /** CPU time used so far (process.cpuUsage(), µs). */
    async cpu() {
      child.send({ cmd: 'memory' });
      return (await next()).cpu;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ cmd: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * `node gateway/bin/eventflow-gateway.js` (what an operator runs: the bundle, or dist/ when the
 * bundle is older than the last build) in a process of its own, on 127.0.0.1 and a free port, with
 * `env` over the defaults; resolves with { url, pid, stop() } once its banner printed the `clients:`
 * line. BENCH_CPU_PROF=dir profiles it; BENCH_GATEWAY_IMPORT=<module> is loaded into it first;
 * BENCH_GATEWAY_FLAGS="<flags>" are passed to its node.
 */
export function spawnGateway(env, timeoutMs = 30_000) {
  const childEnv = { ...process.env, EVENTFLOW_HOST: '127.0.0.1', EVENTFLOW_PORT: '0', EVENTFLOW_LOG_LEVEL: 'warn', ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])) };
  delete childEnv.NODE_OPTIONS;
  const execArgv = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`, ...(process.env.BENCH_CPU_PROF_INTERVAL ? [`--cpu-prof-interval=${process.env.BENCH_CPU_PROF_INTERVAL}`] : [])] : [];
  // Node or V8 flags for the gateway alone, space-separated (a probe: `--maglev`, say).
  if (process.env.BENCH_GATEWAY_FLAGS) execArgv.push(...process.env.BENCH_GATEWAY_FLAGS.split(' ').filter(Boolean));
  // A module the gateway loads first (bench/request-legs.mjs: its socket probe).
  if (process.env.BENCH_GATEWAY_IMPORT) execArgv.push(`--import=${process.env.BENCH_GATEWAY_IMPORT}`);
  const child = spawn(process.execPath, [...execArgv, gatewayBin], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (chunk) => {
    err += chunk;
    process.stderr.write(chunk);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`gateway: no "clients:" line within ${timeoutMs} ms\n${out}\n${err}`));
    }, timeoutMs);
    const onData = (chunk) => {
      out += chunk;
      const match = /clients:\s+(ws:\/\/\S+)/.exec(out);
      if (!match) return;
      clearTimeout(timer);
      child.stdout.off('data', onData);
      child.stdout.resume();
      resolve({ url: match[1], pid: child.pid, stop });
    };
    child.stdout.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (${code ?? signal}) before listening\n${out}\n${err}`));
    });
  });
}

async function serve() {
  const kind = process.env.BENCH_SERVER;
  let close;
  let port;
  if (kind === 'gateway') {
    const { startGateway } = await import('@eventflow/gateway');
    const dir = mkdtempSync(join(tmpdir(), 'eventflow-bench-'));
    const gateway = await startGateway({
      EVENTFLOW_PORT: 0,
      EVENTFLOW_SQLITE_PATH: join(dir, 'bench.db'),
      EVENTFLOW_LOG_LEVEL: 'warn',
      ...JSON.parse(process.env.BENCH_GATEWAY_CONFIG || '{}'),
    });
    port = gateway.port;
    close = async () => {
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    };
  } else if (kind === 'relay' || kind === 'idle' || kind === 'ceiling') {
    const { WebSocketServer, Sender } = await import('ws');
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false, clientTracking: true });
    await new Promise((resolve) => wss.once('listening', resolve));
    if (kind === 'ceiling') {
      const corked = new Set();
      const uncork = () => {
        for (const socket of corked) socket.uncork();
        corked.clear();
      };
      wss.on('connection', (socket) => {
        socket.on('message', (data, isBinary) => {
          // Encoded and framed once; `readOnly` lets ws use the received bytes as they are.
          const [header, body] = Sender.frame(data, { fin: true, opcode: isBinary ? 2 : 1, mask: false, readOnly: true, rsv1: false });
          for (const client of wss.clients) {
            if (client === socket || client.readyState !== 1) continue;
            const tcp = client._socket;
            if (!corked.has(tcp)) {
              if (corked.size === 0) process.nextTick(uncork);
              corked.add(tcp);
              tcp.cork();
            }
            tcp.write(header);
            if (body.length) tcp.write(body);
          }
          socket.send('ack');
        });
      });
    }
    if (kind === 'relay') {
      wss.on('connection', (socket) => {
        socket.on('message', (data, isBinary) => {
          const frame = isBinary ? data : data.toString();
          for (const client of wss.clients) if (client !== socket) client.send(frame);
          socket.send('ack');
        });
      });
    }
    port = wss.address().port;
    close = async () => {
      for (const client of wss.clients) client.terminate();
      await new Promise((resolve) => wss.close(resolve));
    };
  } else throw new Error(`BENCH_SERVER must be gateway, ceiling, relay or idle, not ${kind}`);

  let snapshots = 0;
  process.on('message', async (message) => {
    if (message.cmd === 'memory') {
      for (let i = 0; i < 3; i++) {
        globalThis.gc?.();
        await new Promise((resolve) => setImmediate(resolve));
      }
      const memory = process.memoryUsage();
      // BENCH_HEAP_SNAPSHOT=dir: a heap snapshot at every memory reading (diff two with heap-support.mjs).
      if (process.env.BENCH_HEAP_SNAPSHOT) v8.writeHeapSnapshot(join(process.env.BENCH_HEAP_SNAPSHOT, `${kind}-${++snapshots}.heapsnapshot`));
      process.send({ memory, cpu: process.cpuUsage() });
    } else if (message.cmd === 'stop') {
      await close();
      // Exiting through the event loop's end lets --cpu-prof write its profile.
      process.disconnect();
      setTimeout(() => process.exit(0), 2_000).unref();
    }
  });
  process.send({ ready: true, port });
}

if (process.argv[1] === self) await serve();
