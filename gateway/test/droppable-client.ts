/** A client whose connection a test can drop (the client reconnects at once, as after a network blip). */
import { consuming, EventflowClient, iterating, v4Reads, waiting, webSocketConnector, type Transport } from '@eventflow/core';
import type { Harness } from '@eventflow/test-support/harness';

export function droppable(harness: Harness): { client: EventflowClient; drop(): void } {
  let current: Transport | undefined;
  const connect = webSocketConnector(harness.gateway.url);
  const client = new EventflowClient(async (signal) => (current = await connect(signal)), {
    features: [consuming, waiting, v4Reads, iterating],
    reconnect: { minDelay: 20, maxDelay: 50 },
    onError: () => undefined,
  });
  return { client, drop: () => current?.close(4000, 'dropped by the test') };
}
