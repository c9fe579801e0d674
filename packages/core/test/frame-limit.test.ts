/**
 * A request over the gateway's frame limit (EVENTFLOW_MAX_FRAME_BYTES, announced as welcome.limits.maxFrameBytes),
 * from core's client as every runtime has it (here over isows's `ws`, with no transport of its own that checks):
 * answered E_EVENTFLOW_INVALID_INPUT by the request manager, never sent, while the requests around it go out and the
 * one connection stays up. Before, the gateway closed the connection (1009), the client sent the request again on
 * each new one until its timeout, and every subscription and consumer of the client was dropped with each.
 */
import { afterEach, expect, it } from 'vitest';
import { consuming, EventflowClient, isEventflowError, webSocketConnector, type StoredEvent } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';

const LIMIT = 4096;
let h: Harness | undefined;
const clients: EventflowClient[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()));
  await h?.stop();
  h = undefined;
});

/** A client of the harness's gateway that counts the connections it opened. */
function countingClient(harness: Harness): { client: EventflowClient; connections: () => number } {
  const connect = webSocketConnector(harness.gateway.url);
  let connections = 0;
  const client = new EventflowClient(
    async (signal) => {
      const transport = await connect(signal);
      connections++;
      return transport;
    },
    { features: [consuming], reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined },
  );
  clients.push(client);
  return { client, connections: () => connections };
}

/** The failure of a call that should fail, with how long it took. */
async function failure(call: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  const error = await call.then(
    () => new Error('resolved'),
    (thrown: unknown) => thrown,
  );
  return { error, ms: Date.now() - started };
}

function expectRefused({ error, ms }: { error: unknown; ms: number }, op: string): void {
  expect(isEventflowError(error, 'E_EVENTFLOW_INVALID_INPUT'), String(error)).toBe(true);
  const { message, details } = error as Error & { details?: { bytes?: number; limit?: number } };
  expect(message).toMatch(new RegExp(`^${op}: \\d+ bytes, over the gateway's frame limit of ${LIMIT} \\(EVENTFLOW_MAX_FRAME_BYTES\\); send less data in one request$`));
  expect(details).toEqual({ bytes: expect.any(Number), limit: LIMIT });
  expect(details!.bytes).toBeGreaterThan(LIMIT);
  // Answered by the client, not after a timeout.
  expect(ms).toBeLessThan(1_000);
}

it('refuses a request over the frame limit in the client; the requests around it are sent, the connection, a subscription and a consumer stay up', async () => {
  h = await startHarness({ EVENTFLOW_MAX_FRAME_BYTES: LIMIT });
  const { client, connections } = countingClient(h);
  const seen: StoredEvent[] = [];
  await client.subscribe('big', 'put', (event) => void seen.push(event));
  // From here on the connection is open: any change of state is its loss.
  const states: string[] = [];
  client.onStateChange((state) => states.push(state));
  const consumed: StoredEvent[] = [];
  await client.consume('big', 'job', (event: StoredEvent) => void consumed.push(event));
  expect(connections()).toBe(1);

  const put = (text: string): Promise<string> => client.publish({ domain: 'big', name: 'put', pid: 'p', data: { text } }, { timeout: 3_000 });
  // Pipelined: ASCII over the limit, non-ASCII under it in characters but over it in bytes (2 each in UTF-8), and
  // non-ASCII whose characters times 3 are over the limit but whose bytes fit (counted, and sent).
  const calls = [put('a'), failure(put('x'.repeat(5_000))), put('b'), failure(put('é'.repeat(3_000))), put('é'.repeat(1_500))] as const;
  const [a, overAscii, b, overBytes, fits] = await Promise.all(calls);
  expectRefused(overAscii, 'publish');
  expectRefused(overBytes, 'publish');
  expect([a, b, fits].every((id) => typeof id === 'string')).toBe(true);
  expectRefused(await failure(client.schedule(Date.now() + 60_000, { domain: 'big', name: 'put', pid: 'p', data: { text: 'z'.repeat(5_000) } }, { timeout: 3_000 })), 'schedule');

  // The subscription and the consumer of the same connection still live.
  await client.publish({ domain: 'big', name: 'job', pid: 'p', data: { after: true } });
  await eventually(() => seen.length === 3 && consumed.length === 1, 5_000, 'the events that fit, delivered');
  expect(seen.map((event) => event.id)).toEqual([a, b, fits]);
  expect(connections()).toBe(1);
  expect(states).toEqual([]);
});

it('a request over the limit made before the first welcome is refused once the limit is known, and the connection stays up', async () => {
  h = await startHarness({ EVENTFLOW_MAX_FRAME_BYTES: LIMIT });
  const { client, connections } = countingClient(h);
  // Made while connecting: it waits for the connection, as one resent after a reconnect does.
  const refused = failure(client.publish({ domain: 'big', name: 'put', pid: 'p', data: { text: 'x'.repeat(5_000) } }, { timeout: 3_000 }));
  const { error } = await refused;
  expect(isEventflowError(error, 'E_EVENTFLOW_INVALID_INPUT'), String(error)).toBe(true);
  await client.publish({ domain: 'big', name: 'put', pid: 'p', data: { text: 'fits' } });
  expect(client.state).toBe('open');
  expect(connections()).toBe(1);
});
