/**
 * A delivery frame that splices the data text the store read (encode.ts encodeDelivery,
 * Claimed.dataText) is byte for byte the frame JSON.stringify makes of the same event: on generated
 * events, data of every JSON kind (-0, 2^53, `__proto__` keys, astral and control characters, lone
 * surrogates), with and without rid and trace context, the text exactly what the store keeps
 * (`JSON.stringify(data)`). And end to end: jobs queued on a real gateway's SQLite file, read back by
 * a claim, arrive with their data and trace context as published.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JsonValue, ServerFrame, StoredEvent } from '@eventflow/core';
import { connect } from '@eventflow/test-support/raw-socket';
import { encodeDelivery } from '../src/connection/encode.js';
import { startGateway } from '../src/index.js';
import { mulberry32 } from './fuzz-support.js';

const random = mulberry32(0xda7a);
const int = (max: number): number => Math.floor(random() * max);
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;

/** Lone surrogates and `__proto__` keys too, unless `wellFormed` (a publish refuses both). */
let wellFormed = false;
function text(): string {
  const texts = ['', 'x', '__proto__', 'ü📦', '\u0000\u001f"\\', '\ud83d', 'a\udc00b', '\u2028\u2029', 'a'.repeat(300), String(int(1e9))];
  return pick(wellFormed ? texts.filter((t) => t !== '__proto__' && !/\p{Surrogate}/u.test(t)) : texts);
}

function json(depth: number): JsonValue {
  const roll = int(depth > 0 ? 7 : 5);
  if (roll === 0) return null;
  if (roll === 1) return random() < 0.5;
  if (roll === 2) return pick([0, -0, 1, -1, 1.5, 2 ** 53, -1e308, 1e-300, 5e-324, int(1e9)]);
  if (roll === 3 || roll === 4) return text();
  if (roll === 5) return Array.from({ length: int(4) }, () => json(depth - 1));
  // JSON.parse makes `__proto__` an own key, as a stored event's data has it.
  const record = JSON.parse('{}') as Record<string, JsonValue>;
  for (let i = int(5); i > 0; i--) Object.defineProperty(record, pick(['a', 'constructor', wellFormed ? 'b' : '__proto__', 'toString', '', 'ü📦', text()]), { value: json(depth - 1), enumerable: true, writable: true, configurable: true });
  return record;
}

function trace(event: { traceparent?: string; tracestate?: string }): void {
  if (random() < 0.3) {
    event.traceparent = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
    if (random() < 0.5) event.tracestate = pick(['', 'vendor=abc', 'x'.repeat(512)]);
  }
}

describe('delivery frames with the data text the store read', () => {
  it('are the frames JSON.stringify makes, on 5,000 generated events', () => {
    for (let i = 0; i < 5_000; i++) {
      const dataText = JSON.stringify(json(int(5)));
      // As the SQLite store builds it from its row (statements.ts toStoredEvent), in that key order.
      const event: StoredEvent = { position: 1 + int(2 ** 40), id: text() || 'id', timestamp: new Date(int(2 ** 41)).toISOString(), domain: text(), rid: random() < 0.3 ? text() : null, pid: text(), name: text(), data: JSON.parse(dataText) as JsonValue };
      trace(event);
      const consumer = text();
      const attempt = 1 + int(20);
      expect(encodeDelivery(consumer, 'dl-x', attempt, event, dataText)).toBe(JSON.stringify({ type: 'delivery', consumer, delivery: 'dl-x', attempt, event } satisfies ServerFrame));
    }
  });

  it('without the text, are JSON.stringify of the event in its own key order', () => {
    const event: StoredEvent = { id: 'e1', timestamp: '2026-12-07T00:00:00.000Z', domain: 'd', rid: null, pid: 'p', name: 'n', data: { b: 1, a: [-0, 'ü'] }, position: 7 };
    expect(encodeDelivery('c', 'd1', 2, event)).toBe(JSON.stringify({ type: 'delivery', consumer: 'c', delivery: 'd1', attempt: 2, event }));
  });

  const dir = mkdtempSync(join(tmpdir(), 'eventflow-delivery-frames-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a backlog read back from a SQLite file arrives as it was published', async () => {
    const gateway = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: join(dir, 'jobs.db'), EVENTFLOW_LOG_LEVEL: 'silent' });
    try {
      const conn = await connect(gateway.url);
      // The group exists before the jobs: they are its work, queued in the store until a member has credit.
      expect(await conn.request('consume', { consumer: 'c0', domain: 'work', name: 'job' })).toMatchObject({ type: 'result' });
      expect(await conn.request('removeConsumer', { consumer: 'c0' })).toMatchObject({ type: 'result' });
      wellFormed = true;
      const published = new Map<string, { data: JsonValue; traceparent?: string; tracestate?: string }>();
      for (let i = 0; i < 200; i++) {
        const event: { domain: string; name: string; pid: string; data: JsonValue; traceparent?: string; tracestate?: string } = { domain: 'work', name: 'job', pid: `p${i}`, data: { i, value: json(3), text: text() } };
        trace(event);
        const answer = await conn.request('publish', { event });
        expect(answer, JSON.stringify(answer)).toMatchObject({ type: 'result' });
        published.set((answer.result as { id: string }).id, event);
      }
      expect(await conn.request('consume', { consumer: 'c1', domain: 'work', name: 'job', concurrency: 500 })).toMatchObject({ type: 'result' });
      for (let got = 0; got < 200; got++) {
        const frame = (await conn.next((f) => f.type === 'delivery', 10_000)) as unknown as Extract<ServerFrame, { type: 'delivery' }>;
        const sent = published.get(frame.event.id);
        expect(sent, frame.event.id).toBeDefined();
        expect(frame.event.data).toEqual(JSON.parse(JSON.stringify(sent!.data)));
        expect(frame.event.traceparent).toBe(sent!.traceparent);
        expect(frame.event.tracestate).toBe(sent!.tracestate);
        published.delete(frame.event.id);
      }
      conn.ws.terminate();
    } finally {
      await gateway.close();
    }
  });
});
