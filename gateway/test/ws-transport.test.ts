/**
 * WsTransport's writes at the end of a tick: each connection's frames in one write, and the
 * connections holding a frame another party waits on (a delivery, an event, a wait's outcome)
 * written before those holding only answers to their own requests.
 */
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import type { WebSocket } from 'ws';
import { describe, expect, it } from 'vitest';
import { WsTransport } from '../src/server/ws-transport.js';

/** A `ws` socket as WsTransport uses it, over a raw stream whose writes are recorded as they leave the cork. */
function connection(name: string, written: string[]): WsTransport {
  const raw = new PassThrough();
  const rawWrite = raw._write.bind(raw);
  const rawWritev = raw._writev?.bind(raw);
  raw._write = (chunk, encoding, callback) => {
    written.push(`${name}:${String(chunk)}`);
    rawWrite(chunk, encoding, callback);
  };
  raw._writev = (chunks, callback) => {
    written.push(`${name}:${chunks.map(({ chunk }) => String(chunk)).join('+')}`);
    if (rawWritev) rawWritev(chunks, callback);
    else callback();
  };
  raw.resume();
  const socket = Object.assign(new EventEmitter(), {
    OPEN: 1,
    readyState: 1,
    extensions: '',
    bufferedAmount: 0,
    send: (frame: string) => void raw.write(frame),
  });
  return new WsTransport(socket as unknown as WebSocket, raw);
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('WsTransport writes', () => {
  it('writes the connections with a frame others wait on first, each connection once, its frames in order', async () => {
    const written: string[] = [];
    const publisher = connection('publisher', written);
    const worker = connection('worker', written);
    const requester = connection('requester', written);
    // One tick: the publisher's answer, a delivery to the worker, and the requester's answer followed by its outcome.
    publisher.send('result');
    worker.send('delivery', true);
    requester.send('result');
    requester.send('waited', true);
    expect(written).toEqual([]);
    await tick();
    expect(written).toEqual(['worker:delivery', 'requester:result+waited', 'publisher:result']);
  });

  it('writes a frame sent after the tick in a write of its own', async () => {
    const written: string[] = [];
    const client = connection('client', written);
    client.send('a');
    await tick();
    client.send('b', true);
    await tick();
    expect(written).toEqual(['client:a', 'client:b']);
  });
});
