/**
 * Fuzz: over 100,000 malformed, truncated, wrong-typed and otherwise bad frames (fuzz-support.ts,
 * seeded) over several real WebSocket connections, plus oversized frames on connections of their
 * own. The gateway must answer every frame with exactly one error frame carrying the predicted
 * catalogue code (and the request id when one was readable), close 1009 on every oversized frame,
 * store nothing, keep serving, and keep its heap flat.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { closeCodes, errorCodes } from '@eventflow/core';
import { operationNames, operations } from '@eventflow/core/protocol';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { connect, type Frame } from '@eventflow/test-support/raw-socket';
import { categories, createGenerator, oversizedFrames, templates, validParams, type Category, type FuzzFrame } from './fuzz-support.js';

const SEED = 0xf022;
const MAX_FRAME_BYTES = 4096;
const CONNECTIONS = 4;
const BATCHES = 5;
const FRAMES_PER_BATCH = 20_000;
const WINDOW = 128;
const OVERSIZED = 60;
const PING_ID = 4_000_000_000;

type Pending = FuzzFrame | { ping: number };

interface FuzzConn {
  ws: WebSocket;
  pending: Pending[];
  answered: number;
  codes: Map<string, number>;
  closedWith?: number;
  onFrame?: () => void;
}

const mismatches: string[] = [];
let mismatchCount = 0;
const mismatch = (text: string): void => {
  mismatchCount++;
  if (mismatches.length < 20) mismatches.push(text);
};

const describeData = (data: string | Buffer): string => (typeof data === 'string' ? JSON.stringify(data.slice(0, 300)) : `<binary ${data.length} bytes>`);

function check(conn: FuzzConn, frame: Frame): void {
  const expected = conn.pending.shift();
  if (expected === undefined) {
    mismatch(`unexpected frame ${JSON.stringify(frame).slice(0, 300)}`);
    return;
  }
  if ('ping' in expected) {
    if (frame.type !== 'result' || frame.id !== expected.ping) mismatch(`expected the ping result, got ${JSON.stringify(frame).slice(0, 300)}`);
    return;
  }
  conn.answered++;
  conn.codes.set(String(frame.code), (conn.codes.get(String(frame.code)) ?? 0) + 1);
  const problems: string[] = [];
  if (frame.type !== 'error') problems.push(`type ${frame.type}`);
  if (typeof frame.code !== 'string' || !Object.hasOwn(errorCodes, frame.code)) problems.push(`code ${frame.code} not in the catalogue`);
  else if (frame.code !== expected.code) problems.push(`code ${frame.code}, expected ${expected.code}`);
  if (expected.id === undefined ? 'id' in frame : frame.id !== expected.id) problems.push(`id ${frame.id}, expected ${expected.id}`);
  if (typeof frame.message !== 'string' || frame.message.length === 0) problems.push('no message');
  if (problems.length > 0) mismatch(`${expected.category} ${describeData(expected.data)} → ${problems.join(', ')}: ${JSON.stringify(frame).slice(0, 300)}`);
}

async function openConn(url: string): Promise<FuzzConn> {
  let conn: FuzzConn | undefined;
  const onFrame = (frame: Frame, isBinary: boolean): void => {
    if (isBinary) mismatch('the gateway sent a binary frame');
    if (!conn) return mismatch(`frame before the connection was ready: ${JSON.stringify(frame).slice(0, 300)}`);
    check(conn, frame);
    conn.onFrame?.();
  };
  const { ws } = await connect(url, { client: 'fuzz', onFrame });
  const opened: FuzzConn = { ws, pending: [], answered: 0, codes: new Map() };
  ws.on('close', (code) => {
    opened.closedWith = code;
    opened.onFrame?.();
  });
  conn = opened;
  return conn;
}

/** Sends `count` frames on `conn`, at most WINDOW unanswered, and resolves once all are answered. */
function pump(conn: FuzzConn, next: () => FuzzFrame, count: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let left = count;
    let last = Date.now();
    const watchdog = setInterval(() => {
      if (Date.now() - last > 5_000) finish(new Error(`no answer for 5 s with ${conn.pending.length} frames unanswered; first: ${describeData((conn.pending[0] as FuzzFrame).data)}`));
    }, 1_000);
    const finish = (error?: Error): void => {
      clearInterval(watchdog);
      conn.onFrame = undefined;
      if (error) reject(error);
      else resolve();
    };
    conn.onFrame = () => {
      last = Date.now();
      if (conn.closedWith !== undefined) return finish(new Error(`connection closed with ${conn.closedWith}`));
      while (left > 0 && conn.pending.length < WINDOW) {
        const frame = next();
        conn.pending.push(frame);
        conn.ws.send(frame.data);
        left--;
      }
      if (left === 0 && conn.pending.length === 0) finish();
    };
    conn.onFrame();
  });
}

async function ping(conn: FuzzConn): Promise<void> {
  conn.pending.push({ ping: PING_ID });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no ping result')), 5_000);
    conn.onFrame = () => {
      if (conn.pending.length === 0) {
        clearTimeout(timer);
        conn.onFrame = undefined;
        resolve();
      }
    };
    conn.ws.send(JSON.stringify({ type: 'request', id: PING_ID, op: 'ping', params: {} }));
  });
}

/** `global.gc`, exposed at runtime when vitest was not started with --expose-gc. */
function findGc(): (() => void) | undefined {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
}

async function settledHeap(gc: (() => void) | undefined): Promise<number> {
  // Time is what is measured here: buffers let go before the heap is read.
  await new Promise((resolve) => setTimeout(resolve, gc ? 50 : 1_000));
  if (gc) {
    gc();
    gc();
  }
  return process.memoryUsage().heapUsed;
}

const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

let h: Harness;

describe('fuzz: 100k bad frames', () => {
  beforeAll(async () => {
    h = await startHarness({
      EVENTFLOW_MAX_FRAME_BYTES: MAX_FRAME_BYTES,
      // Limits are not what is fuzzed here: they must not mask parsing.
      EVENTFLOW_MAX_IN_FLIGHT: 1_000_000,
      EVENTFLOW_MAX_PUBLISH_RATE: 0,
      EVENTFLOW_MAX_RECEIVE_RATE: 0,
    });
  });
  afterAll(async () => h?.stop());

  it('the generator covers every operation with valid templates, and never yields a well-formed request', () => {
    expect(Object.keys(templates).sort()).toEqual([...operationNames].sort());
    for (const op of operationNames) expect(operations[op].params.safeParse(validParams(op)).success, op).toBe(true);
    const generator = createGenerator(SEED + 99, MAX_FRAME_BYTES);
    for (let i = 0; i < 5_000; i++) {
      const frame = generator.next();
      const size = typeof frame.data === 'string' ? Buffer.byteLength(frame.data) : frame.data.length;
      expect(size).toBeLessThan(MAX_FRAME_BYTES);
    }
    expect(Object.values(generator.counts).every((count) => count > 0)).toBe(true);
  });

  it('every frame gets exactly one coded error, oversized frames close 1009, nothing is stored, the heap stays flat', async () => {
    const started = Date.now();
    const headBefore = await h.gateway.store.head();
    expect(headBefore).toBe(0);
    const gc = findGc();

    const conns = await Promise.all(Array.from({ length: CONNECTIONS }, () => openConn(h.gateway.url)));
    const generators = conns.map((_, i) => createGenerator(SEED + i, MAX_FRAME_BYTES));
    const heaps: number[] = [];
    const batchMs: number[] = [];
    for (let batch = 0; batch < BATCHES; batch++) {
      const batchStarted = Date.now();
      await Promise.all(conns.map((conn, i) => pump(conn, () => generators[i]!.next(), FRAMES_PER_BATCH / CONNECTIONS)));
      batchMs.push(Date.now() - batchStarted);
      heaps.push(await settledHeap(gc));
    }

    // Nothing beyond one answer per frame: a ping on each connection is answered next, and nothing follows.
    for (const conn of conns) await ping(conn);
    // A second round trip fences the first: anything sent after the first ping's result comes before the second's.
    for (const conn of conns) await ping(conn);

    // Oversized frames, each on a connection of its own.
    const oversized = oversizedFrames(SEED, MAX_FRAME_BYTES, OVERSIZED);
    const closeCodesSeen: number[] = [];
    for (let i = 0; i < oversized.length; i += 10) {
      const group = oversized.slice(i, i + 10);
      closeCodesSeen.push(
        ...(await Promise.all(
          group.map(async (data) => {
            const conn = await openConn(h.gateway.url);
            const closed = new Promise<number>((resolve) => conn.ws.once('close', (code) => resolve(code)));
            conn.ws.send(data);
            return closed;
          }),
        )),
      );
    }

    const counts = Object.fromEntries(categories.map((category) => [category, generators.reduce((sum, g) => sum + g.counts[category], 0)])) as Record<Category, number>;
    const codes: Record<string, number> = {};
    for (const conn of conns) for (const [code, n] of conn.codes) codes[code] = (codes[code] ?? 0) + n;
    const duration = Date.now() - started;
    console.log(
      `fuzz: ${FRAMES_PER_BATCH * BATCHES} bad frames + ${OVERSIZED} oversized in ${duration} ms over ${CONNECTIONS} connections (window ${WINDOW}); batches (ms) ${batchMs.join(', ')}\n` +
        `  per category: ${JSON.stringify(counts)}\n` +
        `  error codes: ${JSON.stringify(codes)}\n` +
        `  answers per connection: ${conns.map((conn) => conn.answered).join(', ')}\n` +
        `  heapUsed after each 20k batch (${gc ? 'after gc()' : 'after a 1 s settle, no gc'}): ${heaps.map(mib).join(', ')}; growth first→last ${mib(heaps.at(-1)! - heaps[0]!)}; rss ${mib(process.memoryUsage().rss)}\n` +
        `  oversized close codes: ${JSON.stringify(Object.fromEntries([...new Set(closeCodesSeen)].map((code) => [code, closeCodesSeen.filter((c) => c === code).length])))}`,
    );
    if (mismatches.length > 0) console.log(`fuzz mismatches (${mismatchCount}):\n  ${mismatches.join('\n  ')}`);

    expect(mismatchCount).toBe(0);
    for (const conn of conns) {
      expect(conn.answered).toBe((FRAMES_PER_BATCH * BATCHES) / CONNECTIONS);
      expect(conn.closedWith).toBeUndefined();
      expect(conn.ws.readyState).toBe(WebSocket.OPEN);
    }
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(FRAMES_PER_BATCH * BATCHES);
    expect(closeCodesSeen).toEqual(Array(OVERSIZED).fill(1009));
    expect(Object.hasOwn(closeCodes, 1009)).toBe(true);
    // Flat memory: the heap after the last 20k frames is within a bound of the heap after the first 20k.
    expect(heaps.at(-1)! - heaps[0]!).toBeLessThan((gc ? 16 : 64) * 2 ** 20);

    // The gateway is up, stored nothing, and serves a fresh client.
    const health = await fetch(`${h.gateway.httpUrl}healthz`);
    expect(health.status).toBe(200);
    expect(await h.gateway.store.head()).toBe(headBefore);
    expect(await h.gateway.store.readEventlog('orders', 'p1')).toEqual([]);

    const fresh = await connect(h.gateway.url, { hello: false });
    const reply = (predicate: (frame: Frame) => boolean): Promise<Frame> => fresh.next(predicate, 5_000);
    fresh.send({ type: 'hello', protocol: 1, client: 'fuzz-after' });
    expect(await reply((f) => f.type === 'welcome')).toMatchObject({ head: headBefore });
    fresh.send({ type: 'request', id: 1, op: 'publish', params: { event: { id: 'after-fuzz', domain: 'orders', name: 'placed', pid: 'p1', data: { ok: true } } } });
    expect(await reply((f) => f.id === 1)).toMatchObject({ type: 'result', result: { id: 'after-fuzz', position: headBefore + 1 } });
    fresh.send({ type: 'request', id: 2, op: 'read', params: { id: 'after-fuzz' } });
    expect(await reply((f) => f.id === 2)).toMatchObject({ type: 'result', result: { event: { id: 'after-fuzz', data: { ok: true } } } });
    fresh.ws.terminate();
    for (const conn of conns) conn.ws.terminate();
    expect(Date.now() - started).toBeLessThan(90_000);
  }, 120_000);
});
