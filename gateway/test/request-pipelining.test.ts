/**
 * request() in one round trip: the gateway announces welcome.waitsInOrder, registers a request()'s
 * wait in the turn its frame is read, and refuses the publish behind a refused wait with the wait's
 * error, so that the client may send both at once without losing a fast outcome or storing an
 * event nobody waits for.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildOnce, freePort, startGatewayProcess, stop } from '@eventflow/test-support/gateway-process';
import { connect, type Frame } from '@eventflow/test-support/raw-socket';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { createNodeClient } from '@eventflow/node';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const answerOf = (id: number) => (frame: Frame) => (frame.type === 'result' || frame.type === 'error') && frame.id === id;

describe('request() pipelining', () => {
  it('a wait and its publish sent at once: the outcome a consumer publishes at once reaches the wait', async () => {
    h = await startHarness();
    const worker = h.client();
    await worker.consume('orders', 'place', async (event) => {
      await worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id });
    });
    const raw = await connect(h.gateway.url);
    const welcome = raw.frames.find((frame) => frame.type === 'welcome');
    expect(welcome).toMatchObject({ waitsInOrder: true });
    for (let i = 0; i < 20; i++) {
      const id = `evt-${i}`;
      // Both frames in one write: the gateway reads them in one turn.
      const wait = raw.sendRequest('wait', { wait: `w${i}`, domain: 'orders', pid: `p${i}`, names: ['success', 'failed'], request: id });
      const publish = raw.sendRequest('publish', { event: { id, domain: 'orders', name: 'place', pid: `p${i}`, data: {} }, requireConsumer: true });
      expect(await raw.next(answerOf(wait))).toMatchObject({ type: 'result' });
      expect(await raw.next(answerOf(publish))).toMatchObject({ type: 'result', result: { id } });
      expect(await raw.next((frame) => frame.type === 'waited' && frame['wait'] === `w${i}`, 5_000)).toMatchObject({ event: { name: 'success', pid: `p${i}`, rid: id } });
    }
  });

  it('a refused wait refuses the publish behind it with the same code, and nothing is stored', async () => {
    h = await startHarness({ EVENTFLOW_MAX_SUBSCRIPTIONS: '1' });
    const raw = await connect(h.gateway.url);
    expect(await raw.request('subscribe', { domain: 'orders', name: 'placed' })).toMatchObject({ type: 'result' });
    const wait = raw.sendRequest('wait', { wait: 'w1', domain: 'orders', pid: 'p1', names: ['success'], request: 'refused-1' });
    const publish = raw.sendRequest('publish', { event: { id: 'refused-1', domain: 'orders', name: 'place', pid: 'p1', data: {} } });
    const waitAnswer = await raw.next(answerOf(wait));
    expect(waitAnswer).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });
    const publishAnswer = await raw.next(answerOf(publish));
    expect(publishAnswer).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });
    expect(publishAnswer.message).toContain('was not published');
    expect(await raw.request('read', { id: 'refused-1' })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_EVENT_NOT_FOUND' });
    // The refusal is spent: the same id published on its own is stored.
    expect(await raw.request('publish', { event: { id: 'refused-1', domain: 'orders', name: 'place', pid: 'p1', data: {} } })).toMatchObject({ type: 'result' });
  });

  it('client.request() whose wait is refused rejects with the wait\'s code and publishes nothing', async () => {
    h = await startHarness({ EVENTFLOW_MAX_SUBSCRIPTIONS: '1' });
    const worker = h.client();
    await worker.consume('orders', 'place', async () => undefined);
    const client = h.client();
    await client.subscribe('orders', 'placed', () => undefined);
    await expect(client.request({ id: 'never-stored', domain: 'orders', name: 'place', pid: 'p2', data: {} }, { timeout: 5_000 })).rejects.toMatchObject({
      code: 'E_EVENTFLOW_LIMIT_EXCEEDED',
    });
    await expect(client.read('never-stored')).rejects.toMatchObject({ code: 'E_EVENTFLOW_EVENT_NOT_FOUND' });
  });

  it("a request()'s wait is answered together with its publish, in one write after the commit, and the publish's answer with the outcome when it follows at once; a wait with no publish behind it still is", async () => {
    // A gateway process of its own: in this process its writes would all be read in one turn anyway.
    await buildOnce();
    const dir = mkdtempSync(join(tmpdir(), 'eventflow-pipelining-'));
    const port = await freePort();
    const { proc } = await startGatewayProcess(port, join(dir, 'gateway.db'));
    try {
      const raw = await connect(`ws://127.0.0.1:${port}/`);
      // Which read of the socket each answer came in: one write of the gateway is one read here.
      let reads = 0;
      const socket = (raw.ws as unknown as { _socket: Socket })._socket;
      socket.prependListener('data', () => reads++);
      const readOf = new Map<number, number>();
      raw.ws.on('message', (data) => {
        const frame = JSON.parse(String(data)) as Frame;
        if (typeof frame.id === 'number') readOf.set(frame.id, reads);
      });
      for (let i = 0; i < 10; i++) {
        const id = `together-${i}`;
        // In one write, as request() sends them.
        socket.cork();
        const wait = raw.sendRequest('wait', { wait: `t${i}`, domain: 'orders', pid: `q${i}`, names: ['success'], request: id });
        const publish = raw.sendRequest('publish', { event: { id, domain: 'orders', name: 'place', pid: `q${i}`, data: {} } });
        socket.uncork();
        expect(await raw.next(answerOf(wait))).toMatchObject({ type: 'result' });
        expect(await raw.next(answerOf(publish))).toMatchObject({ type: 'result', result: { id } });
        expect(readOf.get(wait)).toBe(readOf.get(publish));
      }
      // With a consumer that answers at once, the publish's answer waits for the outcome and leaves in
      // the same write: one read of the requester's socket for the whole request().
      const worker = createNodeClient(`ws://127.0.0.1:${port}/`, { clientName: 'pipelining-worker' });
      try {
        await worker.consume('orders', 'ask', async (event) => {
          await worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id });
        });
        const waitedRead = new Map<string, number>();
        raw.ws.on('message', (data) => {
          const frame = JSON.parse(String(data)) as Frame;
          if (frame.type === 'waited') waitedRead.set(String(frame['wait']), reads);
        });
        for (let i = 0; i < 10; i++) {
          const id = `answered-${i}`;
          socket.cork();
          raw.sendRequest('wait', { wait: `a${i}`, domain: 'orders', pid: `r${i}`, names: ['success'], request: id });
          const publish = raw.sendRequest('publish', { event: { id, domain: 'orders', name: 'ask', pid: `r${i}`, data: {} }, requireConsumer: true });
          socket.uncork();
          expect(await raw.next((frame) => frame.type === 'waited' && frame['wait'] === `a${i}`, 5_000)).toMatchObject({ event: { name: 'success', rid: id } });
          expect(readOf.get(publish)).toBe(waitedRead.get(`a${i}`));
        }
      } finally {
        await worker.close();
      }
      // A client that waits for the wait's answer before it publishes (no waitsInOrder) gets it.
      expect(await raw.request('wait', { wait: 'alone', domain: 'orders', pid: 'q-alone', names: ['success'], request: 'never-published' })).toMatchObject({ type: 'result' });
      expect(await raw.request('wait', { wait: 'plain', domain: 'orders', pid: 'q-plain', names: ['success'] })).toMatchObject({ type: 'result' });
      raw.ws.close();
    } finally {
      await stop(proc);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
