/**
 * A firing of scheduled events whose COMMIT the server carries out while the answer is lost (the
 * connection killed or cut at that moment; a proxy of the test's own drops the answer and cuts the
 * connection): the store reads back what it fired, and the scheduler routes those events. They were
 * fired in the store (executed, positioned) but never routed: the next run found nothing due, so a
 * subscriber (or a wait whose outcome is a scheduled event) got it only at the domain's next publish,
 * and its scheduled row stayed unsettled.
 */
import { describe, expect, it } from 'vitest';
import { createClient, type StoredEvent } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { commitCuttingProxy } from './commit-cutting-proxy.js';

describe.skipIf(mysqlUnavailable !== undefined)('a firing of scheduled events whose COMMIT answer is lost (MySQL)', () => {
  const databases = useTestDatabases();

  it('routes what it fired: the subscriber gets the event at its due time, and its scheduled row is settled', async () => {
    const db = await databases.fresh();
    const proxy = await commitCuttingProxy();
    databases.onCleanup(() => proxy.close());
    const gateway = await startGateway({ ...mysqlGatewayEnv({ ...db.options, host: '127.0.0.1', port: proxy.port }), EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' });
    databases.onCleanup(() => gateway.close());
    const client = createClient(gateway.url, { onError: () => undefined });
    databases.onCleanup(() => client.close());
    const seen: StoredEvent[] = [];
    await client.subscribe('timers', '*', (event) => void seen.push(event));
    const id = await client.schedule(new Date(Date.now() + 1_500), { domain: 'timers', name: 'expired', pid: 't1' });
    // Nothing else commits on this idle gateway until then: the next COMMIT is the firing's.
    proxy.arm();
    await eventually(() => proxy.cut === 1, 10_000, "the firing's COMMIT");
    await eventually(() => seen.length === 1, 5_000, 'the fired event at the subscriber');
    expect(seen[0]).toMatchObject({ id, name: 'expired' });
    const [row] = await db.query<{ executed: string | null; success: string | null }>('SELECT executed, success FROM event_scheduled WHERE event_id = ?', [id]);
    expect(row?.executed).not.toBeNull();
    await eventually(async () => (await db.query<{ success: string | null }>('SELECT success FROM event_scheduled WHERE event_id = ?', [id]))[0]?.success ?? undefined, 5_000, 'the scheduled row settled');
  });
});
