/**
 * A Node worker under connection faults (an in-process gateway on SQLite, real WebSockets): its
 * handlers keep running when their delivery is lost (the connection dropped) or revoked (the lease
 * ran out), so what the worker promises has to hold across those too: `concurrency` bounds the
 * handlers running at once, and an ordered consumer never runs two handlers of one pid. Over a
 * partition (bytes stop, the socket stays open) the client notices within its heartbeat, and what
 * the link held comes to nothing on the connection it gave up on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, EventflowClient, EventflowError, listDeadLetters, listGroups } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { startPartitionProxy, type PartitionProxy } from './partition-proxy.js';
import { droppable } from './droppable-client.js';

let h: Harness | undefined;
let proxy: PartitionProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
  await h?.stop();
});

/** Nothing of the group is pending or in flight. */
async function idle(client: EventflowClient, domain: string, group: string): Promise<boolean> {
  const summary = (await listGroups(client, domain)).find((found) => found.group === group);
  return summary !== undefined && summary.pending === 0 && summary.inFlight === 0;
}

/** A consumer of jobs/run whose handler, once running, calls extend(ms) when asked; `outcome`: 'granted' or extend's error. */
async function extendingWhenAsked(worker: EventflowClient, ms: number): Promise<{ running: () => boolean; ask: () => void; outcome: () => unknown }> {
  let ask!: () => void;
  const asked = new Promise<void>((resolve) => (ask = resolve));
  let running = false;
  let outcome: unknown;
  await worker.consume('jobs', 'run', async (_event, { extend }) => {
    running = true;
    await asked;
    outcome = await extend(ms).then(
      () => 'granted',
      (error: unknown) => error,
    );
  });
  return { running: () => running, ask, outcome: () => outcome };
}

/** Handlers that ignore their signal and wait for the test, counting how many run at once. */
function gatedHandlers(): { handler: (event: { id: string; pid: string }) => Promise<void>; open(): void; running: number; max: number; started: string[]; done: string[]; overlap: string[] } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const byPid = new Set<string>();
  const state = {
    running: 0,
    max: 0,
    started: [] as string[],
    done: [] as string[],
    overlap: [] as string[],
    open: () => open(),
    handler: async (event: { id: string; pid: string }): Promise<void> => {
      state.started.push(event.id);
      if (byPid.has(event.pid)) state.overlap.push(event.pid);
      byPid.add(event.pid);
      state.max = Math.max(state.max, ++state.running);
      try {
        await gate;
      } finally {
        state.running--;
        byPid.delete(event.pid);
        state.done.push(event.id);
      }
    },
  };
  return state;
}

describe('a worker whose deliveries are lost or revoked while their handlers run', () => {
  it('concurrency bounds the handlers running across a dropped connection, the ones still running from before the drop included', async () => {
    h = await startHarness();
    const { client, drop } = droppable(h);
    const handlers = gatedHandlers();
    await client.consume('jobs', 'run', handlers.handler, { group: 'workers', concurrency: 2 });
    const publisher = h.client();
    const ids = await Promise.all([1, 2, 3, 4].map((n) => publisher.publish({ domain: 'jobs', name: 'run', pid: `p${n}` })));
    await eventually(() => handlers.running === 2, 5_000, 'two handlers running');
    let reopened = false;
    client.onStateChange((state) => void (state === 'open' && (reopened = true)));
    drop();
    await eventually(() => reopened, 5_000, 'the client to reconnect');
    // The member is back at the gateway; the old code had the gateway redeliver to it at once (a claim
    // within 50 ms of a join), its handlers started beside the two still running.
    await eventually(async () => (await listGroups(publisher, 'jobs')).find((group) => group.group === 'workers')?.members === 1, 5_000, 'the member registered again');
    await eventually(() => handlers.running > 2, 1_000).catch(() => undefined);
    expect(handlers.max).toBeLessThanOrEqual(2);
    handlers.open();
    await eventually(async () => await idle(publisher, 'jobs', 'workers'), 10_000, 'every job to be done');
    expect(handlers.max).toBeLessThanOrEqual(2);
    expect(new Set(handlers.done)).toEqual(new Set(ids));
  });

  it('handlers from before a drop that return while the consumer registers again give their slots back (the credit is not left at what it was when sent)', async () => {
    h = await startHarness();
    const { client, drop } = droppable(h);
    const handlers = gatedHandlers();
    await client.consume('jobs', 'run', handlers.handler, { group: 'workers', concurrency: 2 });
    const publisher = h.client();
    const ids = await Promise.all([1, 2].map((n) => publisher.publish({ domain: 'jobs', name: 'run', pid: `p${n}` })));
    await eventually(() => handlers.running === 2, 5_000, 'two handlers running');
    // The state listeners run before the consumers register on the new connection: the handlers
    // return while that registration (with no credit: both slots held) is on its way.
    let reopened = false;
    client.onStateChange((state) => void (state === 'open' && !reopened && ((reopened = true), handlers.open())));
    drop();
    await eventually(() => reopened, 5_000, 'the client to reconnect');
    const more = await Promise.all([3, 4, 5].map((n) => publisher.publish({ domain: 'jobs', name: 'run', pid: `p${n}` })));
    await eventually(async () => await idle(publisher, 'jobs', 'workers'), 10_000, 'every job to be done');
    expect(new Set(handlers.done)).toEqual(new Set([...ids, ...more]));
    expect(handlers.max).toBeLessThanOrEqual(2);
  });

  it('concurrency bounds the handlers running when a lease runs out under a handler that ignores its signal', async () => {
    h = await startHarness({ EVENTFLOW_CONSUME_LEASE_MS: 300 });
    const worker = h.client();
    const handlers = gatedHandlers();
    await worker.consume('jobs', 'run', handlers.handler, { group: 'workers', concurrency: 1 });
    const publisher = h.client();
    const ids = await Promise.all([1, 2, 3].map((n) => publisher.publish({ domain: 'jobs', name: 'run', pid: `p${n}` })));
    await eventually(() => handlers.running === 1, 5_000, 'a handler running');
    // Revoked after 300 ms: the old code took the next job at once, and the next, one per lease.
    await eventually(() => handlers.running > 1, 1_500).catch(() => undefined);
    expect(handlers.max).toBe(1);
    handlers.open();
    await eventually(async () => await idle(publisher, 'jobs', 'workers'), 10_000, 'every job to be done');
    expect(handlers.max).toBe(1);
    expect(new Set(handlers.done)).toEqual(new Set(ids));
  });

  it('an ordered consumer does not run a redelivery of a pid beside the handler of that pid still running from before a drop', async () => {
    h = await startHarness();
    const { client, drop } = droppable(h);
    const handlers = gatedHandlers();
    await client.consume('orders', 'step', handlers.handler, { group: 'projection', ordered: true, concurrency: 4 });
    const publisher = h.client();
    await publisher.publish({ domain: 'orders', name: 'step', pid: 'o1' });
    await publisher.publish({ domain: 'orders', name: 'step', pid: 'o1' });
    await eventually(() => handlers.running === 1, 5_000, 'the first step running');
    let reopened = false;
    client.onStateChange((state) => void (state === 'open' && (reopened = true)));
    drop();
    await eventually(() => reopened, 5_000, 'the client to reconnect');
    await eventually(async () => (await listGroups(publisher, 'orders')).find((group) => group.group === 'projection')?.members === 1, 5_000, 'the member registered again');
    await eventually(() => handlers.started.length > 1, 1_000).catch(() => undefined);
    expect(handlers.overlap).toEqual([]);
    handlers.open();
    await eventually(async () => await idle(publisher, 'orders', 'projection'), 10_000, 'both steps to be done');
    expect(handlers.overlap).toEqual([]);
  });
});

describe('a handler whose lease ran out', () => {
  it('an extend() after its delivery was revoked says the delivery is no longer its own and to stop working on it', async () => {
    h = await startHarness({ EVENTFLOW_CONSUME_LEASE_MS: 300 });
    const worker = h.client();
    let outcome: unknown;
    await worker.consume('jobs', 'run', async (_event, { signal, extend }) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
      outcome = await extend(1_000).then(
        () => 'granted',
        (error: unknown) => error,
      );
    });
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => outcome !== undefined, 5_000, 'the extend to end');
    expect(outcome).toMatchObject({ code: 'E_EVENTFLOW_UNKNOWN_DELIVERY' });
    expect((outcome as Error).message).toContain('stop working on it');
  });
});

describe('a worker behind a partition', () => {
  /** A worker that reaches the gateway through a partition proxy, with a short heartbeat. */
  async function partitioned(harness: Harness): Promise<EventflowClient> {
    proxy = await startPartitionProxy(Number(new URL(harness.gateway.url).port));
    const client = createClient(`ws://127.0.0.1:${proxy.port}/`, { heartbeatInterval: 200, handshakeTimeout: 500, reconnect: { minDelay: 20, maxDelay: 100 }, onError: () => undefined });
    await client.ready();
    return client;
  }

  it('is noticed within the heartbeat, not after the WebSocket close timeout (30 s): the state leaves open and running handlers are aborted', async () => {
    h = await startHarness();
    const worker = await partitioned(h);
    let aborted = false;
    let running = false;
    await worker.consume('jobs', 'run', (_event, { signal }) => {
      running = true;
      return new Promise<void>((resolve) => signal.addEventListener('abort', () => ((aborted = true), resolve())));
    });
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => running, 5_000, 'the handler running');
    proxy!.partition();
    // Two heartbeats (a silence, then a ping without an answer) and some slack.
    await eventually(() => worker.state !== 'open' && aborted, 3_000, 'the partition to be noticed');
    await worker.close({ drainTimeout: 10 });
  });

  it('a delivery the link held while the client gave up on its connection does not run when the link heals; its redelivery runs once', async () => {
    h = await startHarness();
    const worker = await partitioned(h);
    const runs = new Map<string, number>();
    await worker.consume('jobs', 'run', (event) => void runs.set(event.id, (runs.get(event.id) ?? 0) + 1), { group: 'workers' });
    proxy!.partition();
    const publisher = h.client();
    const id = await publisher.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => worker.state !== 'open', 3_000, 'the partition to be noticed');
    proxy!.heal();
    await eventually(async () => await idle(publisher, 'jobs', 'workers'), 10_000, 'the job to be done');
    expect(runs.get(id)).toBe(1);
    await worker.close({ drainTimeout: 10 });
  });

  it("the gateway ends a silent worker's connection (ping interval), so its group's events are not sent to it lease after lease into dead letters", async () => {
    h = await startHarness({ EVENTFLOW_CONSUME_LEASE_MS: 300, EVENTFLOW_CONSUME_MAX_ATTEMPTS: 3, EVENTFLOW_PING_INTERVAL_MS: 100 });
    const worker = await partitioned(h);
    const runs: string[] = [];
    await worker.consume('jobs', 'run', (event) => void runs.push(event.id), { group: 'workers' });
    proxy!.partition();
    const publisher = h.client();
    const id = await publisher.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    // Three leases of 300 ms would have made it a dead letter (the old gateway kept the silent member).
    await eventually(async () => (await listGroups(publisher, 'jobs')).find((group) => group.group === 'workers')?.members === 0, 3_000, 'the silent member to be dropped');
    expect(await listDeadLetters(publisher, { domain: 'jobs' })).toEqual([]);
    proxy!.heal();
    await eventually(async () => await idle(publisher, 'jobs', 'workers'), 10_000, 'the job to be done');
    expect(runs).toContain(id);
    expect(await listDeadLetters(publisher, { domain: 'jobs' })).toEqual([]);
    await worker.close({ drainTimeout: 10 });
  });

  it('an extend() cut off by the drop rejects with a coded error that says the delivery is lost, not with an internal marker of the client', async () => {
    h = await startHarness();
    const worker = await partitioned(h);
    const handler = await extendingWhenAsked(worker, 5_000);
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(handler.running, 5_000, 'the handler running');
    proxy!.partition();
    handler.ask();
    await eventually(() => handler.outcome() !== undefined, 3_000, 'the extend to end');
    expect(handler.outcome()).toBeInstanceOf(EventflowError);
    expect(handler.outcome()).toMatchObject({ code: 'E_EVENTFLOW_CONNECTION_FAILED' });
    expect((handler.outcome() as Error).message).toContain('redelivered');
    await worker.close({ drainTimeout: 10 });
  });
});

describe('a worker closed while its handlers run', () => {
  it('close() hands back at once a redelivery waiting behind its pid\'s handler that ignores its signal (it held close() for its drainTimeout, and started once that handler ended)', async () => {
    h = await startHarness();
    const { client, drop } = droppable(h);
    const handlers = gatedHandlers();
    await client.consume('orders', 'step', handlers.handler, { group: 'projection', ordered: true, concurrency: 4 });
    const publisher = h.client();
    const id = await publisher.publish({ domain: 'orders', name: 'step', pid: 'o1' });
    await eventually(() => handlers.running === 1, 5_000, 'the step running');
    let reopened = false;
    client.onStateChange((state) => void (state === 'open' && (reopened = true)));
    drop();
    // The lost delivery comes back to this worker (its only member) and waits behind the handler of its pid still running.
    const projection = async (): Promise<{ pending: number; inFlight: number; redelivered: number } | undefined> => (await listGroups(publisher, 'orders')).find((group) => group.group === 'projection');
    await eventually(async () => reopened && (await projection())?.redelivered === 1, 5_000, 'the redelivery open');
    const closed = client.close({ drainTimeout: 5_000 });
    // Handed back at once; the old code held close() for its drainTimeout, then would have started it had the handler ended first.
    await eventually(async () => (await projection())?.pending === 1, 2_000, 'the redelivery handed back');
    handlers.open();
    await closed;
    expect(handlers.started).toEqual([id]);
  });

  it("a handler still running when close()'s drainTimeout ran out has its signal aborted (E_EVENTFLOW_CLIENT_CLOSED), as its event goes to another member", async () => {
    h = await startHarness();
    const worker = h.client();
    let running = false;
    let abortedWith: unknown;
    await worker.consume('jobs', 'run', (_event, { signal }) => {
      running = true;
      return new Promise<void>((resolve) => signal.addEventListener('abort', () => ((abortedWith = signal.reason), resolve())));
    }, { group: 'workers' });
    const id = await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => running, 5_000, 'the handler running');
    await worker.close({ drainTimeout: 10 });
    // The old client left the handler running, unaware, beside the event's redelivery to the next member.
    expect(abortedWith).toMatchObject({ code: 'E_EVENTFLOW_CLIENT_CLOSED' });
    const next = h.client();
    const redelivered: Array<[string, number]> = [];
    await next.consume('jobs', 'run', (event, { attempt }) => void redelivered.push([event.id, attempt]), { group: 'workers' });
    await eventually(() => redelivered.length === 1, 5_000, 'the redelivery');
    expect(redelivered).toEqual([[id, 2]]);
  });

  it('an extend() after close() fails at once with E_EVENTFLOW_CLIENT_CLOSED, not after requestTimeout as "no answer from the gateway"', async () => {
    h = await startHarness();
    const worker = h.client({ requestTimeout: 5_000 });
    const handler = await extendingWhenAsked(worker, 1_000);
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(handler.running, 5_000, 'the handler running');
    // The drain gives up on the handler; it goes on after the client closed.
    await worker.close({ drainTimeout: 10 });
    handler.ask();
    await eventually(() => handler.outcome() !== undefined, 1_000, 'the extend to end');
    expect(handler.outcome()).toMatchObject({ code: 'E_EVENTFLOW_CLIENT_CLOSED' });
  });
});

