/**
 * An outage is reported once: one E_EVENTFLOW_CONNECTION_FAILED to onError when it starts, and
 * its end is the state change to 'open', however many reconnect attempts fail in between.
 */
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { EventflowClient, webSocketConnector, type ConnectionState } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';

let h: Harness;
beforeEach(async () => (h = await startHarness()));
afterEach(async () => h.stop());

/** A client of the gateway on `port` that counts its connection attempts and collects what reaches onError. */
function countingClient(port: number): { client: EventflowClient; errors: unknown[]; attempts: () => number } {
  const errors: unknown[] = [];
  let attempts = 0;
  const connect = webSocketConnector(`ws://127.0.0.1:${port}/`);
  const client = new EventflowClient(
    (signal) => {
      attempts++;
      return connect(signal);
    },
    { reconnect: { minDelay: 10, maxDelay: 20 }, onError: (error) => errors.push(error) },
  );
  return { client, errors, attempts: () => attempts };
}

it('a gateway that is down for many attempts costs one onError, and the state says when it is back', async () => {
  const states: ConnectionState[] = [];
  const { client, errors, attempts } = countingClient(h.gateway.port);
  try {
    await client.ready();
    client.onStateChange((state) => states.push(state));
    const { gateway } = h;
    await gateway.close();
    await eventually(() => attempts() >= 8, 10_000, 'eight attempts to fail');
    expect(errors).toEqual([expect.objectContaining({ code: 'E_EVENTFLOW_CONNECTION_FAILED', message: expect.stringContaining('connection to the gateway lost') })]);
    expect(states).toEqual(['offline']);

    await h.restart();
    await eventually(() => client.state === 'open', 10_000, 'the client to reconnect');
    expect(states).toEqual(['offline', 'open']);
    expect(errors).toHaveLength(1);

    // A second outage is reported again.
    await h.gateway.close();
    await eventually(() => errors.length === 2, 10_000, 'the second outage to be reported');
    await h.restart();
    await client.ready();
    expect(states).toEqual(['offline', 'open', 'offline', 'open']);
  } finally {
    await client.close();
  }
});

it('a client that never reached the gateway reports its first failed attempt once', async () => {
  const port = h.gateway.port;
  await h.gateway.close();
  const { client, errors, attempts } = countingClient(port);
  try {
    await eventually(() => attempts() >= 6, 10_000, 'six attempts to fail');
    expect(errors).toEqual([expect.objectContaining({ code: 'E_EVENTFLOW_CONNECTION_FAILED', message: expect.stringContaining('cannot connect') })]);
    await h.restart();
    await client.ready();
    expect(errors).toHaveLength(1);
  } finally {
    await client.close();
  }
});

it('a client that has never reached the gateway fails calls at once with E_EVENTFLOW_OFFLINE naming the URL and the cause; once connected, calls wait out an outage', async () => {
  const port = h.gateway.port;
  await h.gateway.close();
  const { client } = countingClient(port);
  try {
    const started = Date.now();
    // Made while the first attempt runs: rejected when it fails, not after the 10 s timeout.
    const first = await client.publish({ domain: 'orders', name: 'placed', pid: 'p' }).catch((error: unknown) => error);
    expect(first).toMatchObject({ code: 'E_EVENTFLOW_OFFLINE', message: expect.stringContaining(`publish: not connected to the gateway (the client keeps trying): cannot connect to ws://127.0.0.1:${port}/ (ECONNREFUSED)`) });
    await expect(client.read('any')).rejects.toMatchObject({ code: 'E_EVENTFLOW_OFFLINE' });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(client.state).toBe('offline');

    await h.restart();
    await client.ready();
    expect(await client.publish({ domain: 'orders', name: 'placed', pid: 'p' })).toBeTypeOf('string');
    // An outage of a client that has been connected: the call waits for the gateway (up to its timeout).
    await h.gateway.close();
    await eventually(() => client.state === 'offline', 5_000, 'the outage');
    const waiting = client.publish({ domain: 'orders', name: 'placed', pid: 'q' });
    await h.restart();
    expect(await waiting).toBeTypeOf('string');
  } finally {
    await client.close();
  }
});

it('without onError, an outage is one warning when it starts and one line when it ends', async () => {
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
  const info = vi.spyOn(console, 'info').mockImplementation(() => undefined);
  const client = new EventflowClient(webSocketConnector(h.gateway.url), { reconnect: { minDelay: 10, maxDelay: 20 } });
  try {
    await client.ready();
    await h.gateway.close();
    await eventually(() => warn.mock.calls.length > 0, 5_000, 'the warning');
    await h.restart();
    await eventually(() => info.mock.calls.length > 0, 10_000, 'the recovery line');
    expect(warn.mock.calls).toEqual([[expect.stringMatching(/^\[eventflow\] connection to the gateway lost \(close code \d+.*\); reconnecting with backoff$/)]]);
    expect(info.mock.calls).toEqual([['[eventflow] connected to the gateway again']]);
  } finally {
    await client.close();
    warn.mockRestore();
    info.mockRestore();
  }
});
