/**
 * A gateway among NATS gateways on one database that does not announce its events to them: left at
 * EVENTFLOW_ROUTER=local (a rolling deploy's replica without the setting), or on another subject prefix.
 * Before, the NATS gateways took its events as another NATS gateway's, which they are told of: their
 * subscribers and waits got them only when something else made them read the domain, and /readyz said
 * ready. Now each NATS gateway hears the others' ids over NATS (router/nats/members.ts), finds a publisher
 * in its store that it has not heard (router/elsewhere.ts), says so, and reads its domains every second.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import type { NatsRouter } from '../src/router/nats/router.js';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { natsUnavailable, natsUrl, uniqueSubjectPrefix } from '@eventflow/test-support/nats';
import { natsGatewaySettings, readyz } from './nats-support.js';

const databases = useTestDatabases();
const unavailable = mysqlUnavailable ?? natsUnavailable;
if (unavailable !== undefined) console.warn(`Skipping the unannounced-publisher tests: ${unavailable}`);

const WARNING = 'publishes to this database without announcing its events over NATS here';

describe.skipIf(unavailable !== undefined)('a publisher the NATS gateways of its database are not told of', () => {
  const gateways: Gateway[] = [];
  const clients: EventflowClient[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close({ drainTimeout: 0 });
    for (const gateway of gateways.splice(0)) await gateway.close();
  });

  async function gateway(settings: Record<string, string | number>, lines: string[] = []): Promise<Gateway> {
    const started = await startGateway({ ...settings, EVENTFLOW_MAX_PUBLISH_RATE: 0, EVENTFLOW_LOG_LEVEL: 'info' }, { logDestination: (line) => lines.push(line) });
    gateways.push(started);
    if (settings.EVENTFLOW_ROUTER === 'nats') await eventually(() => (started.router as NatsRouter).connected, 10_000, 'connected to NATS');
    return started;
  }
  const client = (on: Gateway): EventflowClient => {
    const made = createClient(on.url, { onError: () => undefined });
    clients.push(made);
    return made;
  };
  const router = async (on: Gateway) => (await readyz(on)).body.checks.router;

  it('a gateway left at EVENTFLOW_ROUTER=local: the NATS ones say so and get its events, request() included; NATS gateways alone are not flagged', async () => {
    const db = await databases.fresh();
    const nats = natsGatewaySettings(db, natsUrl, uniqueSubjectPrefix());
    const aLines: string[] = [];
    const a = await gateway(nats, aLines);
    const b = await gateway(nats);

    // Two NATS gateways publishing, past a new gateway's first heartbeat period (6 s) and two looks (every 2 s):
    // each hears the other, so neither takes the other's events as unannounced.
    const started = Date.now();
    for (let i = 0; Date.now() - started < 10_500; i++) {
      await client(i % 2 === 0 ? a : b).publish({ domain: 'orders', name: 'noted', pid: `n${i}` });
      await sleep(250);
    }
    expect(await router(a)).toEqual({ kind: 'nats', ready: true });
    expect(await router(b)).toEqual({ kind: 'nats', ready: true });

    const { EVENTFLOW_ROUTER: _nats, EVENTFLOW_NATS_SERVERS: _servers, EVENTFLOW_NATS_SUBJECT_PREFIX: _prefix, ...local } = nats;
    const l = await gateway({ ...local, EVENTFLOW_ROUTER: 'local' });
    const seen: StoredEvent[] = [];
    await client(a).subscribe('orders', 'placed', (event) => void seen.push(event));
    await client(l).publish({ domain: 'orders', name: 'placed', pid: 'o1', data: { n: 1 } });
    // A look (2 s) finds it, a read of the domain (every 1 s from then) delivers it.
    await eventually(() => seen.length === 1, 6_000, "the local gateway's event on a NATS gateway's subscriber");
    expect(seen[0]?.data).toEqual({ n: 1 });
    expect(await router(a)).toMatchObject({ kind: 'nats', ready: true, degraded: true, reason: expect.stringContaining('EVENTFLOW_ROUTER=nats, with the same NATS servers and subject prefix') });
    const warnings = aLines.filter((line) => line.includes(WARNING));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(l.id);
    await eventually(async () => (await router(b)).degraded === true, 6_000, 'B degraded');

    // A request() on A whose worker is on the local gateway: the job reaches it (it reads the NATS gateways'
    // events by itself), and its outcome reaches A's wait.
    const worker = client(l);
    await worker.consume('orders', 'ship', async (event) => {
      await worker.publish({ domain: 'orders', name: 'shipped', pid: event.pid, rid: event.id });
    });
    const outcome = await client(a).request({ domain: 'orders', name: 'ship', pid: 'o2' }, { outcomes: ['shipped'], timeout: 15_000 });
    expect(outcome.name).toBe('shipped');
  }, 60_000);

  it('a NATS gateway on another subject prefix is unannounced too', async () => {
    const db = await databases.fresh();
    const a = await gateway(natsGatewaySettings(db, natsUrl, uniqueSubjectPrefix()));
    const other = await gateway(natsGatewaySettings(db, natsUrl, uniqueSubjectPrefix()));
    const seen: StoredEvent[] = [];
    await client(a).subscribe('orders', 'placed', (event) => void seen.push(event));
    // Past A's first heartbeat period, in which it judges nobody.
    await sleep(6_500);
    await client(other).publish({ domain: 'orders', name: 'placed', pid: 'o1' });
    await eventually(() => seen.length === 1, 6_000, "the other prefix's event on A's subscriber");
    expect(await router(a)).toMatchObject({ degraded: true, reason: expect.stringContaining('without announcing its events over NATS') });
  }, 30_000);
});
