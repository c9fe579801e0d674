/**
 * The console's operations through a real gateway and client: domains, processes and timelines
 * filtered by a token's rights (EVENTFLOW_AUTH=jwt), scheduled events listed and cancelled only
 * with `schedule`, the gateway's figures, and subscriptions that start from the last N events.
 */
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelScheduled, type EventflowClient, gatewayStats, isEventflowError, listDomains, listProcesses, listScheduled, readLatency, readTimeline, type StoredEvent } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';

const SECRET = 'catalog-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const token = (claims: Record<string, string[]>): Promise<string> =>
  new SignJWT({ eventflow: claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));

describe('console operations', () => {
  let harness: Harness;
  let admin: EventflowClient;
  let reader: EventflowClient;
  let scheduledId: string;

  beforeAll(async () => {
    harness = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    admin = harness.client({ token: await token({ read: ['*'], subscribe: ['*'], publish: ['*'], schedule: ['*'], consume: ['*'] }) });
    reader = harness.client({ token: await token({ read: ['orders'], subscribe: ['orders'] }) });
    for (let i = 0; i < 5; i++) await admin.publish({ domain: 'orders', name: 'placed', pid: `o-${i}`, data: { n: i } });
    await admin.publish({ domain: 'orders', name: 'shipped', pid: 'o-1', data: { shipped: true } });
    await admin.publish({ domain: 'billing', name: 'charged', pid: 'b-1', data: {} });
    scheduledId = await admin.schedule(Date.now() + 3_600_000, { domain: 'orders', name: 'remind', pid: 'o-2', data: {} });
    await admin.schedule(Date.now() + 3_600_000, { domain: 'billing', name: 'remind', pid: 'b-1', data: {} });
  });
  afterAll(() => harness?.stop());

  it('lists only the domains the token may read, with what it may do there', async () => {
    const { domains, actions } = await listDomains(reader);
    expect(domains.map((d) => [d.domain, d.events, d.actions])).toEqual([['orders', 6, ['read', 'subscribe']]]);
    expect(actions).toEqual(['read', 'subscribe']);
    expect((await listDomains(admin)).domains.map((d) => d.domain)).toEqual(['billing', 'orders']);
  });

  it('pages processes with a cursor and by prefix, and refuses a domain the token may not read', async () => {
    const first = await listProcesses(reader, 'orders', { limit: 2 });
    expect(first.processes.map((p) => p.pid)).toEqual(['o-0', 'o-1']);
    expect(first.processes[1]).toMatchObject({ events: 2 });
    const second = await listProcesses(reader, 'orders', { after: first.next, limit: 10 });
    expect(second.processes.map((p) => p.pid)).toEqual(['o-2', 'o-3', 'o-4']);
    expect(second.next).toBeUndefined();
    expect((await listProcesses(reader, 'orders', { prefix: 'o-3' })).processes.map((p) => p.pid)).toEqual(['o-3']);
    // A prefix no pid can have (pids are printable ASCII) is bad input, on every store.
    for (const prefix of ['ordé', 'o-\ud83d', '📦']) {
      const bad = await listProcesses(reader, 'orders', { prefix }).catch((error: unknown) => error);
      expect(isEventflowError(bad, 'E_EVENTFLOW_INVALID_INPUT') && bad.message, prefix).toContain('printable ASCII');
    }
    // By recent activity: o-2's reminder was scheduled last, o-1 shipped after the others were placed.
    const recent = await listProcesses(reader, 'orders', { order: 'recent', limit: 2 });
    expect(recent.processes.map((p) => p.pid)).toEqual(['o-2', 'o-1']);
    expect(recent.next).toBeUndefined();
    const older = await listProcesses(reader, 'orders', { order: 'recent', cursor: recent.cursor });
    expect(older.processes.map((p) => p.pid)).toEqual(['o-4', 'o-3', 'o-0']);
    expect(older.cursor).toBeUndefined();
    const refused = await listProcesses(reader, 'billing').catch((error: unknown) => error);
    expect(isEventflowError(refused, 'E_EVENTFLOW_FORBIDDEN')).toBe(true);
  });

  it('readLatency: queue, handler and end-to-end percentiles of a name\'s settled deliveries, the slowest processes first, with `read` on the domain', async () => {
    // Handlers that take 20, 40 … 100 ms, by the pid's number.
    const worker = harness.client({ token: await token({ read: ['*'], publish: ['*'], consume: ['*'] }) });
    let settled = 0;
    await worker.consume('latency', 'work', async (event) => {
      await new Promise((resolve) => setTimeout(resolve, (event.data as { ms: number }).ms));
      settled++;
    }, { concurrency: 5 });
    const published = Date.now();
    for (let i = 1; i <= 5; i++) await admin.publish({ domain: 'latency', name: 'work', pid: `w-${i}`, data: { ms: i * 20 } });
    await eventually(async () => (await readLatency(admin, 'latency', 'work')).count === 5 || undefined, 10_000, 'five settled');
    const summary = await readLatency(admin, 'latency', 'work', { slowest: 2 });
    expect(settled).toBe(5);
    expect(summary).toMatchObject({ count: 5, truncated: false });
    expect(summary.slowest.map((sample) => sample.pid)).toEqual(['w-5', 'w-4']);
    const [slowest] = summary.slowest;
    expect(slowest?.handlerMs).toBeGreaterThanOrEqual(95);
    expect(slowest?.totalMs).toBe(Date.parse(slowest?.settledAt ?? '') - Date.parse(slowest?.storedAt ?? ''));
    expect(slowest?.queueMs).toBe(Date.parse(slowest?.claimedAt ?? '') - Date.parse(slowest?.storedAt ?? ''));
    expect(slowest?.totalMs).toBeLessThanOrEqual(Date.now() - published);
    expect(summary.handler?.p50).toBeGreaterThanOrEqual(55);
    expect(summary.handler?.p99).toBe(summary.handler?.max);
    expect(summary.handler?.max).toBe(slowest?.handlerMs);
    expect(summary.total?.p50).toBeGreaterThanOrEqual(summary.handler?.p50 ?? Infinity);
    // A window that ends before them, another group, another name: nothing.
    expect((await readLatency(admin, 'latency', 'work', { group: 'other' })).count).toBe(0);
    expect((await readLatency(admin, 'latency', 'other')).count).toBe(0);
    const refused = await readLatency(reader, 'latency', 'work').catch((error: unknown) => error);
    expect(isEventflowError(refused, 'E_EVENTFLOW_FORBIDDEN')).toBe(true);
    await worker.close();
  });

  it('reads a timeline in pages with each event and its fate', async () => {
    const page = await readTimeline(reader, 'orders', 'o-1', { limit: 1 });
    expect(page.count).toBe(2);
    expect((page.events as StoredEvent[]).map((e) => e.name)).toEqual(['placed']);
    expect(page.fates[0]).toMatchObject({ published: true });
    const rest = await readTimeline(reader, 'orders', 'o-1', { after: page.next });
    expect((rest.events as StoredEvent[]).map((e) => e.name)).toEqual(['shipped']);
  });

  it('lists the scheduled events the token may read, and cancels only with `schedule`', async () => {
    const listed = await listScheduled(reader);
    expect(listed.scheduled.map((s) => s.id)).toEqual([scheduledId]);
    expect((await listScheduled(admin)).scheduled).toHaveLength(2);
    const refused = await cancelScheduled(reader, scheduledId).catch((error: unknown) => error);
    expect(isEventflowError(refused, 'E_EVENTFLOW_FORBIDDEN')).toBe(true);
    expect(await cancelScheduled(admin, scheduledId)).toBe(true);
    expect(await cancelScheduled(admin, scheduledId)).toBe(false);
    expect((await listScheduled(reader)).scheduled).toEqual([]);
  });

  it('reports the gateway figures', async () => {
    const stats = await gatewayStats(admin);
    expect(stats.connections).toBeGreaterThanOrEqual(2);
    expect(stats.published).toBeGreaterThanOrEqual(9);
    expect(stats.ready).toBe(true);
    expect(stats.storeLatencyP99Ms).toBeGreaterThan(0);
  });

  it('starts a subscription from the last N events, or from a position, then goes on live', async () => {
    const last: string[] = [];
    await reader.subscribe('orders', '*', (event) => last.push(event.pid), { last: 2 });
    await eventually(() => (last.length >= 2 ? true : undefined), 5_000, 'the last two events replayed');
    expect(last).toEqual(['o-4', 'o-1']);
    await admin.publish({ domain: 'orders', name: 'placed', pid: 'o-5', data: {} });
    await eventually(() => (last.includes('o-5') ? true : undefined), 5_000, 'the live event');
    expect(last).toEqual(['o-4', 'o-1', 'o-5']);

    const timeline = await readTimeline(admin, 'orders', 'o-3');
    const from: string[] = [];
    await admin.subscribe('orders', 'placed', (event) => from.push(event.pid), { after: (timeline.events[0] as StoredEvent).position });
    await eventually(() => (from.length >= 2 ? true : undefined), 5_000, 'the events after the position');
    expect(from).toEqual(['o-4', 'o-5']);
  });

  it('gives a listener that joins a shared subscription the history it asked for, without gaps or duplicates for the others', async () => {
    const client = harness.client({ token: await token({ read: ['*'], subscribe: ['*'], publish: ['*'] }) });
    for (let i = 0; i < 6; i++) await admin.publish({ domain: 'shared', name: i % 2 ? 'odd' : 'even', pid: `s-${i}`, data: {} });
    const seen = { live: [] as string[], last: [] as string[], after: [] as string[], odd: [] as string[], named: [] as string[] };
    await client.subscribe('shared', '*', (event) => seen.live.push(event.pid));
    await client.subscribe('shared', 'odd', (event) => seen.odd.push(event.pid));
    // Each joins a subscription the client has already: its own history first, then live.
    await client.subscribe('shared', '*', (event) => seen.last.push(event.pid), { last: 3 });
    const { position } = (await readTimeline(admin, 'shared', 's-1')).events[0] as StoredEvent;
    await client.subscribe('shared', '*', (event) => seen.after.push(event.pid), { after: position });
    await client.subscribe('shared', 'odd', (event) => seen.named.push(event.pid), { last: 2 });
    await admin.publish({ domain: 'shared', name: 'even', pid: 's-6', data: {} });
    await eventually(() => (seen.after.includes('s-6') && seen.last.includes('s-6') && seen.named.length >= 2 ? true : undefined), 5_000, 'histories and the live event');
    // A marker proves nothing else is on its way.
    await admin.publish({ domain: 'shared', name: 'odd', pid: 'marker', data: {} });
    await eventually(() => (seen.live.includes('marker') && seen.after.includes('marker') && seen.named.includes('marker') ? true : undefined), 5_000, 'the marker');
    expect(seen.live).toEqual(['s-6', 'marker']);
    expect(seen.last).toEqual(['s-3', 's-4', 's-5', 's-6', 'marker']);
    expect(seen.after).toEqual(['s-2', 's-3', 's-4', 's-5', 's-6', 'marker']);
    expect(seen.odd).toEqual(['marker']);
    expect(seen.named).toEqual(['s-3', 's-5', 'marker']);
  });

  it("gives each event its consumer groups' deliveries: a retried one counts its attempts, its success clears the error", async () => {
    let calls = 0;
    await admin.consume('audit', 'checked', (_event, context) => {
      if (++calls === 1) context.retry(0, new Error('first try fails'));
    }, { group: 'auditors' });
    await admin.publish({ domain: 'audit', name: 'checked', pid: 'a-1', data: {} });
    const fate = await eventually(async () => {
      const { fates } = await readTimeline(admin, 'audit', 'a-1');
      return fates[0]?.deliveries?.[0]?.outcome === 'success' ? fates[0] : undefined;
    }, 10_000, 'the retried event settled');
    expect(fate.deliveries).toEqual([{ group: 'auditors', name: 'checked', attempts: 2, outcome: 'success', claimedAt: expect.any(String), settledAt: expect.any(String) }]);
    // The second attempt's delivery: began after the first's retry, ended after it began.
    expect(Date.parse(fate.deliveries?.[0]?.settledAt ?? '')).toBeGreaterThanOrEqual(Date.parse(fate.deliveries?.[0]?.claimedAt ?? ''));
  });
});
