// Many raw `ws` clients in a child process of their own: the same subscriber harness for the
// gateway and for its plain-`ws` baseline, off the server's event loop and with its own file
// descriptors. Driven by IPC from startClients() below:
//   connect   { url, count, hello, subscribe?: { domain, name }, measure }  → { connected, ms }
//             hello: send the protocol's hello and wait for the welcome (the gateway); false: just open.
//             subscribe: then subscribe each connection and wait for its result.
//   subscribe { domain, name } → { subscribed, ms }     subscribes every connection (after connect)
//   reset     { stampedAfter? } → { reset }             zeroes the counters; 'latency' then ignores frames stamped earlier
//   report    {}               → { total, firstAt, lastAt, checked, bad, sample (a checked frame), latency? }
//   close     {}               → exits
// While measuring, it sends { progress: total } every 5 ms when the total changed.
//   measure 'count':   counts frames; one in 100 is parsed and checked to be an event frame whose
//                      data has the 256-byte payload (the delivery is real, with data).
//   measure 'latency': records now − event.data.t, both from process.hrtime.bigint()
//                      (CLOCK_MONOTONIC: one clock for all processes); t is read from the frame's
//                      bytes, and one frame in 100 is parsed in full to check it.
//   measure 'idle':    nothing.
// Times (firstAt, lastAt) are hrtime nanoseconds as Numbers, comparable with the parent's.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const now = () => Number(process.hrtime.bigint());
const T_KEY = Buffer.from('"t":');

export async function startClients() {
  const child = fork(self, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = [];
  let progress = 0;
  const progressListeners = new Set();
  child.on('message', (message) => {
    if ('progress' in message) {
      progress = message.progress;
      for (const listener of progressListeners) listener(progress);
      return;
    }
    waiting.shift()?.resolve(message);
  });
  child.on('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`clients process exited (${code})`));
  });
  const ask = (message) =>
    new Promise((resolve, reject) => {
      waiting.push({ resolve, reject });
      child.send(message);
    });
  return {
    async ask(message) {
      const answer = await ask(message);
      if (answer.error) throw new Error(`clients process: ${answer.error}`);
      if (message.cmd === 'reset') progress = 0;
      return answer;
    },
    get progress() {
      return progress;
    },
    onProgress(listener) {
      progressListeners.add(listener);
      return () => progressListeners.delete(listener);
    },
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ cmd: 'close' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function run() {
  const { WebSocket } = await import('ws');
  const sockets = [];
  let measure = 'idle';
  let total = 0;
  let firstAt = 0;
  let lastAt = 0;
  let checked = 0;
  let bad = 0;
  let firstBad;
  let sample;
  /** measure 'latency': frames stamped before this (hrtime ns) are not counted. */
  let stampedAfter = 0;
  let latencies = new Float64Array(1 << 16);
  let samples = 0;
  let nextRequest = 1;
  const pending = new Map();

  const onEvent = (data) => {
    const at = now();
    if (total === 0) firstAt = at;
    lastAt = at;
    total++;
    if (measure === 'count') {
      if (total % 100 !== 0) return;
      checked++;
      sample = data.toString();
      const frame = JSON.parse(sample);
      const payload = frame.type === 'event' ? frame.event?.data?.payload : undefined;
      if (typeof payload !== 'string' || payload.length < 200) {
        bad++;
        firstBad ??= data.toString().slice(0, 200);
      }
    } else if (measure === 'latency') {
      // The stamp is read straight from the bytes (a full parse of every frame would make this
      // process the bottleneck); one frame in 100 is parsed in full and checked to agree.
      const at_ = data.indexOf(T_KEY);
      let t = at_ < 0 ? NaN : 0;
      for (let i = at_ + T_KEY.length; at_ >= 0 && i < data.length && data[i] >= 48 && data[i] <= 57; i++) t = t * 10 + (data[i] - 48);
      if (total % 100 === 0) {
        checked++;
        const frame = JSON.parse(data.toString());
        if (frame.type !== 'event' || frame.event?.data?.t !== t || typeof frame.event?.data?.payload !== 'string') t = NaN;
      }
      if (t > 0 && t < stampedAfter) {
        // Published before the measured phase (a backlog of the warm-up): not a sample.
        total--;
        return;
      }
      if (!(t > 0)) {
        bad++;
        firstBad ??= data.toString().slice(0, 200);
        return;
      }
      if (samples === latencies.length) {
        const grown = new Float64Array(latencies.length * 2);
        grown.set(latencies);
        latencies = grown;
      }
      latencies[samples++] = (at - t) / 1e6;
    }
  };

  /** Sends a request on a gateway connection and resolves with its answer. */
  const request = (socket, op, params) =>
    new Promise((resolve, reject) => {
      const id = nextRequest++;
      pending.set(id, { resolve, reject });
      socket.send(JSON.stringify({ type: 'request', id, op, params }));
    });

  const open = (url, hello) =>
    new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { perMessageDeflate: false });
      socket.once('error', reject);
      socket.on('message', (data) => {
        // Before the welcome / request results, frames are the protocol's answers; afterwards events.
        if (socket.control) {
          const frame = JSON.parse(data.toString());
          if (frame.type === 'welcome') {
            socket.control = false;
            return socket.welcomed?.();
          }
          if ((frame.type === 'result' || frame.type === 'error') && pending.has(frame.id)) {
            const { resolve: done, reject: fail } = pending.get(frame.id);
            pending.delete(frame.id);
            if (frame.type === 'result') done(frame.result);
            else fail(new Error(`${frame.code}: ${frame.message}`));
            return;
          }
          if (frame.type !== 'event') return;
        }
        onEvent(data);
      });
      socket.once('open', () => {
        socket.off('error', reject);
        socket.on('error', () => undefined);
        if (!hello) return resolve(socket);
        socket.control = true;
        socket.welcomed = () => resolve(socket);
        socket.send(JSON.stringify({ type: 'hello', protocol: 1, client: 'bench' }));
      });
    });

  /** Runs `task` over every index with at most `width` at a time. */
  const pool = async (count, width, task) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(width, count) }, async () => {
        while (next < count) await task(next++);
      }),
    );
  };

  const subscribeAll = async (domain, name) => {
    await pool(sockets.length, 256, async (i) => {
      const socket = sockets[i];
      socket.control = true;
      await request(socket, 'subscribe', { domain, name });
      socket.control = false;
    });
  };

  let lastReported = -1;
  setInterval(() => {
    if (measure !== 'idle' && total !== lastReported && process.connected) {
      lastReported = total;
      process.send({ progress: total });
    }
  }, 5).unref();

  process.on('message', async (message) => {
    try {
      if (message.cmd === 'connect') {
        const t0 = performance.now();
        measure = message.measure ?? 'idle';
        await pool(message.count, 256, async () => {
          const socket = await open(message.url, message.hello);
          socket.control = false;
          sockets.push(socket);
        });
        if (message.subscribe) await subscribeAll(message.subscribe.domain, message.subscribe.name);
        process.send({ connected: sockets.length, ms: Math.round(performance.now() - t0) });
      } else if (message.cmd === 'subscribe') {
        const t0 = performance.now();
        await subscribeAll(message.domain, message.name);
        process.send({ subscribed: sockets.length, ms: Math.round(performance.now() - t0) });
      } else if (message.cmd === 'reset') {
        total = firstAt = lastAt = checked = bad = samples = 0;
        stampedAfter = message.stampedAfter ?? 0;
        firstBad = undefined;
        lastReported = -1;
        process.send({ reset: true });
      } else if (message.cmd === 'report') {
        const report = { total, firstAt, lastAt, checked, bad, firstBad, sample, cpu: process.cpuUsage() };
        if (measure === 'latency' && samples > 0) {
          const sorted = latencies.slice(0, samples).sort();
          const at = (p) => +sorted[Math.min(samples - 1, Math.floor(p * samples))].toFixed(3);
          report.latency = { samples, p50: at(0.5), p90: at(0.9), p99: at(0.99), p999: at(0.999), max: +sorted[samples - 1].toFixed(3) };
        }
        process.send(report);
      } else if (message.cmd === 'close') {
        for (const socket of sockets) socket.terminate();
        process.exit(0);
      }
    } catch (error) {
      process.send({ error: String(error?.stack ?? error) });
    }
  });
}

if (process.argv[1] === self) await run();
