/**
 * What operator operations cost and show a token (issue 23): `listScheduled` reads only the domains
 * the token may read (in the store's query, with a row budget per request), `cancelScheduled` acts
 * only on the stored row's domain and answers a foreign id as an unknown one, `groups` and
 * `deadLetters` need `consume` on each domain listed, `listDomains` costs a connection that may read
 * nothing no store read, and one connection creates at most
 * EVENTFLOW_MAX_GROUPS_PER_CONNECTION consumer groups.
 */
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { cancelScheduled, isEventflowError, listDeadLetters, listDomains, listGroups, listScheduled, readTimeline, type StoredEvent } from '@eventflow/core';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const SECRET = 'operator-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const token = (claims: Record<string, string[]>): Promise<string> =>
  new SignJWT({ eventflow: claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));
const jwt = { EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_MAX_PUBLISH_RATE: 0 };

/** Schedules `count` events of `domain` an hour from now, straight into the store (1,000 per transaction). */
async function scheduleMany(harness: Harness, domain: string, count: number): Promise<void> {
  const at = new Date(Date.now() + 3_600_000);
  for (let from = 0; from < count; from += 1000) {
    const batch = Array.from({ length: Math.min(1000, count - from) }, (_, i) => ({
      event: { id: `${domain}-s${from + i}`, domain, name: 'remind', pid: `p${from + i}`, data: {} },
      options: { publisher: 'test', scheduledAt: at },
    }));
    await harness.gateway.store.appendBatch(batch);
  }
}

/** Counts the store's scheduled-event reads and the rows they return; `unfiltered`: as a store that cannot select by domain patterns. */
function countScheduledReads(harness: Harness, unfiltered = false): { queries: number; rows: number } {
  const catalog = harness.gateway.store.catalog;
  const read = catalog.scheduled.bind(catalog);
  const counts = { queries: 0, rows: 0 };
  catalog.scheduled = async (query: Parameters<typeof read>[0]) => {
    counts.queries++;
    const rows = await read(unfiltered ? { ...query, domains: undefined } : query);
    counts.rows += rows.length;
    return rows;
  };
  return counts;
}

describe('listScheduled', () => {
  it("reads only the domains the token may read: one query for a token that may read none of 3,000 scheduled events' domains", async () => {
    h = await startHarness(jwt);
    await scheduleMany(h, 'tenant-b', 3000);
    await scheduleMany(h, 'tenant-a', 3);
    const counts = countScheduledReads(h);
    const outsider = h.client({ token: await token({ read: ['tenant-c', 'tenant-d*'] }) });
    expect(await listScheduled(outsider, { limit: 1 })).toEqual({ scheduled: [] });
    // Before: pages of two rows through all 3,000 of tenant-b (1,500 queries, 8 s on the reporter's machine).
    expect(counts).toEqual({ queries: 1, rows: 0 });

    const tenant = h.client({ token: await token({ read: ['tenant-a'] }) });
    const first = await listScheduled(tenant, { limit: 2 });
    expect(first.scheduled.map((row) => row.domain)).toEqual(['tenant-a', 'tenant-a']);
    const rest = await listScheduled(tenant, { limit: 2, after: first.next });
    expect(rest.scheduled.map((row) => row.domain)).toEqual(['tenant-a']);
    expect(rest.next).toBeUndefined();
    expect(counts.rows).toBe(3 + 1);
  });

  it('reads at most LIST_SCAN_ROWS rows per request from a store that cannot select by domain, and gives the cursor to read on', async () => {
    h = await startHarness(jwt);
    await scheduleMany(h, 'tenant-b', 6000);
    const counts = countScheduledReads(h, true);
    const outsider = h.client({ token: await token({ read: ['tenant-a'] }) });
    const page = await listScheduled(outsider, { limit: 1000 });
    expect(page.scheduled).toEqual([]);
    expect(counts.rows).toBeLessThanOrEqual(5000 + 1001);
    expect(page.next).toBeDefined();
    const rest = await listScheduled(outsider, { limit: 1000, after: page.next });
    expect(rest).toEqual({ scheduled: [] });
    expect(counts.rows).toBe(6000);
  });
});

describe('cancelScheduled', () => {
  it("answers another tenant's scheduled event exactly as an unknown id, and leaves it scheduled", async () => {
    h = await startHarness(jwt);
    const admin = h.client({ token: await token({ schedule: ['*'], read: ['*'] }) });
    const theirs = await admin.schedule(Date.now() + 3_600_000, { domain: 'tenant-b', name: 'remind', pid: 'p', data: {} });
    const mine = await admin.schedule(Date.now() + 3_600_000, { domain: 'tenant-a', name: 'remind', pid: 'p', data: {} });
    const tenant = h.client({ token: await token({ schedule: ['tenant-a'], read: ['tenant-a'] }) });
    expect(await cancelScheduled(tenant, theirs)).toBe(false);
    expect(await cancelScheduled(tenant, 'no-such-id')).toBe(false);
    expect((await listScheduled(admin)).scheduled.map((row) => row.id).sort()).toEqual([mine, theirs].sort());
    expect(await cancelScheduled(tenant, mine)).toBe(true);
    expect((await listScheduled(admin)).scheduled.map((row) => row.id)).toEqual([theirs]);
  });

  it('deletes only in the domain the right was checked on, also when the id changed hands after the check', async () => {
    h = await startHarness(jwt);
    const admin = h.client({ token: await token({ schedule: ['*'], read: ['*'] }) });
    const at = Date.now() + 3_600_000;
    await admin.schedule(at, { id: 'reminder-1', domain: 'tenant-a', name: 'remind', pid: 'p', data: {} });
    const tenant = h.client({ token: await token({ schedule: ['tenant-a'], read: ['tenant-a'] }) });
    // The fault: between the check of tenant-a's row and the delete, the row is cancelled and the
    // id scheduled again by tenant-b (ids are one namespace, free again once deleted).
    const store = h.gateway.store;
    const read = store.read.bind(store);
    store.read = async (id: string) => {
      const stored = await read(id);
      store.read = read;
      await store.catalog.cancelScheduled('reminder-1', 'tenant-a');
      await store.append({ id: 'reminder-1', domain: 'tenant-b', name: 'remind', pid: 'p', data: {} }, { publisher: 'test', scheduledAt: new Date(at) });
      return stored;
    };
    expect(await cancelScheduled(tenant, 'reminder-1')).toBe(false);
    expect(await store.read('reminder-1')).toMatchObject({ domain: 'tenant-b' });
  });
});

describe('groups and deadLetters', () => {
  it('leave out the domains the token may read or subscribe to but not consume, dead letters and their error texts included', async () => {
    h = await startHarness({ ...jwt, EVENTFLOW_CONSUME_MAX_ATTEMPTS: 1 });
    const admin = h.client({ token: await token({ consume: ['*'], publish: ['*'], read: ['*'] }) });
    for (const domain of ['tenant-a', 'tenant-b']) {
      await admin.consume(domain, 'run', (_event: StoredEvent, context) => context.retry(0, new Error(`${domain} payroll failed`)), { group: 'audit' });
      await admin.publish({ domain, name: 'run', pid: 'p1' });
    }
    await eventually(async () => (await listDeadLetters(admin)).length === 2, 5_000, 'two dead letters');
    const tenant = h.client({ token: await token({ consume: ['tenant-a'], read: ['*'], subscribe: ['*'] }) });
    expect((await listGroups(tenant)).map((group) => group.domain)).toEqual(['tenant-a']);
    expect(await listGroups(tenant, 'tenant-b')).toEqual([]);
    expect((await listDeadLetters(tenant)).map((letter) => letter.lastError)).toEqual(['tenant-a payroll failed']);
    expect(await listDeadLetters(tenant, { domain: 'tenant-b' })).toEqual([]);
  });

  it("readTimeline shows a token that may read but not consume the domain no handler's error text (deliveries' lastError, the dead letter's reason)", async () => {
    h = await startHarness({ ...jwt, EVENTFLOW_CONSUME_MAX_ATTEMPTS: 1 });
    const admin = h.client({ token: await token({ consume: ['*'], publish: ['*'], read: ['*'] }) });
    // The default group (v4's) also writes the dead letter's reason; the named one, its delivery's lastError.
    await admin.consume('payroll', 'run', (_event: StoredEvent, context) => context.retry(0, new Error('salary of p1 is 9000')));
    await admin.consume('payroll', 'run', (_event: StoredEvent, context) => context.retry(0, new Error('salary of p1 is 9000')), { group: 'audit' });
    await admin.publish({ domain: 'payroll', name: 'run', pid: 'p1' });
    await eventually(async () => (await listDeadLetters(admin)).length === 2, 5_000, 'the dead letters');
    const owner = await readTimeline(admin, 'payroll', 'p1');
    expect(owner.fates[0]?.deliveries?.map((delivery) => delivery.lastError)).toEqual(['salary of p1 is 9000', 'salary of p1 is 9000']);
    expect(JSON.stringify(owner.fates)).toContain('"reason":"salary of p1 is 9000"');
    const reader = h.client({ token: await token({ read: ['payroll'], subscribe: ['payroll'] }) });
    const seen = await readTimeline(reader, 'payroll', 'p1');
    // Before: the reader got both texts, which listDeadLetters refuses it.
    expect(JSON.stringify(seen)).not.toContain('9000');
    const [fate] = seen.fates;
    expect(fate?.deliveries?.map(({ group, outcome, attempts }) => ({ group, outcome, attempts })).sort((a, b) => a.group.localeCompare(b.group))).toEqual([
      { group: '', outcome: 'dead', attempts: 1 },
      { group: 'audit', outcome: 'dead', attempts: 1 },
    ]);
    for (const delivery of fate?.deliveries ?? []) expect(delivery).not.toHaveProperty('lastError');
    expect(fate?.deadLetter).toMatchObject({ attempts: 1, reason: expect.stringContaining('needs the "consume" right') });
    expect(seen.events.map((event) => event.pid)).toEqual(['p1']);
  });

  it("count only the groups of the domains the token may consume: a tenant's listing does not count every tenant's groups", async () => {
    h = await startHarness(jwt);
    const admin = h.client({ token: await token({ consume: ['*'], manage: ['*'] }) });
    for (const domain of ['tenant-a', 'tenant-a2', 'payroll', 'shop']) for (const group of ['g1', 'g2']) await (await admin.consume(domain, 'run', () => undefined, { group })).remove();
    const ledger = h.gateway.store.ledger();
    const counted: string[][] = [];
    const groups = ledger.groups.bind(ledger);
    ledger.groups = async (...args) => {
      const summaries = await groups(...args);
      counted.push(summaries.map((group) => `${group.domain}/${group.group}`));
      return summaries;
    };
    const tenant = h.client({ token: await token({ consume: ['tenant-a*'], read: ['*'] }) });
    expect((await listGroups(tenant)).map((group) => group.domain)).toEqual(['tenant-a', 'tenant-a', 'tenant-a2', 'tenant-a2']);
    // What the store counted, not only what was answered: before, every group of the store (and its backlog's scans).
    expect(counted).toEqual([['tenant-a/g1', 'tenant-a/g2', 'tenant-a2/g1', 'tenant-a2/g2']]);
    expect((await listGroups(admin)).length).toBe(8);
  });
});

describe('consumer groups per connection', () => {
  it('refuses a consume into one group more than EVENTFLOW_MAX_GROUPS_PER_CONNECTION, before the group is stored; removing a consumer gives no slot back', async () => {
    h = await startHarness({ EVENTFLOW_MAX_GROUPS_PER_CONNECTION: 3 });
    const client = h.client();
    const consume = (group: string) => client.consume('jobs', 'run', () => undefined, { group });
    const handles = [await consume('g1'), await consume('g2'), await consume('g3')];
    const refused = await consume('g4').catch((error: unknown) => error);
    expect(isEventflowError(refused, 'E_EVENTFLOW_LIMIT_EXCEEDED')).toBe(true);
    expect((refused as { details?: unknown }).details).toEqual({ limit: 'EVENTFLOW_MAX_GROUPS_PER_CONNECTION', value: 3 });
    await handles[0]!.remove();
    expect(isEventflowError(await consume('g5').catch((error: unknown) => error), 'E_EVENTFLOW_LIMIT_EXCEEDED')).toBe(true);
    // A group it joined before is not a new one.
    await consume('g1');
    expect((await h.gateway.store.ledger().groups(Date.now())).map((group) => group.group)).toEqual(['g1', 'g2', 'g3']);
    // Another connection has its own count.
    await h.client().consume('jobs', 'run', () => undefined, { group: 'g4' });
  });
});

describe('listDomains', () => {
  it('costs a connection that may read nothing no read of the store (it counts every event)', async () => {
    h = await startHarness({ ...jwt, EVENTFLOW_AUTH_ANONYMOUS: 'publish' });
    const admin = h.client({ token: await token({ publish: ['*'], read: ['*'] }) });
    await admin.publish({ domain: 'tenant-a', name: 'n', pid: 'p' });
    const catalog = h.gateway.store.catalog;
    const domains = catalog.domains.bind(catalog);
    let reads = 0;
    catalog.domains = () => {
      reads++;
      return domains();
    };
    const anonymous = h.client();
    expect(await listDomains(anonymous)).toEqual({ domains: [], actions: ['publish'] });
    expect(reads).toBe(0);
    expect((await listDomains(admin)).domains.map((row) => row.domain)).toEqual(['tenant-a']);
    expect(reads).toBe(1);
  });
});
