/**
 * Two gateways with the embedded router (EVENTFLOW_ROUTER=local, the default) on one MySQL database: two replicas
 * behind a load balancer, or a rolling deploy's old and new process. Each routes only what it stores. Before, a
 * subscriber on one never saw the other's publishes, and a request() whose worker was on the other timed out, with
 * /readyz ready. Now the gateway that finds another publisher in its store says so (log, /readyz degraded) and reads
 * its domains every second: late, never lost (router/elsewhere.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';

interface RouterCheck {
  kind: string;
  ready: boolean;
  degraded?: boolean;
  reason?: string;
}

describe.skipIf(mysqlUnavailable !== undefined)('two gateways with the embedded router on one MySQL database', () => {
  const { fresh } = useTestDatabases();
  const gateways: Gateway[] = [];
  const clients: EventflowClient[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close({ drainTimeout: 0 });
    for (const gateway of gateways.splice(0)) await gateway.close();
  });

  async function gateway(env: Record<string, string | number>, lines: string[]): Promise<Gateway> {
    const started = await startGateway({ ...env, EVENTFLOW_LOG_LEVEL: 'info' }, { logDestination: (line) => lines.push(line) });
    gateways.push(started);
    return started;
  }
  const client = (on: Gateway): EventflowClient => {
    const made = createClient(on.url, { onError: () => undefined });
    clients.push(made);
    return made;
  };
  const router = async (on: Gateway): Promise<RouterCheck> => ((await (await fetch(`${on.httpUrl}readyz`)).json()) as { checks: { router: RouterCheck } }).checks.router;

  it("the second one's subscribers, waits and consumers get the first one's events, and both say what to set", async () => {
    const db = await fresh();
    const env = { EVENTFLOW_PORT: 0, EVENTFLOW_MAX_PUBLISH_RATE: 0, ...mysqlGatewayEnv(db.options) };
    const aLines: string[] = [];
    const bLines: string[] = [];
    const a = await gateway(env, aLines);
    const b = await gateway(env, bLines);

    const seen: StoredEvent[] = [];
    await client(b).subscribe('orders', 'placed', (event) => void seen.push(event));
    await client(a).publish({ domain: 'orders', name: 'placed', pid: 'o1', data: { n: 1 } });
    await eventually(() => seen.length === 1, 10_000, "the other gateway's event on this one's subscriber");
    expect(seen[0]?.data).toEqual({ n: 1 });
    expect(await router(b)).toMatchObject({ kind: 'local', ready: true, degraded: true, reason: expect.stringContaining('EVENTFLOW_ROUTER=nats') });
    expect(bLines.filter((line) => line.includes('another gateway (or a v4 hub) publishes to this database'))).toHaveLength(1);

    // A finds only its own events as long as B publishes nothing: time is what is tested, two of its looks (every 2 s).
    await sleep(4_500);
    expect(await router(a)).toEqual({ kind: 'local', ready: true });
    expect(aLines.filter((line) => line.includes('another gateway (or a v4 hub)'))).toHaveLength(0);

    // A request() on B whose worker is on A: its job reaches A's consumer, its outcome B's wait.
    const worker = client(a);
    await worker.consume('orders', 'ship', async (event) => {
      await worker.publish({ domain: 'orders', name: 'shipped', pid: event.pid, rid: event.id });
    });
    const outcome = await client(b).request({ domain: 'orders', name: 'ship', pid: 'o2' }, { outcomes: ['shipped'], timeout: 15_000 });
    expect(outcome.name).toBe('shipped');
    // B published the job: now A says so too.
    await eventually(async () => (await router(a)).degraded === true, 10_000, 'A degraded');

  }, 60_000);

  it("a gateway restarted on its database fires what it scheduled before: not another gateway's event", async () => {
    const db = await fresh();
    const env = { EVENTFLOW_PORT: 0, EVENTFLOW_MAX_PUBLISH_RATE: 0, ...mysqlGatewayEnv(db.options) };
    const before = await gateway(env, []);
    await client(before).schedule(new Date(Date.now() + 2_500), { domain: 'orders', name: 'remind', pid: 'o1' });
    await before.close();
    const lines: string[] = [];
    const after = await gateway(env, lines);
    const seen: StoredEvent[] = [];
    await client(after).subscribe('orders', 'remind', (event) => void seen.push(event));
    await eventually(() => seen.length === 1, 10_000, 'the scheduled event fired');
    // Time is what is tested: two looks (every 2 s) past the firing.
    await sleep(4_500);
    expect(await router(after)).toEqual({ kind: 'local', ready: true });
    expect(lines.filter((line) => line.includes('another gateway (or a v4 hub)'))).toHaveLength(0);
  }, 30_000);
});
