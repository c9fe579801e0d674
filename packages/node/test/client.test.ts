import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { createNodeClient, EventflowClient, type EventMap } from '../src/index.js';
import { closeOnSignals, REPEAT_MS, type SignalHost } from '../src/signals.js';
import { PublishedView } from './helpers.js';

let h: Harness;
let view: PublishedView;
const clients: Array<EventflowClient<EventMap>> = [];

function client(options: Parameters<typeof createNodeClient>[1] = {}): EventflowClient {
  const created = createNodeClient(h.gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined, ...options });
  clients.push(created);
  return created;
}

beforeEach(async () => {
  h = await startHarness();
  view = new PublishedView(h.dbPath);
});
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  view.close();
  await h.stop();
});

/** A consumer whose handler takes 300 ms; resolves once the handler has started. */
async function slowConsumer(worker: EventflowClient) {
  const log: string[] = [];
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  await worker.consume('jobs', 'run', async () => {
    log.push('start');
    started();
    await sleep(300); // the handler's own work: time is what the drain waits out
    log.push('end');
  });
  const id = await client().publish({ domain: 'jobs', name: 'run', pid: 'j1' });
  await running;
  return { id, log };
}

describe('createNodeClient', () => {
  it('is a core client over WebSocket', async () => {
    const c = client();
    expect(c).toBeInstanceOf(EventflowClient);
    await c.ready();
    const id = await c.publish({ domain: 'orders', name: 'placed', pid: 'p1', data: { a: 1 } });
    expect(await c.read(id)).toMatchObject({ id, data: { a: 1 } });
    expect(await c.readEventlogState('orders', 'p1')).toEqual({ a: 1 });
  });

  it('accepts a URL object', async () => {
    const c = client();
    const d = createNodeClient(new URL(h.gateway.url), { onError: () => undefined });
    clients.push(d);
    await Promise.all([c.ready(), d.ready()]);
    expect(d.state).toBe('open');
  });

  it('close() lets an in-flight handler finish; the event ends success', async () => {
    const worker = client();
    const { id, log } = await slowConsumer(worker);
    const closing = worker.close();
    expect(log).toEqual(['start']);
    await closing;
    expect(log).toEqual(['start', 'end']);
    expect(worker.state).toBe('closed');
    expect(await view.outcome(id)).toBe('success');
  });

  it('close() passes its options to the core client (drainTimeout)', async () => {
    const worker = client();
    const { log } = await slowConsumer(worker);
    const started = Date.now();
    await worker.close({ drainTimeout: 50 });
    expect(Date.now() - started).toBeLessThan(250);
    expect(log).toEqual(['start']);
  });

  it('closeOnSignals installs SIGINT/SIGTERM listeners and close() removes them', async () => {
    const before = { int: process.listenerCount('SIGINT'), term: process.listenerCount('SIGTERM'), hup: process.listenerCount('SIGHUP') };
    const a = client({ closeOnSignals: true });
    const b = client({ closeOnSignals: ['SIGHUP'] });
    // One listener per signal, however many clients ask for it.
    const c = client({ closeOnSignals: true });
    expect(process.listenerCount('SIGINT')).toBe(before.int + 1);
    expect(process.listenerCount('SIGTERM')).toBe(before.term + 1);
    expect(process.listenerCount('SIGHUP')).toBe(before.hup + 1);
    await Promise.all([a.close(), c.close()]);
    expect(process.listenerCount('SIGINT')).toBe(before.int);
    expect(process.listenerCount('SIGTERM')).toBe(before.term);
    await b.close();
    expect(process.listenerCount('SIGHUP')).toBe(before.hup);
    expect(() => createNodeClient(h.gateway.url, { closeOnSignals: ['nope' as NodeJS.Signals] })).toThrow(/closeOnSignals/);
  });
});

describe('closeOnSignals', () => {
  class FakeProcess extends EventEmitter implements SignalHost {
    readonly exit = vi.fn<(code: number) => void>();
    clock = 0;
    now(): number {
      return this.clock;
    }
  }

  it('on SIGTERM closes every registered client after its in-flight handler, then exits 0', async () => {
    const host = new FakeProcess();
    const worker = client();
    const idle = client();
    closeOnSignals(worker, ['SIGINT', 'SIGTERM'], host);
    closeOnSignals(idle, ['SIGINT'], host);
    const { id, log } = await slowConsumer(worker);

    host.emit('SIGTERM', 'SIGTERM');
    await sleep(50); // time is what is tested: 50 ms into the 300 ms handler, no exit yet
    expect(host.exit).not.toHaveBeenCalled(); // still draining
    expect(log).toEqual(['start']);
    await eventually(() => host.exit.mock.calls.length > 0, 2_000, 'exit');
    expect(host.exit).toHaveBeenCalledWith(0);
    expect(log).toEqual(['start', 'end']);
    expect(worker.state).toBe('closed');
    expect(idle.state).toBe('closed');
    expect(await view.outcome(id)).toBe('success');
    expect(host.listenerCount('SIGINT') + host.listenerCount('SIGTERM')).toBe(0);
  });

  it('a second signal during the drain exits 1 at once', async () => {
    const host = new FakeProcess();
    const worker = client();
    closeOnSignals(worker, ['SIGINT'], host);
    await slowConsumer(worker);
    host.emit('SIGINT', 'SIGINT');
    host.clock += REPEAT_MS;
    host.emit('SIGINT', 'SIGINT');
    expect(host.exit).toHaveBeenCalledWith(1);
  });

  it('the same signal twice within REPEAT_MS (a terminal\'s Ctrl-C and npm forwarding it) is one stop: the drain finishes and exits 0', async () => {
    const host = new FakeProcess();
    const worker = client();
    closeOnSignals(worker, ['SIGINT', 'SIGTERM'], host);
    const { id, log } = await slowConsumer(worker);
    host.emit('SIGINT', 'SIGINT');
    host.clock += REPEAT_MS - 1;
    host.emit('SIGINT', 'SIGINT');
    host.emit('SIGTERM', 'SIGTERM');
    expect(host.exit).not.toHaveBeenCalled();
    await eventually(() => host.exit.mock.calls.length > 0, 2_000, 'exit');
    expect(host.exit.mock.calls).toEqual([[0]]);
    expect(log).toEqual(['start', 'end']);
    expect(await view.outcome(id)).toBe('success');
  });

  it('the returned function unregisters the client', () => {
    const host = new FakeProcess();
    const release = closeOnSignals(client(), ['SIGINT'], host);
    expect(host.listenerCount('SIGINT')).toBe(1);
    release();
    expect(host.listenerCount('SIGINT')).toBe(0);
  });
});

describe('features', () => {
  it('createNodeClient consumes and waits by default (also with features: undefined); features: [] leaves them out', async () => {
    const worker = client({ features: undefined });
    const requester = client();
    await worker.consume('jobs', 'job', (event) => worker.publish({ domain: 'jobs', name: 'success', pid: event.pid }));
    await expect(requester.request({ domain: 'jobs', name: 'job', pid: 'j1' })).resolves.toMatchObject({ name: 'success', pid: 'j1' });
    const bare = client({ features: [] });
    await expect(bare.wait('jobs', 'j1')).rejects.toMatchObject({ code: 'E_EVENTFLOW_FEATURE_NOT_ENABLED', details: { feature: 'waiting' } });
  });

  it('createNodeClient has the v4 reads and events() by default', async () => {
    const node = client();
    const events = node.events('v4', '*');
    await node.subscribe('v4', '*', () => undefined); // the fence: (v4, *) is registered
    const id = await node.publish({ domain: 'v4', name: 'made', pid: 'p1' });
    await node.persistEntityAssociation(id, 'e1');
    expect((await node.readEventlogByEid('e1')).map((event) => event.id)).toEqual([id]);
    expect((await events.next()).value).toMatchObject({ id });
    await events.return?.();
  });
});
