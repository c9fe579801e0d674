/**
 * Two gateways on one database through our hub (its own process), a default and a named group with members
 * on both, and the hub SIGKILLed mid-drain and started again: every job reaches one outcome per group,
 * handled once per group, no member ever over its concurrency.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { HubRouter } from '../src/v4/mesh-router.js';
import { eventually, fence, sleep } from '@eventflow/test-support/wait';
import { mysqlUnavailable, until, useHubFixture, type HubFixture } from './hub-support.js';
import { finished, gateway as gatewayCli, type Running } from './cli/support.js';

const fixture = useHubFixture();

const JOBS = 60;
const CONCURRENCY = 2;

const hubs = new Set<Running>();
afterEach(() => {
  for (const hub of hubs) hub.proc.kill('SIGKILL');
  hubs.clear();
});

async function startHubProcess(f: HubFixture): Promise<{ hub: Running; id: string }> {
  const hub = gatewayCli(['hub'], { ...(f.env() as Record<string, string | number>), EVENTFLOW_HUB_INTERNAL_IP: '127.0.0.1', EVENTFLOW_LOG_LEVEL: 'warn' });
  hubs.add(hub);
  await hub.printed('listening:', 30_000);
  const ids = [...hub.stdout().matchAll(/eventflow hub (\S+)/g)].map((match) => match[1]);
  const id = ids.at(-1);
  if (id === undefined) throw new Error(`no hub id in ${hub.stdout()}`);
  return { hub, id };
}

describe.skipIf(mysqlUnavailable !== undefined)('two gateways draining groups through our hub, the hub killed mid-drain', () => {
  it(`${JOBS} jobs, a default and a named group with members on both gateways: each handled once per group, within every member's concurrency`, async () => {
    const f = await fixture.setup();
    let { hub, id: hubId } = await startHubProcess(f);
    const gateways: Gateway[] = [];
    const clients: EventflowClient[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        gateways.push(await startGateway({ ...f.env(), EVENTFLOW_PORT: 0, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 200, EVENTFLOW_LOG_LEVEL: 'silent' }));
      }
      for (const gateway of gateways) await eventually(() => (gateway.router as HubRouter).connected.includes(hubId), 10_000, 'connected to the hub');
      const handled = { default: new Map<string, number>(), audit: new Map<string, number>() };
      let overCredit = 0;
      const member = (seen: Map<string, number>) => {
        let open = 0;
        return async (event: StoredEvent): Promise<void> => {
          open += 1;
          if (open > CONCURRENCY) overCredit += 1;
          seen.set(event.id, (seen.get(event.id) ?? 0) + 1);
          await sleep(15); // a job's work: deliveries overlap
          open -= 1;
        };
      };
      for (const gateway of gateways) {
        for (let m = 0; m < 2; m++) {
          const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
          clients.push(client);
          await client.consume('jobs', 'run', member(handled.default), { concurrency: CONCURRENCY });
          await client.consume('jobs', 'run', member(handled.audit), { concurrency: CONCURRENCY, group: 'audit' });
        }
      }
      const publisher = clients[0]!;
      const ids: string[] = [];
      for (let i = 0; i < JOBS; i++) ids.push(await publisher.publish({ domain: 'jobs', name: 'run', pid: `job-${i}` }));
      await until(() => handled.default.size + handled.audit.size, (n) => n >= JOBS / 2, 20_000, 'the drain under way');
      hub.proc.kill('SIGKILL');
      await finished(hub, 10_000);
      hubs.delete(hub);
      ({ hub, id: hubId } = await startHubProcess(f));
      for (const gateway of gateways) await eventually(() => (gateway.router as HubRouter).connected.includes(hubId), 15_000, 'connected to the new hub');

      await until(() => [handled.default.size, handled.audit.size], ([a, b]) => a === JOBS && b === JOBS, 30_000, 'every job handled by both groups');
      // A round trip on every consumer's connection: every delivery sent before has arrived.
      await fence(() => Promise.all(clients.map((client) => client.readEventlog('jobs', 'job-0'))));
      for (const seen of [handled.default, handled.audit]) {
        expect(new Set(seen.keys())).toEqual(new Set(ids));
        expect([...seen.values()].filter((n) => n !== 1)).toEqual([]);
      }
      expect(overCredit).toBe(0);
      const outcomes = async (): Promise<number[]> => {
        const [v4] = await f.db.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_published p JOIN event e ON e.id = p.event_id WHERE e.pid LIKE 'job-%' AND p.success IS NOT NULL AND p.failed IS NULL");
        const [audit] = await f.db.query<{ n: number }>("SELECT COUNT(*) AS n FROM eventflow_delivery d JOIN event e ON e.id = d.event_id WHERE e.pid LIKE 'job-%' AND d.grp = 'audit' AND d.outcome = 'success'");
        return [Number(v4?.n), Number(audit?.n)];
      };
      await until(outcomes, ([v4, audit]) => v4 === JOBS && audit === JOBS, 10_000, 'the outcomes of both groups');
    } finally {
      await Promise.allSettled(clients.map((client) => client.close()));
      await Promise.allSettled(gateways.map((gateway) => gateway.close()));
      hub.proc.kill('SIGTERM');
      await finished(hub, 10_000);
      hubs.delete(hub);
    }
  }, 90_000);
});
