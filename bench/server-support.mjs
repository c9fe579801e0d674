// The server under test, in a child process of its own so that neither the subscribers nor the
// publisher share its event loop: either the gateway (gateway/dist, SQLite on a temp file) or a
// plain `ws` baseline. Started by startServer() below (fork with IPC); speaks to its parent by
// IPC messages only:
//   → { ready: true, port }                           once listening
//   ← { cmd: 'memory' } → { memory }                  process.memoryUsage() after two full GCs (needs --expose-gc)
//   ← { cmd: 'stop' }                                 closes and exits
// BENCH_SERVER=gateway | relay | idle, BENCH_GATEWAY_CONFIG (JSON, merged over the defaults below).
//   relay: every text frame a client sends is sent to every other client as is, and the sender
//          gets back `ack` (a publisher can keep a window of frames in flight), like one publish
//          fanned out to every subscriber, without storing anything.
//   idle:  accepts connections and does nothing with them.
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);

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

async function serve() {
  const kind = process.env.BENCH_SERVER;
  let close;
  let port;
  if (kind === 'gateway') {
    const { startGateway } = await import('../gateway/dist/index.js');
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
  } else if (kind === 'relay' || kind === 'idle') {
    const { WebSocketServer } = await import('ws');
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false, clientTracking: true });
    await new Promise((resolve) => wss.once('listening', resolve));
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
  } else throw new Error(`BENCH_SERVER must be gateway, relay or idle, not ${kind}`);

  process.on('message', async (message) => {
    if (message.cmd === 'memory') {
      for (let i = 0; i < 3; i++) {
        globalThis.gc?.();
        await new Promise((resolve) => setImmediate(resolve));
      }
      process.send({ memory: process.memoryUsage(), cpu: process.cpuUsage() });
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
