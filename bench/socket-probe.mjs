// Loaded first (--import) into each process of bench/request-legs.mjs: records every socket read
// and write with its time on one clock for all the processes (performance.timeOrigin + now, in ms),
// its size and, for a write, how long the call took; written to BENCH_SOCKET_PROBE_DIR/<pid>.json
// every second and at exit.
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.BENCH_SOCKET_PROBE_DIR;
if (dir) {
  const origin = performance.timeOrigin;
  const now = () => origin + performance.now();
  /** [time ms, 'R' | 'W', bytes, write call ms] */
  const events = [];
  const write = net.Socket.prototype._writeGeneric;
  net.Socket.prototype._writeGeneric = function (writev, data, encoding, callback) {
    const at = now();
    const result = write.call(this, writev, data, encoding, callback);
    // A corked write of buffers only is handed the buffers themselves, else { chunk, encoding } pairs.
    const bytes = writev ? data.reduce((sum, part) => sum + (part.chunk?.length ?? part.length ?? 0), 0) : data.length;
    events.push([at, 'W', bytes, now() - at]);
    return result;
  };
  const emit = net.Socket.prototype.emit;
  net.Socket.prototype.emit = function (name, ...args) {
    if (name === 'data') events.push([now(), 'R', args[0].length, 0]);
    return emit.call(this, name, ...args);
  };
  const role = process.argv.some((arg) => arg.includes('eventflow-gateway')) ? 'gateway' : process.argv.some((arg) => arg.includes('work-worker')) ? 'worker' : 'requester';
  const save = () => writeFileSync(join(dir, `${process.pid}.json`), JSON.stringify({ role, events }));
  setInterval(save, 1_000).unref();
  process.on('exit', save);
}
