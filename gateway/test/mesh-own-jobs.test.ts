/**
 * A gateway in a v4 hub mesh that consumes the jobs it publishes itself (issue 22). The hub routes each
 * `publish` back to the gateway (it subscribes for its consumer), often while the gateway is still claiming
 * the job for that consumer. The record used to take v4's consumer claim (`consumed_spoke`) outside any
 * lease, so the gateway's own claim lost to it and the job sat claimed by nobody: until our hub's lease sweep
 * took it back (30 s), or for ever beside a v4.8 hub, which never redelivers. The stand-in for v4.8 is our
 * hub with redelivery off, which then routes as v4.8 does (the guarded routing claim, `publish` once to each
 * subscriber); v4.8 itself needs Node >= 22.10. In the first test every record that comes after the gateway
 * routed its job meets the job's claim in flight (a store slow to claim); the second is a deployment's shape:
 * our hub in its own process, 100 jobs, a default and a named group.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { startGateway, type Gateway } from '../src/index.js';
import { HubRouter } from '../src/v4/mesh-router.js';
import { MysqlStore, type MysqlStoreOptions } from '../src/store/mysql/mysql.js';
import type { ClaimRequest, ClaimResult, DeliveryLedger } from '../src/store/ledger.js';
import { eventually, fence, FENCE_PID, isFence } from '@eventflow/test-support/wait';
import { mysqlUnavailable, until, useHubFixture, type HubFixture } from './hub-support.js';
import { finished, gateway as gatewayCli, type Running } from './cli/support.js';

const fixture = useHubFixture();

const JOBS = 100;

/** Hub processes still running: a test that timed out never reached its own stop. */
const hubs = new Set<Running>();
afterEach(() => {
  for (const hub of hubs) hub.proc.kill('SIGKILL');
  hubs.clear();
});

interface Setup {
  f: HubFixture;
  hub: Running;
  gateway: Gateway;
  clients: EventflowClient[];
}

/** Our hub (`eventflow-gateway hub`, from the sources) in its own process, and one gateway on it. */
async function start(): Promise<Setup> {
  const f = await fixture.setup();
  const hub = gatewayCli(['hub'], { ...(f.env() as Record<string, string | number>), EVENTFLOW_HUB_INTERNAL_IP: '127.0.0.1', EVENTFLOW_LOG_LEVEL: 'warn' });
  hubs.add(hub);
  let gateway: Gateway | undefined;
  try {
    await hub.printed('listening:', 30_000);
    const hubId = /eventflow hub (\S+)/.exec(hub.stdout())?.[1];
    gateway = await startGateway({
      ...f.env(),
      EVENTFLOW_PORT: 0,
      EVENTFLOW_STORE: 'mysql',
      EVENTFLOW_ROUTER: 'hubs',
      EVENTFLOW_MESH_POLL_MS: 200,
      EVENTFLOW_LOG_LEVEL: 'silent',
    });
    const router = gateway.router as HubRouter;
    await eventually(() => hubId !== undefined && router.connected.includes(hubId), 10_000, 'the gateway connected to the hub');
    return { f, hub, gateway, clients: [] };
  } catch (error) {
    await stop({ hub, gateway, clients: [] });
    throw error;
  }
}

async function stop({ hub, gateway, clients }: Pick<Setup, 'hub' | 'clients'> & { gateway: Gateway | undefined }): Promise<void> {
  await Promise.allSettled(clients.map((client) => client.close()));
  await gateway?.close();
  hub.proc.kill('SIGTERM');
  await finished(hub, 10_000);
  hubs.delete(hub);
}

/**
 * A store slow at one thing (the fault): a consumer group's claim starts only after the gateway has read an event by
 * id for a hub's `publish` record (the hub routing its own publish back here) and acted on the record, or after
 * `holdMs`. Records that come once the gateway routed its events thus find their claim in flight.
 */
class ClaimAfterHubRecordStore extends MysqlStore {
  readonly #holdMs: number;
  /** Resolved by the next read by id (a hub record being acted on). */
  #nextRead: { promise: Promise<void>; resolve: () => void } = ClaimAfterHubRecordStore.#gate();
  #gated: DeliveryLedger | undefined;

  constructor(options: MysqlStoreOptions, holdMs: number) {
    super(options);
    this.#holdMs = holdMs;
  }

  static #gate(): { promise: Promise<void>; resolve: () => void } {
    let resolve!: () => void;
    const promise = new Promise<void>((done) => (resolve = done));
    return { promise, resolve };
  }

  override async read(id: string): Promise<StoredEvent | undefined> {
    const event = await super.read(id);
    // A macrotask later: the reader's continuation (what it does with the record) has run by then.
    const { resolve } = this.#nextRead;
    this.#nextRead = ClaimAfterHubRecordStore.#gate();
    setImmediate(resolve);
    return event;
  }

  override ledger(): DeliveryLedger {
    const ledger = super.ledger();
    const claim = async (request: ClaimRequest): Promise<ClaimResult> => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const held = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.#holdMs)));
      await Promise.race([this.#nextRead.promise, held]);
      clearTimeout(timer);
      return ledger.claim(request);
    };
    this.#gated ??= new Proxy(ledger, {
      get: (target, key, receiver) => {
        if (key === 'claim') return claim;
        const value: unknown = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    return this.#gated;
  }
}

describe.skipIf(mysqlUnavailable !== undefined)('a gateway consuming the jobs it publishes, through a hub mesh', () => {
  it('the hub routing a job back while the gateway is claiming it never takes the job from the gateway (a hub that never redelivers, as v4.8)', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub({ EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES: 0 });
    const store = new ClaimAfterHubRecordStore({ ...f.db.options, v4Writers: true }, 2_000);
    const gateway = await startGateway(
      { ...f.env(), EVENTFLOW_PORT: 0, EVENTFLOW_STORE: 'mysql', EVENTFLOW_ROUTER: 'hubs', EVENTFLOW_MESH_POLL_MS: 200, EVENTFLOW_LOG_LEVEL: 'silent' },
      { store },
    );
    const client = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
    try {
      await eventually(() => (gateway.router as HubRouter).connected.includes(hub.id), 10_000, 'the gateway connected to the hub');
      const handled = new Map<string, number>();
      await client.consume('jobs', 'run', async (event) => void handled.set(event.id, (handled.get(event.id) ?? 0) + 1));
      await eventually(() => hub.subscriptions().some((s) => s.client === gateway.id && s.domain === 'jobs' && s.name === 'run'), 10_000, 'the subscription at the hub');
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await client.publish({ domain: 'jobs', name: 'run', pid: `job-${i}` }));
      // Each claim waits for the hub's record (tens of ms): without the fix the jobs are never handled.
      await until(() => handled.size, (size) => size === ids.length, 10_000, 'every job handled');
      await fence(() => client.readEventlog('jobs', 'job-0'));
      expect(new Set(handled.keys())).toEqual(new Set(ids));
      expect([...handled.values()].every((n) => n === 1)).toBe(true);
      await until(
        async () => Number((await f.db.query<{ n: number }>('SELECT COUNT(*) AS n FROM event_published WHERE success IS NOT NULL AND consumer = ?', [gateway.id]))[0]?.n),
        (n) => n === ids.length,
        5_000,
        "the outcomes in v4's columns",
      );
    } finally {
      await client.close().catch(() => undefined);
      await gateway.close();
    }
  }, 60_000);

  it(`${JOBS} jobs published and consumed through one gateway, with our hub: each handled at once, once per group`, async () => {
    const setup = await start();
    try {
      const { f, gateway } = setup;
      const client = (): EventflowClient => {
        const created = createClient(gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
        setup.clients.push(created);
        return created;
      };
      const handled = { default: new Map<string, number>(), named: new Map<string, number>() };
      const handledAt = new Map<string, number>();
      const count = (seen: Map<string, number>) => async (event: StoredEvent): Promise<void> => {
        if (isFence(event)) return;
        seen.set(event.id, (seen.get(event.id) ?? 0) + 1);
        if (seen === handled.default) handledAt.set(event.id, Date.now());
      };
      const consumer = client();
      await consumer.consume('jobs', 'run', count(handled.default));
      await consumer.consume('jobs', 'run', count(handled.named), { group: 'audit' });
      const publisher = client();
      // The hub holds the gateway's subscription once it routes a marker job instead of marking it orphan.
      let markers = 0;
      await until(
        async () => {
          const marker = await publisher.publish({ domain: 'jobs', name: 'run', pid: `${FENCE_PID}${++markers}` });
          const row = await until(() => f.published(marker), (published) => published.consumed_hub !== null, 5_000, 'the marker routed');
          return row.orphan === null;
        },
        (subscribed) => subscribed,
        10_000,
        'the hub holding the gateway subscription',
      );

      const publishedAt = new Map<string, number>();
      const started = Date.now();
      for (let i = 0; i < JOBS; i++) {
        const id = await publisher.publish({ domain: 'jobs', name: 'run', pid: `job-${i}` });
        publishedAt.set(id, Date.now());
      }
      const ids = [...publishedAt.keys()];
      // Far below the hub's claim lease (30 s): a job that is not handled at once waits for that lease, or for ever.
      await until(() => [handled.default.size, handled.named.size], ([byDefault, byNamed]) => byDefault === JOBS && byNamed === JOBS, 10_000, 'every job handled by both groups');
      const latencies = ids.map((id) => handledAt.get(id)! - publishedAt.get(id)!).sort((a, b) => a - b);
      if (process.env.EVENTFLOW_TEST_TIMINGS === '1') {
        console.log(`our hub: ${JOBS} jobs published in ${Math.max(...publishedAt.values()) - started} ms, handled by ${Date.now() - started} ms; publish → handler p50 ${latencies[JOBS / 2]} ms, max ${latencies.at(-1)} ms`);
      }

      // A round trip on the consumer's connection: every delivery sent before has arrived.
      await fence(() => consumer.readEventlog('jobs', 'job-0'));
      for (const seen of [handled.default, handled.named]) {
        expect(new Set(seen.keys())).toEqual(new Set(ids));
        expect([...seen.values()].every((n) => n === 1)).toBe(true);
      }
      // Each outcome recorded once, at the first attempt: v4's columns for the default group, the ledger for the named one.
      const outcomes = async (): Promise<number[]> => {
        const [v4] = await f.db.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_published p JOIN event e ON e.id = p.event_id WHERE e.pid LIKE 'job-%' AND p.success IS NOT NULL AND p.consumer = ?", [gateway.id]);
        const [audit] = await f.db.query<{ n: number }>(
          "SELECT COUNT(*) AS n FROM eventflow_delivery d JOIN event e ON e.id = d.event_id WHERE e.pid LIKE 'job-%' AND d.grp = 'audit' AND d.outcome = 'success' AND d.attempts = 1",
        );
        return [Number(v4?.n), Number(audit?.n)];
      };
      await until(outcomes, ([v4, audit]) => v4 === JOBS && audit === JOBS, 5_000, 'the outcomes of both groups');
    } finally {
      await stop(setup);
    }
  }, 60_000);
});
