/**
 * A Node worker with `concurrency` deliveries open while its gateway (a child process on SQLite) is
 * SIGKILLed or stopped with SIGTERM and started again: the handlers that finish meanwhile have their
 * settles sent again on the new connection and recorded (their leases are in the store), nothing
 * recorded is run again, and no more than `concurrency` handlers ever run at once; a failed settle
 * sent again there is decided by the consumer's retry policy; a request() whose gateway is SIGKILLed
 * between its publish and its outcome ends with the outcome.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { consuming, createClient, EventflowClient, webSocketConnector } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { freePort, kill9, startGatewayProcess, stop, type SpawnedProcess } from '@eventflow/test-support/gateway-process';
import { useChaosLifecycle } from './support.js';

const { temp, clients } = useChaosLifecycle();
const LEASE = 10_000;

const client = (url: string): EventflowClient => {
  const made = createClient(url, { reconnect: { minDelay: 20, maxDelay: 100 }, onError: () => undefined });
  clients.push(made);
  return made;
};

function outcomes(dbPath: string, group: string): Map<string, string | null> {
  const db = new Database(dbPath, { readonly: true });
  try {
    const rows = db.prepare('SELECT event_id AS id, outcome FROM eventflow_delivery WHERE grp = ?').all(group) as Array<{ id: string; outcome: string | null }>;
    return new Map(rows.map((row) => [row.id, row.outcome]));
  } finally {
    db.close();
  }
}

/** Handlers that wait for the test, counting runs per event and how many run at once. */
function gated(): { handler: (event: { id: string }) => Promise<void>; open(): void; running: number; max: number; runs: Map<string, number> } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const state = {
    running: 0,
    max: 0,
    runs: new Map<string, number>(),
    open: () => open(),
    handler: async (event: { id: string }): Promise<void> => {
      state.runs.set(event.id, (state.runs.get(event.id) ?? 0) + 1);
      state.max = Math.max(state.max, ++state.running);
      try {
        await gate;
      } finally {
        state.running--;
      }
    },
  };
  return state;
}

describe('a worker across gateway restarts (SQLite)', () => {
  for (const how of ['SIGKILL', 'SIGTERM'] as const) {
    it(`${how} while three handlers run: their settles, made while it is down, are recorded on the restarted gateway; nothing runs twice`, async () => {
      const port = await freePort();
      const dbPath = join(temp.dir, `worker-${how}.db`);
      // A drain shorter than the test's gate: the SIGTERMed gateway gives the open deliveries back and exits.
      const env = { EVENTFLOW_CONSUME_LEASE_MS: LEASE, EVENTFLOW_DRAIN_TIMEOUT_MS: 200 };
      let gateway: SpawnedProcess = await startGatewayProcess(port, dbPath, env);
      const url = `ws://127.0.0.1:${port}/`;
      const handlers = gated();
      const worker = client(url);
      await worker.consume('jobs', 'run', handlers.handler, { group: 'workers', concurrency: 3 });
      const publisher = client(url);
      const ids = await Promise.all(Array.from({ length: 6 }, (_, n) => publisher.publish({ domain: 'jobs', name: 'run', pid: `p${n}` })));
      await eventually(() => handlers.running === 3, 10_000, 'three handlers running');
      const first = [...handlers.runs.keys()];
      if (how === 'SIGKILL') await kill9(gateway.proc);
      else await stop(gateway.proc, 'SIGTERM', 10_000);
      // They finish while the gateway is away: the settles wait for the next connection.
      handlers.open();
      await eventually(() => handlers.running === 0, 5_000, 'the handlers to return');
      const restarted = Date.now();
      gateway = await startGatewayProcess(port, dbPath, env);
      await eventually(() => [...outcomes(dbPath, 'workers').values()].filter((outcome) => outcome === 'success').length === 6, LEASE, 'every job to succeed');
      expect(Date.now() - restarted).toBeLessThan(LEASE);
      expect(handlers.max).toBeLessThanOrEqual(3);
      expect(new Set(handlers.runs.keys())).toEqual(new Set(ids));
      if (how === 'SIGKILL') {
        // Their leases were the store's: the settles sent again were recorded, the jobs not run again.
        expect([...handlers.runs.values()].every((count) => count === 1)).toBe(true);
      } else {
        // A stopped gateway released what was open when its drain ran out (not counted as attempts): those run again.
        for (const id of first) expect(handlers.runs.get(id)).toBeLessThanOrEqual(2);
      }
      await kill9(gateway.proc);
    }, 60_000);
  }

  it("SIGKILL with a failed settle on its way: the retry policy decides it on the restarted gateway (a retry, not `failed`), also when the consumer's registration there comes after the settle is ready", async () => {
    const port = await freePort();
    const dbPath = join(temp.dir, 'retry-policy.db');
    const env = { EVENTFLOW_CONSUME_LEASE_MS: LEASE };
    let gateway: SpawnedProcess = await startGatewayProcess(port, dbPath, env);
    const url = `ws://127.0.0.1:${port}/`;
    // The first connection loses the settles (the gateway is killed before they arrive); on the next one,
    // the consumer's registration is held back a moment (a gateway slow to record the group, say): the
    // settle sent again is ready before it.
    let connections = 0;
    let settlesLost = 0;
    const connect = webSocketConnector(url);
    const worker = new EventflowClient(
      async (signal) => {
        const transport = await connect(signal);
        const send = transport.send.bind(transport);
        if (++connections === 1) transport.send = (frame) => void (frame.includes('"op":"settle') ? settlesLost++ : send(frame));
        else transport.send = (frame) => void (frame.includes('"op":"consume"') ? setTimeout(() => send(frame), 500) : send(frame));
        return transport;
      },
      { features: [consuming], reconnect: { minDelay: 20, maxDelay: 100 }, onError: () => undefined },
    );
    clients.push(worker);
    const attempts: number[] = [];
    await worker.consume(
      'billing',
      'charge',
      (_event, { attempt }) => {
        attempts.push(attempt);
        if (attempt === 1) throw new Error('card declined');
      },
      { group: 'billing', retry: { attempts: 3, backoff: 'fixed', delayMs: 100 } },
    );
    const id = await client(url).publish({ domain: 'billing', name: 'charge', pid: 'p1' });
    await eventually(() => settlesLost === 1, 10_000, 'the failed settle to be sent');
    await kill9(gateway.proc);
    gateway = await startGatewayProcess(port, dbPath, env);
    const outcome = (): string | null | undefined => outcomes(dbPath, 'billing').get(id);
    await eventually(() => outcome() === 'success' || outcome() === 'failed', LEASE, 'an outcome');
    // The throw was the member's: a retry (attempt 2, which succeeds), not `failed` as without a policy.
    expect(outcome()).toBe('success');
    expect(attempts).toEqual([1, 2]);
    await kill9(gateway.proc);
  }, 60_000);

  it('SIGKILL between a request()\'s publish and its outcome: the request ends with the outcome, its event stored once and handled once', async () => {
    const port = await freePort();
    const dbPath = join(temp.dir, 'requester.db');
    const env = { EVENTFLOW_CONSUME_LEASE_MS: LEASE };
    let gateway: SpawnedProcess = await startGatewayProcess(port, dbPath, env);
    const url = `ws://127.0.0.1:${port}/`;
    const handlers = gated();
    const worker = client(url);
    await worker.consume('orders', 'place', async (event) => {
      await handlers.handler(event);
      await worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id });
    });
    const requester = client(url);
    const requesting = requester.request({ domain: 'orders', name: 'place', pid: 'o1' }, { timeout: 20_000 });
    requesting.catch(() => undefined);
    await eventually(() => handlers.running === 1, 10_000, 'the job running');
    await kill9(gateway.proc);
    handlers.open();
    gateway = await startGatewayProcess(port, dbPath, env);
    const outcome = await requesting;
    expect(outcome.name).toBe('success');
    const reader = client(url);
    const names = (await reader.readEventlog('orders', 'o1')).map((event) => event.name);
    expect(names).toEqual(['place', 'success']);
    expect([...handlers.runs.values()]).toEqual([1]);
    await kill9(gateway.proc);
  }, 60_000);
});

