/**
 * A connection can make the gateway log only a few lines, whatever it does: one line per condition
 * with a count ("N more"), not one per frame. Counts the lines a real gateway writes (logDestination,
 * at debug) for a client that stops reading, one that keeps getting refused, and one that sends
 * garbage. The slow client is a transport whose bufferedAmount the test sets and which never
 * answers the close frame (the fault); everything else is real.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createClient } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { connect } from '@eventflow/test-support/raw-socket';
import { StallingTransport } from './stalling-transport.js';

interface Entry {
  level: string;
  msg: string;
  connection?: string;
  condition?: string;
  repeated?: number;
  [key: string]: unknown;
}

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function gateway(lines: string[], settings: Record<string, string | number> = {}): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), 'eventflow-flood-'));
  const started = await startGateway(
    { EVENTFLOW_PORT: 0, EVENTFLOW_SQLITE_PATH: join(dir, 'eventflow.db'), EVENTFLOW_LOG_LEVEL: 'debug', EVENTFLOW_MAX_PUBLISH_RATE: 0, ...settings },
    { logDestination: (line) => lines.push(line) },
  );
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }), () => started.close());
  return started;
}

const parse = (lines: readonly string[]): Entry[] => lines.map((line) => JSON.parse(line) as Entry);

describe('per-connection log lines are one per condition, with a count', () => {
  it('a client that stops reading: one "too slow" line, then a summary when the connection ends', async () => {
    const lines: string[] = [];
    const MAX_BUFFERED = 64 * 1024;
    const gw = await gateway(lines, { EVENTFLOW_MAX_BUFFERED_BYTES: MAX_BUFFERED });
    const slow = new StallingTransport({ answersClose: false });
    const session = gw.accept(slow);
    slow.deliver({ type: 'hello', protocol: 1, client: 'slow' });
    await eventually(() => slow.frames.some((frame) => frame.type === 'welcome'), 10_000, 'welcome');
    slow.deliver({ type: 'request', id: 1, op: 'subscribe', params: { domain: 'feed', name: '*' } });
    await eventually(() => slow.frames.some((frame) => frame.type === 'result'), 10_000, 'subscribed');
    slow.bufferedAmount = MAX_BUFFERED + 1;

    const client = createClient(gw.url, { onError: () => undefined });
    cleanups.push(() => client.close());
    let seen = 0;
    await client.subscribe('feed', '*', () => void seen++);
    for (let start = 0; start < 500; start += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, i) => client.publish({ domain: 'feed', name: 'tick', pid: 'p', data: { n: start + i } })));
    }
    // The fence: the live subscriber has them all, so the slow connection was handed them all too.
    await eventually(() => seen === 500, 30_000, 'every event at the fence');
    expect(slow.closed).toBe(4008);

    const slowLines = (): Entry[] => parse(lines).filter((entry) => entry.connection === session.id && entry.msg.startsWith('client too slow'));
    expect(slowLines()).toHaveLength(1);
    expect(slowLines()[0]).toMatchObject({ level: 'warn', condition: 'slow client' });

    slow.end();
    await session.closed;
    // A connection being closed sends nothing more (session.ts #closing), so the condition does not
    // recur and no summary follows: the one line is all there is.
    expect(slowLines()).toHaveLength(1);
    expect(parse(lines).filter((entry) => entry.connection === session.id).length).toBeLessThan(15);
  }, 120_000);

  it('refusals and bad frames: the first of each in full, the rest counted', async () => {
    const lines: string[] = [];
    const gw = await gateway(lines, { EVENTFLOW_MAX_PUBLISH_RATE: 1, EVENTFLOW_MAX_SUBSCRIPTIONS: 1 });
    const conn = await connect(gw.url, { client: 'looping' });
    cleanups.push(() => conn.ws.terminate());
    const answers = [];
    for (let i = 0; i < 200; i++) answers.push(conn.sendRequest('publish', { event: { domain: 'd', name: 'n', pid: 'p', data: {} } }));
    for (let i = 0; i < 200; i++) conn.sendRaw('not json');
    for (let i = 0; i < 200; i++) answers.push(conn.sendRequest('subscribe', { domain: 'd', name: `n${i}` }));
    for (const id of answers) await conn.answer(id);
    await conn.ping();

    const entries = parse(lines).filter((entry) => entry.connection !== undefined && entry.msg !== 'client connected');
    const count = (prefix: string): number => entries.filter((entry) => entry.msg.startsWith(prefix)).length;
    expect(count('request refused: publish rate limit reached')).toBe(1);
    expect(count('request refused: connection limit reached')).toBe(1);
    expect(count('error sent')).toBeLessThanOrEqual(2);
    expect(entries.length).toBeLessThan(10);

    conn.ws.close();
    await eventually(() => parse(lines).some((entry) => entry.msg === 'client disconnected'), 10_000, 'the disconnect');
    const summaries = parse(lines).filter((entry) => entry.repeated !== undefined);
    expect(summaries.find((entry) => entry.condition === 'refused: E_EVENTFLOW_RATE_LIMITED')?.repeated).toBeGreaterThan(150);
    expect(summaries.find((entry) => entry.condition === 'refused: E_EVENTFLOW_LIMIT_EXCEEDED')?.repeated).toBe(198);
    expect(summaries.find((entry) => entry.condition === 'error sent: E_EVENTFLOW_INVALID_FRAME')?.repeated).toBe(199);
  }, 60_000);

  it('refused upgrades (no connection yet): the first in full, the rest counted until the gateway stops', async () => {
    const lines: string[] = [];
    const gw = await gateway(lines);
    for (let i = 0; i < 50; i++) {
      const ws = new WebSocket(gw.url, { origin: 'https://evil.example' });
      ws.on('error', () => undefined);
      const status = await new Promise<number>((resolve) => ws.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0)));
      ws.terminate();
      expect(status).toBe(403);
    }
    const refused = (): Entry[] => parse(lines).filter((entry) => entry.msg.startsWith('websocket upgrade refused'));
    expect(refused()).toHaveLength(1);
    await gw.close();
    expect(refused().map((entry) => entry.repeated)).toEqual([undefined, 49]);
  });
});
