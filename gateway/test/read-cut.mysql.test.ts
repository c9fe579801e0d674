/**
 * The MySQL store's read of a domain's new events (the dispatcher's pull after a routed event,
 * readPublishedAfter) whose connection is lost under it, as an operator's KILL CONNECTION or a cut
 * link does: read again on another connection. The pull failed before, and nothing pulled the
 * domain again until its next publish: a request()'s outcome stored then reached no wait (the
 * request() ended in E_EVENTFLOW_WAIT_TIMEOUT, its outcome in the store), and no subscriber.
 *
 * A pull that fails all the same (the read again cut too, or the store down a moment) is made again
 * a second later (Dispatcher PULL_AGAIN_MS), not at the domain's next publish.
 *
 * The connection is cut by a proxy in front of the server, at the read's COM_STMT_EXECUTE: the only
 * statement of the test that carries the domain as a string parameter of its own (an append's rows
 * are JSON), so the cut lands on that read and no other.
 *
 * The gateway reads its own batches back from memory while no other write has taken a position since
 * (store/recent.ts): a scheduled event of another domain fires first, at a position of its own, so the
 * publish after it is read from the store.
 */
import { describe, expect, it } from 'vitest';
import { createClient, type StoredEvent } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { metric } from '@eventflow/test-support/gateway-http';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { statementCuttingProxy } from './commit-cutting-proxy.js';

const DOMAIN = 'cutread';

/** A scheduled event of another domain fired: the store's window of batches just committed starts again after it. */
async function fireElsewhere(client: ReturnType<typeof createClient>): Promise<void> {
  let fired = false;
  await client.subscribe('cutread-other', '*', () => void (fired = true));
  await client.schedule(Date.now(), { domain: 'cutread-other', name: 'due', pid: 'p0' });
  await eventually(() => fired, 5_000, 'the scheduled event fired');
}

describe.skipIf(mysqlUnavailable !== undefined)("a read of a domain's new events whose connection is cut (MySQL)", () => {
  const databases = useTestDatabases();

  it('is read again: the wait for the outcome and the subscriber get it, with nothing published after it', async () => {
    const db = await databases.fresh();
    // A string parameter of a prepared statement: its length (one byte under 251), then its bytes.
    const proxy = await statementCuttingProxy(Buffer.from([DOMAIN.length, ...Buffer.from(DOMAIN)]));
    databases.onCleanup(() => proxy.close());
    const gateway = await startGateway({ ...mysqlGatewayEnv({ ...db.options, host: '127.0.0.1', port: proxy.port }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
    databases.onCleanup(() => gateway.close());
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close());
    const seen: StoredEvent[] = [];
    await client.subscribe(DOMAIN, '*', (event) => void seen.push(event));
    await client.publish({ domain: DOMAIN, name: 'started', pid: 'p1' });
    await eventually(() => seen.length === 1, 5_000, 'the first event at the subscriber');
    // request()'s wait, registered before its outcome is stored.
    const outcome = client.wait(DOMAIN, 'p1', ['done'], 8_000);
    await eventually(async () => (await metric(gateway, 'eventflow_waits ')) === 1, 5_000, 'the wait registered');

    await fireElsewhere(client);
    proxy.arm();
    const done = await client.publish({ domain: DOMAIN, name: 'done', pid: 'p1' });
    await eventually(() => proxy.cut === 1, 5_000, "the pull's read cut");
    expect((await outcome).id).toBe(done);
    await eventually(() => seen.length === 2, 5_000, 'the outcome at the subscriber');
    expect(seen.map((event) => event.name)).toEqual(['started', 'done']);
  });
  it('a pull that fails (its read again cut too) is made again a second later: the wait for the outcome gets it', async () => {
    const db = await databases.fresh();
    const proxy = await statementCuttingProxy(Buffer.from([DOMAIN.length, ...Buffer.from(DOMAIN)]));
    databases.onCleanup(() => proxy.close());
    const gateway = await startGateway({ ...mysqlGatewayEnv({ ...db.options, host: '127.0.0.1', port: proxy.port }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
    databases.onCleanup(() => gateway.close());
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close());
    const outcome = client.wait(DOMAIN, 'p1', ['done'], 8_000);
    await eventually(async () => (await metric(gateway, 'eventflow_waits ')) === 1, 5_000, 'the wait registered');
    await fireElsewhere(client);
    proxy.arm(2);
    const done = await client.publish({ domain: DOMAIN, name: 'done', pid: 'p1' });
    await eventually(() => proxy.cut === 2, 5_000, "the pull's read and its read again cut");
    expect((await outcome).id).toBe(done);
  });
});
