/**
 * A worker handing its work over: close() (a rolling deploy) while the gateway does not answer (a
 * stopped process, a link that stops passing bytes), where close({ drainTimeout }) is what a process
 * manager's grace period is sized by, so it must end within it; and a consumer removed while its
 * handler runs, whose event must not run again elsewhere nor its outcome be refused; and a handler's
 * extend() once its delivery is lost, which must say so at once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { createClient, listGroups } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { startPartitionProxy, type PartitionProxy } from './partition-proxy.js';

let h: Harness | undefined;
let proxy: PartitionProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
  await h?.stop();
});

describe('close() while the gateway does not answer', () => {
  it('ends within its drainTimeout, not after the requestTimeout of the pause it sends first, and says nothing of a refused consumer', async () => {
    h = await startHarness();
    proxy = await startPartitionProxy(Number(new URL(h.gateway.url).port));
    const errors: unknown[] = [];
    // The heartbeat would notice the silence only after 20 s; the requests time out after 4 s.
    const worker = createClient(`ws://127.0.0.1:${proxy.port}/`, { requestTimeout: 4_000, onError: (error) => void errors.push(error) });
    let running = false;
    await worker.consume('jobs', 'run', async () => {
      running = true;
      await new Promise(() => undefined);
    }, { group: 'workers' });
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => running, 5_000, 'the handler running');
    proxy.stall();
    const started = performance.now();
    await worker.close({ drainTimeout: 300 });
    const took = performance.now() - started;
    // The old client waited for the paused registration's answer (requestTimeout) before the drain began.
    expect(took).toBeLessThan(2_000);
    // Nor did onError hear that the consumer was refused (E_EVENTFLOW_REQUEST_TIMEOUT, or E_EVENTFLOW_CLIENT_CLOSED once cut short).
    expect(errors).toEqual([]);
  });
});

describe('remove() while the consumer\'s handler runs', () => {
  it('lets the handler finish and records its outcome; the event is not handed to another member meanwhile, and new events go to the others', async () => {
    h = await startHarness();
    const leaving = h.client();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const ranHere: string[] = [];
    let aborted = false;
    const consumer = await leaving.consume('jobs', 'run', async (event, { signal }) => {
      ranHere.push(event.id);
      signal.addEventListener('abort', () => (aborted = true));
      await gate;
    }, { group: 'workers' });
    const publisher = h.client();
    const first = await publisher.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => ranHere.length === 1, 5_000, 'the handler running');
    const removed = consumer.remove();
    const ranThere: string[] = [];
    await h.client().consume('jobs', 'run', (event) => void ranThere.push(event.id), { group: 'workers' });
    const second = await publisher.publish({ domain: 'jobs', name: 'run', pid: 'p2' });
    await eventually(() => ranThere.includes(second), 5_000, 'the next event taken by the other member');
    // The old client removed the consumer at once: the gateway gave the running event to the other member.
    expect(ranThere).toEqual([second]);
    open();
    await removed;
    await eventually(async () => (await listGroups(publisher, 'jobs')).find((group) => group.group === 'workers')?.inFlight === 0, 5_000, 'nothing in flight');
    expect(ranHere).toEqual([first]);
    expect(ranThere).toEqual([second]);
    expect(aborted).toBe(false);
    const db = new Database(h.dbPath, { readonly: true });
    try {
      const rows = db.prepare('SELECT outcome, attempts FROM eventflow_delivery WHERE event_id = ?').all(first);
      expect(rows).toEqual([{ outcome: 'success', attempts: 1 }]);
    } finally {
      db.close();
    }
  });
});

describe('remove() while the consumer\'s handler never returns', () => {
  it('ends once the client is closed under it (closing ends the wait for the handler)', async () => {
    h = await startHarness();
    const worker = h.client();
    let running = false;
    const consumer = await worker.consume('jobs', 'run', async () => {
      running = true;
      await new Promise(() => undefined);
    });
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => running, 5_000, 'the handler running');
    let removed = false;
    const removing = consumer.remove().then(() => (removed = true));
    await worker.close({ drainTimeout: 50 });
    await eventually(() => removed, 2_000, 'remove() to end');
    await removing;
  });
});

describe('extend() from a handler whose delivery was lost with its connection', () => {
  it('rejects at once saying the delivery is lost and to stop working on it, not after requestTimeout as E_EVENTFLOW_OFFLINE "not connected" while the gateway is away', async () => {
    h = await startHarness();
    const worker = h.client({ requestTimeout: 3_000 });
    let ask!: () => void;
    const asked = new Promise<void>((resolve) => (ask = resolve));
    let running = false;
    let outcome: unknown;
    let took = 0;
    await worker.consume('jobs', 'run', async (_event, { extend }) => {
      running = true;
      await asked;
      const started = performance.now();
      outcome = await extend(1_000).then(() => 'granted', (error: unknown) => error);
      took = performance.now() - started;
    });
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => running, 5_000, 'the handler running');
    await h.stopGateway();
    await eventually(() => worker.state === 'offline', 5_000, 'the worker offline');
    ask();
    await eventually(() => outcome !== undefined, 5_000, 'the extend to end');
    // A gateway that stops takes its deliveries back first (revoked: no longer this handler's); one that dies just drops them.
    expect(['E_EVENTFLOW_UNKNOWN_DELIVERY', 'E_EVENTFLOW_CONNECTION_FAILED']).toContain((outcome as { code?: unknown }).code);
    expect((outcome as Error).message).toContain('stop working on it');
    expect(took).toBeLessThan(1_000);
    await worker.close({ drainTimeout: 10 });
  });

  it('rejects at once with E_EVENTFLOW_CONNECTION_FAILED when the connection just dropped (nothing revoked it)', async () => {
    h = await startHarness();
    const { client: worker, kill } = h.killableClient({ requestTimeout: 3_000 });
    let ask!: () => void;
    const asked = new Promise<void>((resolve) => (ask = resolve));
    let running = false;
    let outcome: unknown;
    await worker.consume('jobs', 'run', async (_event, { extend }) => {
      running = true;
      await asked;
      outcome = await extend(1_000).then(() => 'granted', (error: unknown) => error);
    });
    await h.client().publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => running, 5_000, 'the handler running');
    kill();
    await eventually(() => worker.state === 'offline', 5_000, 'the worker offline');
    const started = performance.now();
    ask();
    await eventually(() => outcome !== undefined, 5_000, 'the extend to end');
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(outcome).toMatchObject({ code: 'E_EVENTFLOW_CONNECTION_FAILED' });
    expect((outcome as Error).message).toContain('redelivered');
    await worker.close({ drainTimeout: 10 });
  });
});

describe('close() draining a handler that publishes its outcome', () => {
  it("the handler's publish goes through and its event is settled success (a rolling deploy does not fail the jobs in hand)", async () => {
    h = await startHarness();
    const worker = h.client();
    let finish: () => void = () => undefined;
    const published: unknown[] = [];
    await worker.consume('orders', 'placed', async (event) => {
      await new Promise<void>((resolve) => (finish = resolve));
      // As packages/node/README.md's worker does: the outcome, published from the handler.
      published.push(await worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id }).catch((error: unknown) => error));
    }, { group: 'shipping' });
    const id = await h.client().publish({ domain: 'orders', name: 'placed', pid: 'o1' });
    await eventually(async () => (await listGroups(h!.client(), 'orders'))[0]?.inFlight === 1, 5_000, 'the handler running');
    const closed = worker.close({ drainTimeout: 10_000 });
    finish();
    await closed;
    // Before: [E_EVENTFLOW_CLIENT_CLOSED "client closed; create a new one"], and the event settled failed for good.
    expect(published).toEqual([expect.any(String)]);
    const db = new Database(h.dbPath, { readonly: true });
    try {
      expect(db.prepare("SELECT outcome FROM eventflow_delivery WHERE grp = 'shipping' AND event_id = ?").get(id)).toEqual({ outcome: 'success' });
      expect(db.prepare("SELECT COUNT(*) AS n FROM event WHERE name = 'success' AND rid = ?").get(id)).toEqual({ n: 1 });
    } finally {
      db.close();
    }
    // After close() the client refuses calls, as before.
    await expect(worker.publish({ domain: 'orders', name: 'late', pid: 'o1' })).rejects.toMatchObject({ code: 'E_EVENTFLOW_CLIENT_CLOSED' });
  });
});
