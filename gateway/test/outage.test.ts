/**
 * An outage is reported once: one E_EVENTFLOW_CONNECTION_FAILED to onError when it starts, and
 * its end is the state change to 'open', however many reconnect attempts fail in between.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
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
    expect(states).toEqual(['connecting']);

    await h.restart();
    await eventually(() => client.state === 'open', 10_000, 'the client to reconnect');
    expect(states).toEqual(['connecting', 'open']);
    expect(errors).toHaveLength(1);

    // A second outage is reported again.
    await h.gateway.close();
    await eventually(() => errors.length === 2, 10_000, 'the second outage to be reported');
    await h.restart();
    await client.ready();
    expect(states).toEqual(['connecting', 'open', 'connecting', 'open']);
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
