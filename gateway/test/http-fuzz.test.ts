/**
 * HTTP fuzz: thousands of random and malformed request lines, methods, targets, headers, bodies
 * and WebSocket upgrade requests, written raw over TCP (node:net) to a real gateway, seeded so that
 * a failing run replays. No request may end the process or disturb another connection: a
 * WebSocket client connected before the fuzz and one connected after both keep doing publish →
 * subscribe round trips, interleaved with the fuzz. Malformed input is never a 5xx (that would be
 * a handler failing inside the gateway, caught only by the last-resort boundary). Then the
 * targeted cases: request-targets the WHATWG URL parser rejects, which made the process exit.
 */
import { createServer } from 'node:http';
import { connect as netConnect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventflowClient, StoredEvent } from '@eventflow/core';
import { createLogger } from '../src/index.js';
import { guardClientErrors, guardRequest, guardUpgrade } from '../src/server/http-guard.js';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { mulberry32 } from './fuzz-support.js';

const SEED = 0x4774;
const REQUESTS = 3_000;
const CONCURRENCY = 16;
/** A request whose answer has not come by then is cut by the test (e.g. headers never finished). */
const SOCKET_DEADLINE_MS = 3_000;

interface Answer {
  /** The status of the first response, or undefined when the gateway closed without one. */
  status: number | undefined;
  /** The gateway closed (or reset) the socket; false when the test cut it at the deadline. */
  closedByGateway: boolean;
  text: string;
}

/**
 * Writes `chunks` raw to the gateway (then half-closes unless `keepOpen`) and collects what comes
 * back: until the gateway closes, or with `keepOpen` until a response head is in (unless `untilClose`).
 */
function sendRaw(port: number, chunks: Array<string | Buffer>, keepOpen = false, untilClose = false, deadline = SOCKET_DEADLINE_MS): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = netConnect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let settled = false;
    const finish = (closedByGateway: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(received).toString('latin1');
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: match ? Number(match[1]) : undefined, closedByGateway, text });
    };
    const timer = setTimeout(() => finish(false), deadline);
    socket.on('data', (data) => {
      received.push(data);
      // A socket left open (an upgrade) is done once a response head is in.
      if (keepOpen && !untilClose && Buffer.concat(received).includes('\r\n\r\n')) finish(false);
    });
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
      if (!keepOpen) socket.end();
    });
  });
}

// ── the generator ──

type Random = () => number;
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
const chance = (random: Random, p: number): boolean => random() < p;

/** Fragments of request-targets, including every kind the WHATWG URL parser rejects. */
const targetFragments = [
  '/', '/healthz', '/readyz', '/metrics', '/index.html', '/assets/x.js', '/?token=abc', '/#frag', '*', '',
  '//[', 'http://[', '//[::1', 'http://[::1', 'http://[::1]:80/healthz', '//[zz]/', 'https://[', 'ws://[', 'http://[1:2:3]/',
  'http://a:99999/', 'http://a:-1/', 'http://a:b/', 'http://a:65536/healthz', 'http://%zz/', 'http://ex%ample.com/', 'http://%00/',
  'http://user:pass@[:80/', 'http://', 'https://', 'http:', '//', '///', '////a', 'file:///etc/passwd', 'javascript:alert(1)',
  '/%', '/%zz', '/%00', '/%c0%af', '/%ff%fe', '/%2e%2e/%2e%2e/etc/passwd', '/..%2f..%2f', '/../../etc/passwd', '\\\\', '/\\..\\..',
  '/\u00e9', '/\u2028', '/\x7f', '/\x01', 'a', '?', '#', '%', '[', ']', ':', '@', 'http://xn--/', 'http://1.2.3.4.5/', 'http://0x100000000/',
];
const methods = ['GET', 'GET', 'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'CONNECT', 'TRACE', 'PRI', 'get', 'G ET', 'GET\t', '', 'M-SEARCH', 'PROPFIND', 'X'.repeat(300), '\x00'];
const versions = ['HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/0.9', 'HTTP/2.0', 'HTTP/1.1x', 'http/1.1', 'HTTP/9.9', '', 'HTTP/1.1 extra'];
const hosts = ['127.0.0.1', 'localhost:8080', '[', '[::1', '[::1]', ':::', 'a:b:c', '%zz', '', 'x'.repeat(2000), 'evil.example'];
const origins = ['null', 'http://[', 'http://localhost:99999', '%', 'http://localhost:5173', 'http://127.0.0.1', 'http://[::1]:3000', 'https://evil.example', '', 'http://localhost:5173/path', 'ws://[::1', '\u00e9'];
const wsKeys = ['dGhlIHNhbXBsZSBub25jZQ==', 'AAAAAAAAAAAAAAAAAAAAAA==', 'not-base64', '', '=', 'dGhlIHNhbXBsZSBub25jZQ==, dGhlIHNhbXBsZSBub25jZQ=='];
const lineEnds = ['\r\n', '\r\n', '\r\n', '\r\n', '\n', '\r'];

function randomText(random: Random, max: number): string {
  let text = '';
  const length = Math.floor(random() * max);
  for (let i = 0; i < length; i++) {
    const roll = random();
    text += String.fromCharCode(roll < 0.8 ? 0x21 + Math.floor(random() * 94) : roll < 0.95 ? Math.floor(random() * 0x20) : 0x80 + Math.floor(random() * 0x780));
  }
  return text;
}

function target(random: Random): string {
  const roll = random();
  if (roll < 0.6) return pick(random, targetFragments);
  if (roll < 0.85) return pick(random, targetFragments) + pick(random, targetFragments) + (chance(random, 0.5) ? pick(random, targetFragments) : '');
  if (roll < 0.95) return `/${randomText(random, 40)}`;
  return `/${'a'.repeat(Math.floor(random() * 20_000))}`;
}

function headers(random: Random, upgrade: boolean): string[] {
  const lines: string[] = [];
  if (chance(random, 0.9)) lines.push(`Host: ${chance(random, 0.8) ? '127.0.0.1' : pick(random, hosts)}`);
  if (chance(random, 0.05)) lines.push(`Host: ${pick(random, hosts)}`);
  if (upgrade) {
    if (chance(random, 0.9)) lines.push(`Upgrade: ${pick(random, ['websocket', 'websocket', 'WebSocket', 'h2c', '', randomText(random, 10)])}`);
    if (chance(random, 0.9)) lines.push(`Connection: ${pick(random, ['Upgrade', 'Upgrade', 'upgrade, keep-alive', 'close', ''])}`);
    if (chance(random, 0.9)) lines.push(`Sec-WebSocket-Key: ${pick(random, wsKeys)}`);
    if (chance(random, 0.05)) lines.push(`Sec-WebSocket-Key: ${pick(random, wsKeys)}`);
    if (chance(random, 0.9)) lines.push(`Sec-WebSocket-Version: ${pick(random, ['13', '13', '8', '', 'abc', '13, 8'])}`);
    if (chance(random, 0.2)) lines.push(`Sec-WebSocket-Protocol: ${pick(random, ['eventflow', '', ',,,', randomText(random, 20)])}`);
    if (chance(random, 0.2)) lines.push(`Sec-WebSocket-Extensions: ${pick(random, ['permessage-deflate', 'permessage-deflate; client_max_window_bits=abc', 'x; y="', randomText(random, 20)])}`);
  } else if (chance(random, 0.2)) {
    lines.push(`Connection: ${pick(random, ['keep-alive', 'close', 'Upgrade'])}`);
  }
  if (chance(random, 0.3)) lines.push(`Origin: ${pick(random, origins)}`);
  if (chance(random, 0.2)) lines.push(`Content-Length: ${pick(random, ['0', '5', '-1', '99999999999999999999', 'abc', '1, 2', ' 3'])}`);
  if (chance(random, 0.1)) lines.push(`Transfer-Encoding: ${pick(random, ['chunked', 'gzip, chunked', 'identity', 'chunked, chunked', randomText(random, 8)])}`);
  if (chance(random, 0.05)) lines.push(`Expect: ${pick(random, ['100-continue', 'garbage'])}`);
  const extra = Math.floor(random() * 4);
  for (let i = 0; i < extra; i++) {
    const roll = random();
    if (roll < 0.4) lines.push(`X-${randomText(random, 12)}: ${randomText(random, 40)}`);
    else if (roll < 0.6) lines.push(randomText(random, 30)); // no colon, bad name characters
    else if (roll < 0.7) lines.push(` folded ${randomText(random, 10)}`); // obs-fold
    else if (roll < 0.8) lines.push(`X-Long: ${'v'.repeat(Math.floor(random() * 40_000))}`); // sometimes over the header limit (431)
    else if (roll < 0.9) lines.push(`X-Nul: a\x00b`);
    else lines.push(`: empty-name`);
  }
  return lines;
}

/** Methods and versions Node's parser accepts, so that the request reaches the gateway's handlers. */
const cleanMethods = ['GET', 'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH'];

/** A request Node's HTTP parser accepts (valid framing, printable header values): only its target and values are hostile. */
function cleanRequest(random: Random): string {
  const upgrade = chance(random, 0.4);
  const lines = [`${upgrade ? 'GET' : pick(random, cleanMethods)} ${target(random).replace(/[\s\x00-\x1f\x7f-\uffff]/g, '')} HTTP/1.1`, 'Host: 127.0.0.1'];
  if (upgrade) lines.push('Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Key: ${pick(random, wsKeys)}`, `Sec-WebSocket-Version: ${pick(random, ['13', '13', '8'])}`);
  if (chance(random, 0.5)) lines.push(`Origin: ${pick(random, origins).replace(/[^\x20-\x7e]/g, '')}`);
  if (chance(random, 0.3)) lines.push(`X-Forwarded-For: ${pick(random, hosts).slice(0, 100)}`);
  if (chance(random, 0.3)) lines.push(`Cookie: ${pick(random, targetFragments)}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** One fuzz request: its bytes in one to three writes, and whether to leave the socket open after writing. */
function fuzzRequest(random: Random): { chunks: string[]; keepOpen: boolean } {
  const upgrade = chance(random, 0.35);
  const method = upgrade && chance(random, 0.8) ? 'GET' : pick(random, methods);
  const end = pick(random, lineEnds);
  let request: string;
  if (chance(random, 0.5)) {
    request = cleanRequest(random);
  } else if (chance(random, 0.03)) {
    request = randomText(random, 300); // not HTTP at all
  } else {
    const line = chance(random, 0.05) ? `${method} ${target(random)}` : `${method} ${target(random)} ${pick(random, versions)}`;
    request = [line, ...headers(random, upgrade)].join(end) + end + end;
    if (chance(random, 0.15)) request += randomText(random, 200); // a body, or the start of WebSocket frames after an upgrade
    if (chance(random, 0.05)) request += request; // pipelined
    if (chance(random, 0.05)) request = request.slice(0, Math.floor(random() * request.length)); // truncated
  }
  const chunks: string[] = [];
  const cuts = Math.floor(random() * 3);
  let rest = request;
  for (let i = 0; i < cuts && rest.length > 1; i++) {
    const at = 1 + Math.floor(random() * (rest.length - 1));
    chunks.push(rest.slice(0, at));
    rest = rest.slice(at);
  }
  chunks.push(rest);
  return { chunks, keepOpen: chance(random, 0.05) };
}

// ── the well-behaved client ──

let h: Harness;
let before: EventflowClient;
let seen = new Map<string, (event: StoredEvent) => void>();
let roundTrips = 0;
/** Exceptions nothing caught: in a gateway process each of them would have ended it. */
const uncaught: unknown[] = [];
const onUncaught = (error: unknown): void => void uncaught.push(error);

/** Publishes with `client` and waits for `before`'s subscription to deliver that very event. */
async function roundTrip(client: EventflowClient): Promise<void> {
  const pid = `rt-${roundTrips++}`;
  const delivered = new Promise<StoredEvent>((resolve) => seen.set(pid, resolve));
  await client.publish({ domain: 'fuzz', name: 'ping', pid, data: { n: roundTrips } });
  const event = await delivered;
  expect(event.pid).toBe(pid);
}

beforeAll(async () => {
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
  before = h.client();
  seen = new Map();
  await before.subscribe('fuzz', 'ping', (event) => seen.get(event.pid)?.(event));
  await roundTrip(before);
});

afterAll(async () => {
  process.off('uncaughtException', onUncaught);
  process.off('unhandledRejection', onUncaught);
  await h?.stop();
});

describe('HTTP fuzz: no request line, method, target, header or upgrade ends the gateway or disturbs a client', () => {
  it(`${REQUESTS} seeded random and malformed requests over raw TCP`, { timeout: 180_000 }, async () => {
    const random = mulberry32(SEED);
    const requests = Array.from({ length: REQUESTS }, () => fuzzRequest(random));
    const statuses = new Map<string, number>();
    const serverErrors: string[] = [];
    let next = 0;
    let done = 0;
    const worker = async (): Promise<void> => {
      while (next < requests.length) {
        const index = next++;
        const request = requests[index] as { chunks: string[]; keepOpen: boolean };
        const answer = await sendRaw(h.gateway.port, request.chunks, request.keepOpen);
        const key = answer.status === undefined ? (answer.closedByGateway ? 'closed' : 'cut') : String(answer.status);
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        if (answer.status !== undefined && answer.status >= 500) serverErrors.push(`#${index} ${answer.status}: ${JSON.stringify(request.chunks.join('').slice(0, 200))}`);
        if (++done % 500 === 0) await roundTrip(before); // the client connected before keeps working meanwhile
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    console.log(`http fuzz: ${REQUESTS} requests, answers ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`);
    expect(uncaught.map(String)).toEqual([]);
    expect(serverErrors).toEqual([]);
    // Both kinds reached the gateway: refusals by Node's parser or the gateway, and requests it served.
    expect(statuses.get('400') ?? 0).toBeGreaterThan(REQUESTS / 10);
    expect((statuses.get('101') ?? 0) + (statuses.get('200') ?? 0) + (statuses.get('404') ?? 0)).toBeGreaterThan(REQUESTS / 20);

    // The client connected before and a new one both still work.
    await roundTrip(before);
    const after = h.client();
    await roundTrip(after);
    const health = await fetch(`${h.gateway.httpUrl}healthz`);
    expect(health.status).toBe(200);
  });
});

describe('request-targets the WHATWG URL parser rejects (these made the process exit)', () => {
  const crashers = ['//[', 'http://[', '//[::1', 'http://[::1', 'http://a:99999/', 'http://a:b/', 'http://%zz/', 'http://ex%ample.com/', 'https://[/healthz', 'http://user@[/'];

  it.each(crashers)('GET %s → 400, and the gateway goes on', async (bad) => {
    const answer = await sendRaw(h.gateway.port, [`GET ${bad} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`]);
    expect(answer.status, answer.text.slice(0, 200)).toBe(400);
    expect(uncaught.map(String)).toEqual([]);
    await roundTrip(before);
  });

  it.each(crashers)('HEAD and POST %s → 400', async (bad) => {
    expect((await sendRaw(h.gateway.port, [`HEAD ${bad} HTTP/1.1\r\nHost: x\r\n\r\n`])).status).toBe(400);
    expect((await sendRaw(h.gateway.port, [`POST ${bad} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}`])).status).toBe(400);
  });

  it.each(crashers)('a WebSocket upgrade to %s is answered (opened or refused) and the socket does not hang', async (bad) => {
    const answer = await sendRaw(
      h.gateway.port,
      [`GET ${bad} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`],
      true,
    );
    // Upgrades are accepted on any path (the target is never parsed); what matters is an answer.
    expect([101, 400]).toContain(answer.status);
    await roundTrip(before);
  });

  it('bad upgrades (bad Origin, key, version) are refused with 4xx and their socket is closed', async () => {
    const upgrade = (lines: string[]): Promise<Answer> =>
      sendRaw(h.gateway.port, [['GET / HTTP/1.1', 'Host: 127.0.0.1', 'Upgrade: websocket', 'Connection: Upgrade', ...lines, '', ''].join('\r\n')], true, true);
    for (const origin of ['http://[', 'http://localhost:99999', '%', 'null']) {
      const answer = await upgrade([`Origin: ${origin}`, 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13']);
      expect(answer.status, origin).toBe(403);
      expect(answer.closedByGateway).toBe(true);
    }
    for (const lines of [['Sec-WebSocket-Key: nope', 'Sec-WebSocket-Version: 13'], ['Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 99'], []]) {
      const answer = await upgrade(lines);
      expect(answer.status, lines.join()).toBeGreaterThanOrEqual(400);
      expect(answer.status, lines.join()).toBeLessThan(500);
      expect(answer.closedByGateway).toBe(true);
    }
    await roundTrip(before);
  });
});

describe('the last-resort boundary (http-guard.ts): a handler that throws costs one 500, not the process', () => {
  it('sync and async request-handler failures → 500 and a log line; an upgrade-handler failure → 500 and the socket closed', async () => {
    const lines: Array<{ msg: string }> = [];
    const log = createLogger('error', {}, (line) => lines.push(JSON.parse(line) as { msg: string }));
    const server = createServer(
      guardRequest(log, (request) => {
        if (request.url === '/sync') throw new Error('boom');
        return Promise.reject(new Error('async boom'));
      }),
    );
    server.on('upgrade', guardUpgrade(log, () => { throw new Error('upgrade boom'); }));
    guardClientErrors(server, log);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      expect((await sendRaw(port, ['GET /sync HTTP/1.1\r\nHost: x\r\n\r\n'])).status).toBe(500);
      expect((await sendRaw(port, ['GET /async HTTP/1.1\r\nHost: x\r\n\r\n'])).status).toBe(500);
      const upgrade = await sendRaw(port, ['GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'], true, true);
      expect(upgrade.status).toBe(500);
      expect(upgrade.closedByGateway).toBe(true);
      expect((await sendRaw(port, ['NOT HTTP\r\n\r\n'])).status).toBe(400);
      expect(lines.map((line) => line.msg)).toEqual(['http request handler failed', 'http request handler failed', 'websocket upgrade handler failed']);
      expect(uncaught.map(String)).toEqual([]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
