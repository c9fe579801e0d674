/**
 * Optimistic concurrency end to end: `publish(event, { expectedVersion })` through a real gateway
 * (SQLite), racing clients, and `retryOnConflict` as the read-decide-write loop it is meant for.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isEventflowError, retryOnConflict, type EventflowClient, type EventflowError } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let harness: Harness;
beforeEach(async () => {
  harness = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
});
afterEach(async () => {
  await harness.stop();
});

const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );

const readyClients = async (n: number): Promise<EventflowClient[]> => {
  const clients = Array.from({ length: n }, () => harness.client());
  await Promise.all(clients.map((client) => client.ready()));
  return clients;
};

describe('publish with expectedVersion', () => {
  it('stores the event when the eventlog is at the expected version, and fails with the versions otherwise', async () => {
    const [client] = (await readyClients(1)) as [EventflowClient];
    await client.publish({ domain: 'orders', name: 'placed', pid: 'o1' }, { expectedVersion: 0 });
    await client.persist({ domain: 'orders', name: 'noted', pid: 'o1' }, { expectedVersion: 1 });
    const error = await rejection(client.publish({ domain: 'orders', name: 'paid', pid: 'o1' }, { expectedVersion: 1 }));
    expect(isEventflowError(error, 'E_EVENTFLOW_VERSION_CONFLICT'), String(error)).toBe(true);
    expect((error as EventflowError).details).toEqual({ domain: 'orders', pid: 'o1', currentVersion: 2, expectedVersion: 1 });
    expect((error as EventflowError).message).toBe('orders › o1 is at version 2, not 1: read the eventlog and retry');
    const persistError = await rejection(client.persist({ domain: 'orders', name: 'noted', pid: 'o1' }, { expectedVersion: 3 }));
    expect(isEventflowError(persistError, 'E_EVENTFLOW_VERSION_CONFLICT')).toBe(true);
    expect((await client.readEventlog('orders', 'o1')).map((event) => event.name)).toEqual(['placed', 'noted']);
    // Without expectedVersion nothing is checked.
    await client.publish({ domain: 'orders', name: 'paid', pid: 'o1' });
    expect(await client.readEventlog('orders', 'o1')).toHaveLength(3);
  });

  it('refuses an expectedVersion that is not a non-negative integer', async () => {
    const [client] = (await readyClients(1)) as [EventflowClient];
    for (const expectedVersion of [-1, 1.5, Number.NaN]) {
      const error = await rejection(client.publish({ domain: 'orders', name: 'placed', pid: 'o1' }, { expectedVersion }));
      expect(isEventflowError(error, 'E_EVENTFLOW_INVALID_INPUT'), `${expectedVersion}: ${String(error)}`).toBe(true);
    }
    expect(await client.readEventlog('orders', 'o1')).toHaveLength(0);
  });

  it('lets exactly one of two clients racing with the same expectedVersion win', async () => {
    const [a, b] = (await readyClients(2)) as [EventflowClient, EventflowClient];
    await a.publish({ domain: 'orders', name: 'placed', pid: 'o1' });
    const results = await Promise.allSettled([
      a.publish({ domain: 'orders', name: 'paid', pid: 'o1', data: { by: 'a' } }, { expectedVersion: 1 }),
      b.publish({ domain: 'orders', name: 'cancelled', pid: 'o1', data: { by: 'b' } }, { expectedVersion: 1 }),
    ]);
    const won = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    const lost = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(isEventflowError(lost[0], 'E_EVENTFLOW_VERSION_CONFLICT'), String(lost[0])).toBe(true);
    expect((lost[0] as EventflowError).details).toEqual({ domain: 'orders', pid: 'o1', currentVersion: 2, expectedVersion: 1 });
    const log = await b.readEventlog('orders', 'o1');
    expect(log.map((event) => event.id)).toEqual([log[0]?.id, won[0]]);
  });

  it('does not fail a retried publish whose first attempt stored the event', async () => {
    const [client] = (await readyClients(1)) as [EventflowClient];
    const event = { id: 'ord-1', domain: 'orders', name: 'placed', pid: 'o1', data: { total: 3 } };
    expect(await client.publish(event, { expectedVersion: 0 })).toBe('ord-1');
    // The eventlog is at version 1 now, because of this very event: the retry returns it.
    expect(await client.publish(event, { expectedVersion: 0 })).toBe('ord-1');
    expect(await client.readEventlog('orders', 'o1')).toHaveLength(1);
  });

  it('does not count a scheduled event until it fires', async () => {
    const [client] = (await readyClients(1)) as [EventflowClient];
    await client.publish({ domain: 'orders', name: 'placed', pid: 'o1' }, { expectedVersion: 0 });
    await client.schedule(Date.now() + 3_600_000, { domain: 'orders', name: 'remind', pid: 'o1' });
    await client.publish({ domain: 'orders', name: 'paid', pid: 'o1' }, { expectedVersion: 1 });
    expect((await client.call('readEventlog', { domain: 'orders', pid: 'o1' })).count).toBe(2);
  });
});

describe('retryOnConflict', () => {
  it('makes concurrent read-then-publish writers all succeed, with versions 0..N-1 and no gaps', async () => {
    const writers = 12;
    const clients = await readyClients(4);
    const tries: number[] = [];
    const write = (writer: number): Promise<string> => {
      const client = clients[writer % clients.length] as EventflowClient;
      return retryOnConflict(
        async (tryNumber) => {
          tries.push(tryNumber);
          const version = (await client.readEventlog('counter', 'c1')).length;
          return client.publish({ domain: 'counter', name: 'incremented', pid: 'c1', data: { writer, version } }, { expectedVersion: version });
        },
        // Each round lets at least one writer through, so `writers` retries always suffice.
        { retries: writers, minDelay: 5, maxDelay: 50 },
      );
    };
    const ids = await Promise.all(Array.from({ length: writers }, (_, writer) => write(writer)));
    const log = await (clients[0] as EventflowClient).readEventlog('counter', 'c1');
    expect(log).toHaveLength(writers);
    expect(log.map((event) => (event.data as { version: number }).version)).toEqual(Array.from({ length: writers }, (_, i) => i));
    expect(new Set(log.map((event) => (event.data as { writer: number }).writer)).size).toBe(writers);
    expect(new Set(ids)).toEqual(new Set(log.map((event) => event.id)));
    // They did conflict: more attempts than writers.
    expect(tries.length).toBeGreaterThan(writers);
  });
});
