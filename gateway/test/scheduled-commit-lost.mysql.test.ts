/**
 * A firing of scheduled events whose COMMIT the server carries out while the answer is lost (the
 * connection killed or cut at that moment; a proxy of the test's own drops the answer and cuts the
 * connection): the store reads back what it fired, and the scheduler routes those events. They were
 * fired in the store (executed, positioned) but never routed: the next run found nothing due, so a
 * subscriber (or a wait whose outcome is a scheduled event) got it only at the domain's next publish,
 * and its scheduled row stayed unsettled.
 */
import { connect, createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createClient, type StoredEvent } from '@eventflow/core';
import { startGateway } from '../src/index.js';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, server, useTestDatabases } from '@eventflow/test-support/mysql';

/** A TCP proxy in front of MySQL that, once armed, lets the next COMMIT through and then cuts that connection instead of answering. */
async function commitCuttingProxy(): Promise<{ port: number; arm(): void; readonly cut: number; close(): Promise<void> }> {
  const commit = Buffer.from([0x03, ...Buffer.from('COMMIT')]);
  let armed = false;
  let cut = 0;
  const sockets = new Set<Socket>();
  const proxy = createServer((client) => {
    const upstream = connect({ host: server.host, port: server.port });
    let cutting = false;
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (chunk: Buffer) => {
      if (armed && chunk.includes(commit)) {
        armed = false;
        cutting = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!cutting) return void client.write(chunk);
      cut += 1;
      client.destroy();
      upstream.destroy();
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    port: (proxy.address() as { port: number }).port,
    arm: () => void (armed = true),
    get cut() {
      return cut;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

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
