/**
 * Registrations made again on a new connection while the gateway's store cannot read for a moment.
 * A client's subscriptions, pattern subscriptions and waits are registered again by the client on
 * every connection; the gateway's first read of such a registration is its head. When that read
 * failed, the registration was refused for good: the subscription stayed off (its events went to
 * nobody, silently) and the wait failed, until the next connection. Now such a refusal is
 * retryable (nothing of it stays registered) and the client makes the registration again.
 *
 * The fault is injected (the store's head read fails a given number of times once the new
 * connection's welcome has read it): a moment's store failure between a handshake and the next
 * frame cannot be timed with a real server. work-store-faults.test.ts covers a request()'s wait
 * on a real MariaDB whose read an operator's lock holds past max_statement_time.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EventflowError, namespacePattern, type StoredEvent } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { droppable } from './droppable-client.js';

let h: Harness;
beforeEach(async () => (h = await startHarness()));
afterEach(async () => h.stop());

/** The store's head read fails `times` times once the next read (the new connection's welcome) has passed. */
function headFailsAfterWelcome(times: number): { failed: () => number } {
  const store = h.gateway.store;
  const head = store.head.bind(store);
  let plan = ['pass', ...Array<string>(times).fill('fail')];
  let failed = 0;
  store.head = () => {
    const step = plan[0];
    plan = plan.slice(1);
    if (step !== 'fail') return head();
    failed += 1;
    return Promise.reject(new EventflowError('E_EVENTFLOW_STORE_FAILED', 'the store could not read the head position (injected)'));
  };
  return { failed: () => failed };
}

describe('registrations made again while the store cannot read for a moment', () => {
  let closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of closers) await close();
    closers = [];
  });

  it('a subscription is made again until it is registered: the events published after reach it, once each', async () => {
    const { client, drop } = droppable(h);
    closers.push(() => client.close());
    const publisher = h.client();
    const seen: string[] = [];
    await client.subscribe('rs', 'tick', (event) => void seen.push(event.id));
    await publisher.publish({ id: 'before', domain: 'rs', name: 'tick', pid: 'p1' });
    await eventually(() => seen.length === 1, 5_000, 'the first event');
    const fault = headFailsAfterWelcome(2);
    drop();
    await eventually(() => fault.failed() === 2, 5_000, 'the subscription to have been refused twice on the new connection');
    await publisher.publish({ id: 'missed', domain: 'rs', name: 'tick', pid: 'p1' });
    await publisher.publish({ id: 'after', domain: 'rs', name: 'tick', pid: 'p1' });
    // Before: refused once, and nothing more reached the listener on this connection.
    await eventually(() => seen.includes('after'), 5_000, 'the events published after the refusals');
    expect(seen).toEqual(['before', 'missed', 'after']);
  });

  it('a pattern subscription is made again until it is registered', async () => {
    const { client, drop } = droppable(h);
    closers.push(() => client.close());
    const publisher = h.client();
    const seen: StoredEvent[] = [];
    await client.subscribe(namespacePattern('rp.*'), '*', (event) => void seen.push(event));
    await publisher.publish({ id: 'before', domain: 'rp.a', name: 'tick', pid: 'p1' });
    await eventually(() => seen.length === 1, 5_000, 'the first event');
    const fault = headFailsAfterWelcome(2);
    drop();
    await eventually(() => fault.failed() === 2, 5_000, 'the pattern subscription to have been refused twice on the new connection');
    await publisher.publish({ id: 'after', domain: 'rp.b', name: 'tick', pid: 'p1' });
    await eventually(() => seen.some((event) => event.id === 'after'), 5_000, 'the event published after the refusals');
    expect(seen.map((event) => event.id)).toEqual(['before', 'after']);
  });

  it('a wait is registered again until its timeout, and answered by the outcome', async () => {
    const { client, drop } = droppable(h);
    closers.push(() => client.close());
    const publisher = h.client();
    const outcome = client.wait('rw', 'p1', 'success', 20_000);
    await eventually(() => h.gateway.dispatcher.stats.waits === 1, 5_000, 'the wait to be registered');
    const fault = headFailsAfterWelcome(2);
    drop();
    await eventually(() => fault.failed() === 2, 5_000, 'the wait to have been refused twice on the new connection');
    await eventually(() => h.gateway.dispatcher.stats.waits === 1, 5_000, 'the wait to be registered again');
    await publisher.publish({ domain: 'rw', name: 'success', pid: 'p1' });
    expect((await outcome).name).toBe('success');
  });
});
