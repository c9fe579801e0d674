// Loaded first (--import) into each process of bench/steady-legs.mjs: records, on the clock every
// process of the machine shares (process.hrtime, CLOCK_MONOTONIC, as the jobs' `t`), where each job
// (its `"seq":N,"t":T` in the frames) passes: the publisher encodes it (S); the gateway parses its
// publish (P) and writes its delivery (W, the gateway's writes are not masked); a worker reads the
// delivery (R). Every other socket write is recorded too (w), and the publisher's and the gateway's
// reads (r). Written to BENCH_SEQ_PROBE_DIR/<role>-<pid>.json at exit.
// A probe, not a measure: hooking JSON and the sockets costs a few µs a frame.
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.BENCH_SEQ_PROBE_DIR;
if (dir) {
  const now = () => Number(process.hrtime.bigint()) / 1e6;
  const role = process.argv.some((arg) => arg.includes('eventflow-gateway')) ? 'gateway' : process.argv.some((arg) => arg.includes('work-worker')) ? 'worker' : 'publisher';
  /** [time ms, kind, seq (-1: a frame without a job), the job's t in ms] */
  const events = [];
  const jobs = /"seq":(\d+),"t":(\d+)/g;
  const scan = (text, kind, at) => {
    jobs.lastIndex = 0;
    for (let match; (match = jobs.exec(text)); ) events.push([at, kind, Number(match[1]), Number(match[2]) / 1e6]);
  };
  const write = net.Socket.prototype._writeGeneric;
  net.Socket.prototype._writeGeneric = function (writev, data, encoding, callback) {
    const at = now();
    const result = write.call(this, writev, data, encoding, callback);
    const found = events.length;
    if (role === 'gateway') for (const part of writev ? data.map((entry) => entry.chunk ?? entry) : [data]) scan(typeof part === 'string' ? part : Buffer.from(part).toString('latin1'), 'W', at);
    if (events.length === found) events.push([at, 'w', -1, 0]);
    return result;
  };
  const emit = net.Socket.prototype.emit;
  net.Socket.prototype.emit = function (name, ...args) {
    if (name === 'data') {
      if (role === 'worker') scan(args[0].toString('latin1'), 'R', now());
      else events.push([now(), 'r', -1, 0]);
    }
    return emit.call(this, name, ...args);
  };
  // The client's frames are masked on the wire: the publisher's encoding and the gateway's parse see them whole.
  const { parse, stringify } = JSON;
  if (role === 'gateway') JSON.parse = (text, reviver) => (typeof text === 'string' && text.includes('"seq":') && scan(text, 'P', now()), parse(text, reviver));
  if (role === 'publisher') {
    JSON.stringify = (value, replacer, space) => {
      const text = stringify(value, replacer, space);
      if (typeof text === 'string' && text.includes('"seq":')) scan(text, 'S', now());
      return text;
    };
  }
  process.on('exit', () => writeFileSync(join(dir, `${role}-${process.pid}.json`), stringify({ role, events })));
}
