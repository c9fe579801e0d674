/**
 * Consumer groups at the gateway (SQLite, in process): retry(ms) counts as an attempt and comes
 * back after its delay; the last error is the dead letter's; groups and dead letters are listed,
 * requeued, discarded and deleted through the client, the CLI and the `manage` right.
 */
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, deleteGroup, discardDeadLetter, isEventflowError, listDeadLetters, listGroups, requeueDeadLetter, type StoredEvent } from '@eventflow/core';
import { runCli } from '@eventflow/node/commands';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const SECRET = 'groups-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const token = (claims: Record<string, string[]>): Promise<string> =>
  new SignJWT({ eventflow: claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));

describe('consumer groups', () => {
  it('retry(ms) delivers again after the delay as a new attempt; after the last one, a dead letter with the last error', async () => {
    h = await startHarness({ EVENTFLOW_CONSUME_MAX_ATTEMPTS: 3 });
    const client = h.client();
    const seen: Array<{ attempt: number; at: number }> = [];
    await client.consume('jobs', 'run', (_event: StoredEvent, context) => {
      seen.push({ attempt: context.attempt, at: Date.now() });
      if (context.attempt < 3) return context.retry(200);
      throw new Error('still broken');
    });
    const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => seen.length === 3, 5_000, 'three attempts');
    expect(seen.map((s) => s.attempt)).toEqual([1, 2, 3]);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(190);
    // A throw is failed at once, not a dead letter: v4's rule.
    await eventually(async () => (await listGroups(client, 'jobs'))[0]?.redelivered === 1, 5_000, 'the group counts');
    expect(await listDeadLetters(client, { domain: 'jobs' })).toEqual([]);
    expect(id).toBeTruthy();
  });

  it('retrying past the last attempt makes a dead letter carrying the handler error; requeue starts a new cycle, discard drops it', async () => {
    h = await startHarness({ EVENTFLOW_CONSUME_MAX_ATTEMPTS: 2 });
    const client = h.client();
    let runs = 0;
    let healed = false;
    const consumer = await client.consume(
      'jobs',
      'run',
      async (_event: StoredEvent, context) => {
        runs++;
        if (!healed) context.retry(0, new Error('ledger service down'));
      },
      { group: 'billing' },
    );
    const id = await client.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(async () => (await listDeadLetters(client)).length === 1, 5_000, 'a dead letter');
    const [letter] = await listDeadLetters(client, { domain: 'jobs' });
    expect(letter).toMatchObject({ eventId: id, domain: 'jobs', consumes: 'run', group: 'billing', attempts: 2, lastError: 'ledger service down' });
    const [group] = await listGroups(client, 'jobs');
    expect(group).toMatchObject({ domain: 'jobs', name: 'run', group: 'billing', members: 1, deadLetters: 1, pending: 0, inFlight: 0 });
    healed = true;
    expect(await requeueDeadLetter(client, { eventId: id, domain: 'jobs', name: 'run', group: 'billing' })).toBe(true);
    await eventually(() => runs === 3, 5_000, 'the requeued event to run');
    await eventually(async () => (await listDeadLetters(client)).length === 0, 5_000, 'no dead letter left');
    expect(await discardDeadLetter(client, { eventId: id, domain: 'jobs', name: 'run', group: 'billing' })).toBe(false);
    await consumer.remove();
    expect(await deleteGroup(client, 'jobs', 'run', 'billing')).toBe(true);
    expect((await listGroups(client, 'jobs')).map((g) => g.group)).toEqual([]);
  });

  it('the CLI lists groups and dead letters and deletes a group', async () => {
    h = await startHarness();
    const client = h.client();
    const consumer = await client.consume('jobs', 'run', () => undefined, { group: 'audit' });
    let out = '';
    let err = '';
    const io = { stdout: { write: (chunk: string) => (out += chunk) }, stderr: { write: (chunk: string) => (err += chunk) }, env: {} };
    expect(await runCli(['groups', 'jobs', '--url', h.gateway.url], io)).toBe(0);
    expect(JSON.parse(out.trim())).toMatchObject({ domain: 'jobs', name: 'run', group: 'audit', members: 1 });
    out = '';
    expect(await runCli(['dead-letters', '--url', h.gateway.url, '--limit', '5'], io)).toBe(0);
    expect(out).toBe('');
    expect(err).toBe('no dead letters (the gateway lists those of the domains the token may consume only)\n');
    err = '';
    expect(await runCli(['group-delete', 'jobs', 'run', 'audit', '--url', h.gateway.url], io)).toBe(1);
    expect(err).toMatch(/^E_EVENTFLOW_GROUP_IN_USE: deleteGroup: jobs › run \(group "audit"\) has 1 member registered on this gateway; stop its workers/);
    await consumer.remove();
    expect(await runCli(['group-delete', 'jobs', 'run', 'audit', '--url', h.gateway.url], io)).toBe(0);
    expect(JSON.parse(out.trim())).toEqual({ deleted: true });
  });

  it('deleting a group, requeueing and discarding need the manage right on the domain', async () => {
    h = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET });
    const worker = createClient(h.gateway.url, { token: await token({ consume: ['jobs'], publish: ['jobs'] }), onError: () => undefined });
    const admin = createClient(h.gateway.url, { token: await token({ consume: ['jobs'], manage: ['jobs'] }), onError: () => undefined });
    try {
      const consumer = await worker.consume('jobs', 'run', () => undefined, { group: 'billing' });
      expect((await listGroups(worker)).map((g) => g.group)).toEqual(['billing']);
      const refused = await deleteGroup(worker, 'jobs', 'run', 'billing').catch((error: unknown) => error);
      expect(isEventflowError(refused, 'E_EVENTFLOW_FORBIDDEN')).toBe(true);
      const requeue = await requeueDeadLetter(worker, { eventId: 'x', domain: 'jobs', name: 'run', group: 'billing' }).catch((error: unknown) => error);
      expect(isEventflowError(requeue, 'E_EVENTFLOW_FORBIDDEN')).toBe(true);
      await consumer.remove();
      expect(await deleteGroup(admin, 'jobs', 'run', 'billing')).toBe(true);
    } finally {
      await worker.close();
      await admin.close();
    }
  });

  it('a group with a member registered here is not deleted (the member would record it again, and the events published in between would be lost)', async () => {
    h = await startHarness();
    const client = h.client();
    const got: string[] = [];
    for (const group of ['audit', '']) {
      const consumer = await client.consume('jobs', 'run', (event: StoredEvent) => void got.push(`${group}:${event.pid}`), { group });
      const refused = await deleteGroup(client, 'jobs', 'run', group).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: 'E_EVENTFLOW_GROUP_IN_USE', details: { domain: 'jobs', name: 'run', group, members: 1 } });
      // The group is intact: the next event reaches the member.
      await client.publish({ domain: 'jobs', name: 'run', pid: `after-${group}` });
      await eventually(() => got.includes(`${group}:after-${group}`), 5_000, 'the event published after the refused delete');
      await consumer.remove();
      expect(await deleteGroup(client, 'jobs', 'run', group)).toBe(true);
    }
  });

  it('a group deleted here with no member is recorded anew by a consumer registered afterwards, from then on, without an error', async () => {
    h = await startHarness();
    const errors: unknown[] = [];
    const client = createClient(h.gateway.url, { onError: (error) => void errors.push(error) });
    try {
      const got: string[] = [];
      const handler = (event: StoredEvent): void => void got.push(event.pid);
      const first = await client.consume('jobs', 'run', handler, { group: 'audit' });
      await client.publish({ domain: 'jobs', name: 'run', pid: 'first' });
      await eventually(() => got.includes('first'), 5_000, 'the first event');
      await first.remove();
      expect(await deleteGroup(client, 'jobs', 'run', 'audit')).toBe(true);
      await client.publish({ domain: 'jobs', name: 'run', pid: 'between' });
      await client.consume('jobs', 'run', handler, { group: 'audit' });
      expect(await listGroups(client, 'jobs')).toMatchObject([{ group: 'audit', members: 1 }]);
      await client.publish({ domain: 'jobs', name: 'run', pid: 'after' });
      await eventually(() => got.includes('after'), 5_000, 'the event published after the new registration');
      // `after` came in position order after `between`: the new group starts after it.
      expect(got).toEqual(['first', 'after']);
      expect(errors).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it("another tenant's dead letter is untouched by requeue and discard naming the caller's own domain, and answered as an unknown one", async () => {
    h = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_CONSUME_MAX_ATTEMPTS: 1 });
    const victim = createClient(h.gateway.url, { token: await token({ consume: ['payroll'], publish: ['payroll'], manage: ['payroll'] }), onError: () => undefined });
    const attacker = createClient(h.gateway.url, { token: await token({ consume: ['tenant'], manage: ['tenant'] }), onError: () => undefined });
    try {
      await victim.consume('payroll', 'pay', (_event, context) => context.retry(0), { group: 'bank' });
      const id = await victim.publish({ domain: 'payroll', name: 'pay', pid: 'ceo' });
      await eventually(async () => (await listDeadLetters(victim, { domain: 'payroll' })).length === 1, 5_000, 'the dead letter');
      const key = { eventId: id, name: 'pay', group: 'bank' };
      // The right is checked on the domain the request names; the store acts only on a row of that domain.
      expect(await requeueDeadLetter(attacker, { ...key, domain: 'tenant' })).toBe(false);
      expect(await discardDeadLetter(attacker, { ...key, domain: 'tenant' })).toBe(false);
      expect(await requeueDeadLetter(attacker, { ...key, eventId: 'no-such-event', domain: 'tenant' })).toBe(false);
      expect(await listDeadLetters(attacker, {})).toEqual([]);
      expect(await listDeadLetters(victim, { domain: 'payroll' })).toMatchObject([{ eventId: id, group: 'bank' }]);
    } finally {
      await victim.close();
      await attacker.close();
    }
  });

  it("the groups of a domain are counted alone: another domain's groups are not read for them", async () => {
    h = await startHarness();
    const client = h.client();
    for (const domain of ['shop', 'payroll']) await (await client.consume(domain, 'run', () => undefined, { group: 'g' })).remove();
    const ledger = h.gateway.store.ledger();
    const counted: Array<readonly string[] | undefined> = [];
    const groups = ledger.groups.bind(ledger);
    ledger.groups = (at, domains) => (counted.push(domains), groups(at, domains));
    expect((await listGroups(client, 'shop')).map((group) => group.domain)).toEqual(['shop']);
    expect((await listGroups(client)).map((group) => group.domain)).toEqual(['payroll', 'shop']);
    expect(counted).toEqual([['shop'], undefined]);
  });
});
