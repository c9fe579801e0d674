/**
 * request() and wait() from a client that has never reached its gateway (a wrong URL, a gateway not started):
 * request(), like every call, fails at once with E_EVENTFLOW_OFFLINE naming the cause; wait(), which rides out an
 * outage, ends by its timeout. Both hung for good.
 */
import { afterEach, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { createClient, type EventflowClient } from '@eventflow/core';

let client: EventflowClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/** A port nothing listens on: taken, then given back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

it('request() to a gateway never reached rejects with E_EVENTFLOW_OFFLINE well within its timeout, not never', async () => {
  client = createClient(`ws://127.0.0.1:${await closedPort()}/`, { onError: () => undefined, reconnect: { minDelay: 20, maxDelay: 50 } });
  const started = performance.now();
  // The old client waited for the wait's registration, which needs a connection, and never published: it hung for good.
  const outcome = await client.request({ domain: 'jobs', name: 'run', pid: 'p1' }, { timeout: 5_000 }).then(() => 'resolved', (error: unknown) => error);
  expect(outcome).toMatchObject({ code: 'E_EVENTFLOW_OFFLINE' });
  expect((outcome as Error).message).toContain('publish');
  expect(performance.now() - started).toBeLessThan(4_000);
});

it('wait() on a gateway never reached ends by its timeout, not never', async () => {
  client = createClient(`ws://127.0.0.1:${await closedPort()}/`, { onError: () => undefined, reconnect: { minDelay: 20, maxDelay: 50 } });
  const started = performance.now();
  const outcome = await client.wait('jobs', 'p1', ['success'], 500).then(() => 'resolved', (error: unknown) => error);
  console.info(`wait() unreached: ${JSON.stringify((outcome as { code?: string }).code)} after ${Math.round(performance.now() - started)} ms`);
  // Before, its clock started only at a registration, which needs a connection: it hung until the client closed.
  expect(outcome).toMatchObject({ code: 'E_EVENTFLOW_WAIT_TIMEOUT' });
  expect(performance.now() - started).toBeLessThan(3_000);
});
