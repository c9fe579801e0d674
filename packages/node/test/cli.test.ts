import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { startTempGateway } from '@eventflow/test-support/temp-gateway';
import { runCli, usage, type CliIo } from '../src/commands.js';
import { createNodeClient } from '../src/index.js';
import { cliErrorCodes } from '@eventflow/core';
import { WebSocketServer } from 'ws';

let h: Harness;
beforeEach(async () => (h = await startHarness()));
afterEach(async () => h.stop());

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function io(extra: Partial<CliIo> = {}): CliIo & { out: { stdout: string; stderr: string } } {
  const out = { stdout: '', stderr: '' };
  return {
    out,
    stdout: { write: (chunk: string) => (out.stdout += chunk) },
    stderr: { write: (chunk: string) => (out.stderr += chunk) },
    env: { EVENTFLOW_URL: h.gateway.url },
    ...extra,
  };
}

async function cli(...argv: string[]): Promise<Run> {
  const streams = io();
  const code = await runCli(argv, streams);
  return { code, ...streams.out };
}

const lines = (text: string): unknown[] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as unknown);

describe('eventflow CLI', () => {
  it('publish prints the id; read prints the eventlog as JSON lines; state prints the composed state', async () => {
    const first = await cli('publish', 'orders', 'placed', 'o1', '{"amount":3,"items":["a"]}');
    expect(first).toMatchObject({ code: 0, stderr: '' });
    const id = first.stdout.trim();
    expect(await h.gateway.store.read(id)).toMatchObject({ domain: 'orders', name: 'placed', pid: 'o1', data: { amount: 3, items: ['a'] } });

    const second = await cli('publish', '--id', 'fixed-id', '--rid', id, 'orders', 'paid', 'o1', '{"paid":true}');
    expect(second).toMatchObject({ code: 0, stdout: 'fixed-id\n' });
    const third = await cli('publish', 'orders', 'noted', 'o1'); // data is optional
    expect(third.code).toBe(0);

    const read = await cli('read', 'orders', 'o1');
    expect(read.code).toBe(0);
    expect(lines(read.stdout)).toEqual([
      expect.objectContaining({ id, name: 'placed', data: { amount: 3, items: ['a'] }, rid: null }),
      expect.objectContaining({ id: 'fixed-id', name: 'paid', data: { paid: true }, rid: id }),
      expect.objectContaining({ id: third.stdout.trim(), name: 'noted', data: {} }),
    ]);

    const state = await cli('state', 'orders', 'o1');
    expect(state.code).toBe(0);
    expect(lines(state.stdout)).toEqual([{ amount: 3, items: ['a'], paid: true }]);

    const empty = await cli('read', 'orders', 'nobody');
    expect(empty).toMatchObject({ code: 1, stdout: '' });
  });

  it('--url overrides EVENTFLOW_URL', async () => {
    expect((await cli('publish', 'orders', 'placed', 'o1')).code).toBe(0);
    const streams = io({ env: { EVENTFLOW_URL: 'ws://127.0.0.1:1/' } });
    expect(await runCli(['--url', h.gateway.url, 'state', 'orders', 'o1'], streams)).toBe(0);
    expect(streams.out.stdout).toBe('{}\n');
  });

  it('tail prints each routed event as a JSON line until its signal aborts', async () => {
    const controller = new AbortController();
    const streams = io({ signal: controller.signal });
    const tail = runCli(['tail', 'orders'], streams);
    await eventually(() => streams.out.stderr.includes('tailing orders › *'), 5_000, 'tail to subscribe');

    const id = (await cli('publish', 'orders', 'placed', 'o9', '{"n":1}')).stdout.trim();
    await cli('publish', 'billing', 'placed', 'o9'); // another domain: not printed
    await eventually(() => streams.out.stdout.includes(id), 5_000, 'the event to be printed');
    controller.abort();
    expect(await tail).toBe(0);
    expect(lines(streams.out.stdout)).toEqual([expect.objectContaining({ id, domain: 'orders', name: 'placed', pid: 'o9', data: { n: 1 } })]);
    await eventually(() => h.gateway.dispatcher.stats.subscriptions === 0, 2_000, 'the subscription to go');
  });

  it('tail <domain> <name> prints only that name', async () => {
    const controller = new AbortController();
    const streams = io({ signal: controller.signal });
    const tail = runCli(['tail', 'orders', 'paid'], streams);
    await eventually(() => streams.out.stderr.includes('tailing orders › paid'), 5_000, 'tail to subscribe');
    await cli('publish', 'orders', 'placed', 'o9');
    const paid = (await cli('publish', 'orders', 'paid', 'o9')).stdout.trim();
    await eventually(() => streams.out.stdout.includes(paid), 5_000, 'the event to be printed');
    controller.abort();
    expect(await tail).toBe(0);
    expect(lines(streams.out.stdout)).toEqual([expect.objectContaining({ id: paid, name: 'paid' })]);
  });

  it('tail says on stderr when its connection drops and when it is back, and goes on printing after it', async () => {
    const controller = new AbortController();
    const streams = io({ signal: controller.signal });
    const tail = runCli(['tail', 'orders'], streams);
    await eventually(() => streams.out.stderr.includes('tailing orders › *'), 5_000, 'tail to subscribe');
    await h.restart();
    await eventually(() => streams.out.stderr.includes('reconnected; tailing orders › * again'), 10_000, 'tail to reconnect');
    expect(streams.out.stderr).toContain('connection to the gateway lost; reconnecting');
    expect(streams.out.stderr.indexOf('connection to the gateway lost')).toBeLessThan(streams.out.stderr.indexOf('reconnected'));
    const id = (await cli('publish', 'orders', 'placed', 'o9')).stdout.trim();
    await eventually(() => streams.out.stdout.includes(id), 5_000, 'the event to be printed');
    controller.abort();
    expect(await tail).toBe(0);
  });

  // Before: exit 0 with an uncoded note, so a script took a mistyped pid for a process without events.
  it('state and read of a process without events exit 1 with E_EVENTFLOW_PROCESS_NOT_FOUND and what to check, and keep stdout parseable', async () => {
    const expected = 'E_EVENTFLOW_PROCESS_NOT_FOUND: no events for orders › nobody: the process has none (check the domain and pid, e.g. with "eventflow tail orders")\n';
    expect(await cli('state', 'orders', 'nobody')).toEqual({ code: 1, stdout: '{}\n', stderr: expected });
    expect(await cli('read', 'orders', 'nobody')).toEqual({ code: 1, stdout: '', stderr: expected });
    expect(cliErrorCodes).toHaveProperty('E_EVENTFLOW_PROCESS_NOT_FOUND');
    await cli('publish', 'orders', 'placed', 'somebody');
    expect(await cli('state', 'orders', 'somebody')).toMatchObject({ code: 0, stdout: '{}\n', stderr: '' }); // an event with empty data: no message
  });

  it('--help prints usage and exits 0', async () => {
    const run = await cli('--help');
    expect(run).toEqual({ code: 0, stdout: usage, stderr: '' });
    expect(usage).toMatch(/publish <domain> <name> <pid> \[json-data\]/);
  });

  it('--version prints the package version and exits 0', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(await cli('--version')).toEqual({ code: 0, stdout: `eventflow ${version}\n`, stderr: '' });
  });

  it('an unknown command exits 2 with a coded message and the usage', async () => {
    const run = await cli('frobnicate', 'x');
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^E_EVENTFLOW_INVALID_INPUT: unknown command "frobnicate"\n/);
    expect(run.stderr).toContain(usage);
    expect((await cli()).stderr).toMatch(/^E_EVENTFLOW_INVALID_INPUT: no command given/);
  });

  it.each([
    [['publish', 'orders', 'placed', 'o1', '{not json'], /^E_EVENTFLOW_INVALID_INPUT: json-data: not valid JSON/, 1],
    [['publish', 'orders', 'placed', 'o1', '[1,2]'], /^E_EVENTFLOW_INVALID_INPUT: json-data: must be a JSON object.*got an array/, 1],
    [['publish', 'orders', 'placed'], /^E_EVENTFLOW_INVALID_INPUT: publish takes <domain> <name> <pid> \[json-data\], got 2/, 2],
    [['read', 'orders', 'o1', 'extra'], /^E_EVENTFLOW_INVALID_INPUT: read takes <domain> <pid>, got 3/, 2],
    [['read', 'orders', 'x'.repeat(65)], /^E_EVENTFLOW_INVALID_INPUT: pid: must be at most 64 characters/, 1],
    [['state', '--bogus', 'orders', 'o1'], /^E_EVENTFLOW_INVALID_INPUT: Unknown option '--bogus'/, 2],
    [['state', '--url', 'http://localhost/', 'orders', 'o1'], /^E_EVENTFLOW_INVALID_INPUT: url: must start with ws:\/\/ or wss:\/\//, 1],
    [['state', '--timeout', 'soon', 'orders', 'o1'], /^E_EVENTFLOW_INVALID_INPUT: timeout: must be a whole number of ms from 1 to 2147483647, got "soon"/, 1],
    // Read as 16 ms; and past the longest timer the client refused it as "options.requestTimeout", a name the command line does not have.
    [['groups', '--timeout', '0x10'], /^E_EVENTFLOW_INVALID_INPUT: timeout: must be a whole number of ms from 1 to 2147483647, got "0x10"/, 1],
    [['dead-letters', '--timeout', '3000000000'], /^E_EVENTFLOW_INVALID_INPUT: timeout: must be a whole number of ms from 1 to 2147483647, got "3000000000"/, 1],
    // An option of another command was ignored without a word: the command seemed to have used it.
    [['groups', '--limit', '10'], /^E_EVENTFLOW_INVALID_INPUT: groups does not take --limit: it is an option of dead-letters only/, 2],
    [['tail', 'orders', '--id', 'x'], /^E_EVENTFLOW_INVALID_INPUT: tail does not take --id: it is an option of publish only/, 2],
    [['publish', 'orders', 'placed', 'o1', '--sub', 'me'], /^E_EVENTFLOW_INVALID_INPUT: publish does not take --sub: it is an option of token only/, 2],
    // The gateway's page is 1 to 1000: said in the option's words, before connecting.
    [['dead-letters', '--limit', '0'], /^E_EVENTFLOW_INVALID_INPUT: --limit must be a whole number from 1 to 1000, got "0"/, 1],
    [['dead-letters', '--limit', '5000'], /^E_EVENTFLOW_INVALID_INPUT: --limit must be a whole number from 1 to 1000, got "5000"; page on with --offset/, 1],
  ])('bad input %j exits %s with a coded message (2: a bad command line, with the usage)', async (argv, message, code) => {
    const run = await cli(...argv);
    expect(run.code).toBe(code);
    if (code === 2) expect(run.stderr).toContain(usage);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(message);
  });

  it('a gateway error exits 1 with its code', async () => {
    await cli('publish', '--id', 'same', 'orders', 'placed', 'o1', '{"a":1}');
    const run = await cli('publish', '--id', 'same', 'orders', 'placed', 'o1', '{"a":2}');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^E_EVENTFLOW_DUPLICATE_ID: /);
  });

  it('an unreachable gateway exits 1 with E_EVENTFLOW_CONNECTION_FAILED and the cause at once, not after the timeout', async () => {
    const started = Date.now();
    const run = await cli('--url', 'ws://127.0.0.1:1/', '--timeout', '10000', 'state', 'orders', 'o1');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^E_EVENTFLOW_CONNECTION_FAILED: could not connect to ws:\/\/127\.0\.0\.1:1\/: cannot connect to ws:\/\/127\.0\.0\.1:1\/ \(ECONNREFUSED\)/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  // Before: "cannot connect to … (Unexpected server response: 503); is the gateway running?", of a
  // gateway that was running, at its connection limit, and said so in the body of its answer.
  it("a gateway refusing the upgrade (503 at EVENTFLOW_MAX_CONNECTIONS): exit 1 at once with the gateway's code and message", async () => {
    const full = await startTempGateway({ EVENTFLOW_MAX_CONNECTIONS: 1 });
    const holder = createNodeClient(full.gateway.url, { onError: () => undefined });
    try {
      await holder.ready();
      for (const argv of [['groups'], ['dead-letters'], ['dead-letter-requeue', 'e1', 'jobs', 'run'], ['group-delete', 'jobs', 'run']]) {
        const run = await cli('--url', full.gateway.url, ...argv);
        expect(run).toMatchObject({ code: 1, stdout: '' });
        expect(run.stderr).toBe(
          `E_EVENTFLOW_CONNECTION_FAILED: could not connect to ${full.gateway.url}: the gateway at ${full.gateway.url} refused the connection with HTTP 503: ` +
            'E_EVENTFLOW_LIMIT_EXCEEDED: the gateway holds as many connections as it allows; retry later or connect to another gateway (EVENTFLOW_MAX_CONNECTIONS=1)\n',
        );
      }
    } finally {
      await holder.close();
      await full.dispose();
    }
  });

  it('a URL where something else answers HTTP (404): says so and to check the URL, not "is the gateway running?"', async () => {
    const other = createServer((_request, response) => response.writeHead(404, { 'content-type': 'text/plain' }).end('no such page\n'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const url = `ws://127.0.0.1:${(other.address() as AddressInfo).port}/`;
    try {
      const run = await cli('--url', url, 'groups');
      expect(run).toEqual({ code: 1, stdout: '', stderr: `E_EVENTFLOW_CONNECTION_FAILED: could not connect to ${url}: ${url} answered HTTP 404 instead of opening a WebSocket (no such page); is it an eventflow gateway's URL?\n` });
    } finally {
      other.close();
    }
  });

  // Before: "E_EVENTFLOW_REQUEST_TIMEOUT: requeueDeadLetter: no answer from the gateway within 300 ms", which left
  // open whether the dead letter was requeued; run again, the command said "nothing was requeued".
  it.each([
    [['dead-letter-requeue', 'e1', 'jobs', 'run'], 'the dead letter may still have been requeued: check with "eventflow dead-letters jobs" before running it again; '],
    [['dead-letter-discard', 'e1', 'jobs', 'run', 'mail'], 'the dead letter may still have been discarded: check with "eventflow dead-letters jobs" before running it again; '],
    [['group-delete', 'jobs', 'run'], 'the group may still have been deleted: check with "eventflow groups jobs" before running it again; '],
    [['groups'], ''],
    [['publish', '--id', 'order-1', 'orders', 'placed', 'o1'], 'the event may still have been stored: publish it again with --id order-1 (a retry of the same id is never stored twice); '],
  ])('a gateway that does not answer %j within --timeout: exit 1, saying what may have been done and to raise --timeout', async (argv, fate) => {
    // Welcomes the client, then answers nothing (a store that stalls every request).
    const silent = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    silent.on('connection', (socket) => socket.once('message', () => socket.send(JSON.stringify({ type: 'welcome', protocol: 1, connection: 'c1', gateway: 'g1', head: 0, limits: { maxFrameBytes: 1 << 20 } }))));
    await new Promise<void>((resolve) => silent.once('listening', resolve));
    const url = `ws://127.0.0.1:${(silent.address() as AddressInfo).port}/`;
    try {
      const run = await cli('--url', url, '--timeout', '300', ...argv);
      expect(run).toMatchObject({ code: 1, stdout: '' });
      expect(run.stderr).toMatch(/^E_EVENTFLOW_REQUEST_TIMEOUT: \w+( of event order-1)?: no answer from the gateway within 300 ms; the gateway or its store is slow or stalled; /);
      expect(run.stderr.endsWith(`; ${fate}raise --timeout (now 300 ms) to wait longer\n`), run.stderr).toBe(true);
    } finally {
      for (const socket of silent.clients) socket.terminate();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
