/**
 * Closing a worker (a rolling deploy) while the gateway does not answer: a gateway process that is
 * stopped (SIGSTOP) or a link that stops passing bytes. close({ drainTimeout }) is what a process
 * manager's grace period is sized by, so it must end within it, whatever the gateway does.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '@eventflow/core';
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
