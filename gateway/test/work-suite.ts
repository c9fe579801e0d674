/**
 * The work engine's promises to consumers, run on both stores (work.test.ts: one gateway on
 * SQLite; work.mysql.test.ts: two gateways on one MariaDB database, notified over NATS):
 *  - credit: a member never has more than its `concurrency` open; a member that joins mid-backlog
 *    gets a share at once;
 *  - ordered groups: per pid one delivery at a time, in position order, across members (and
 *    gateways); all handled;
 *  - the retry policy: attempts and backoff as configured, then a dead letter with the last error,
 *    which a request() of the event hears of (not of the throws before);
 *    a dead letter requeued in an ordered group waits for its pid's open delivery, then keeps its place;
 *    a dead letter requeued in an ordered group waits for its pid's open delivery, then keeps its place;
 *  - settles bound to their delivery: a connection whose token may not consume the row's domain,
 *    or a delivery that is no longer current, is refused, and nothing is recorded;
 *  - dead letters listed by the domains the token may consume, in the store's query (paged right).
 */
import { describe, expect, it } from 'vitest';
import { deleteGroup, isEventflowError, listDeadLetters, listGroups, PROTOCOL_VERSION, requeueDeadLetter, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { connect } from '@eventflow/test-support/raw-socket';
import { eventually, sleep } from '@eventflow/test-support/wait';

export interface WorkCluster {
  /** Client connected to gateway `gateway` (0 or 1; a one-gateway cluster has the one), optionally with a token. */
  client(gateway?: number, token?: string): EventflowClient;
  url(gateway: number): string;
  /** How many gateways it has (1 or 2). */
  readonly gateways: number;
  /** The outcome columns of the default group for an event, or of the named group's ledger row. */
  outcome(eventId: string, group?: string): Promise<string | undefined>;
  /** A token allowed `rights` (action → domains), for a cluster started with `jwt`. */
  token?(rights: Record<string, string[]>): Promise<string>;
}

export function describeWork(label: string, start: (options?: { jwt?: boolean }) => Promise<WorkCluster>, skip?: string): void {
  describe.skipIf(skip !== undefined)(`work engine (${label})`, () => {
    it('credit: never more than `concurrency` open per member; a member that joins mid-backlog takes a share within a second', async () => {
      const cluster = await start();
      const publisher = cluster.client(0);
      const EVENTS = 300;
      const open = [0, 0, 0];
      const peak = [0, 0, 0];
      const handled = [0, 0, 0];
      let go!: () => void;
      const gate = new Promise<void>((resolve) => (go = resolve));
      const member = (index: number, gateway: number) =>
        cluster.client(gateway).consume(
          'credit',
          'job',
          async () => {
            open[index] = (open[index] ?? 0) + 1;
            peak[index] = Math.max(peak[index] ?? 0, open[index] ?? 0);
            await gate;
            await sleep(10);
            open[index] = (open[index] ?? 0) - 1;
            handled[index] = (handled[index] ?? 0) + 1;
          },
          { group: 'workers', concurrency: 5 },
        );
      await member(0, 0);
      await member(1, 1);
      for (let i = 0; i < EVENTS; i += 50) await Promise.all(Array.from({ length: 50 }, (_, k) => publisher.publish({ domain: 'credit', name: 'job', pid: `p${i + k}` })));
      // Both members full, the backlog waiting: nobody is sent more than its credit.
      await eventually(() => open[0] === 5 && open[1] === 5, 10_000, 'both members at their credit');
      go();
      await eventually(() => (handled[0] ?? 0) + (handled[1] ?? 0) >= 60, 20_000, 'the first members to be working');
      const joined = Date.now();
      await member(2, 0);
      await eventually(() => (handled[2] ?? 0) > 0, 5_000, 'the late member to get a share');
      console.info(`credit: the late member's first job ${Date.now() - joined} ms after it joined`);
      expect(Date.now() - joined).toBeLessThan(1_000);
      await eventually(() => handled.reduce((a, b) => a + b, 0) === EVENTS, 30_000, 'every job handled');
      expect(peak.every((value) => value <= 5)).toBe(true);
      expect(handled.every((count) => count > 0)).toBe(true);
    }, 60_000);

    it('ordered: 50 pids × 20 events, random handler times, three members: per pid one at a time and in position order, all handled', async () => {
      const cluster = await start();
      const publisher = cluster.client(0);
      const PIDS = 50;
      const PER = 20;
      const running = new Set<string>();
      const violations: string[] = [];
      const seen = new Map<string, number[]>();
      const handler = async (event: StoredEvent): Promise<void> => {
        if (running.has(event.pid)) violations.push(`${event.pid} ran twice at once`);
        running.add(event.pid);
        await sleep(Math.floor(Math.random() * 6));
        const list = seen.get(event.pid) ?? [];
        list.push((event.data as { n: number }).n);
        seen.set(event.pid, list);
        running.delete(event.pid);
      };
      for (const gateway of [0, 1, 1]) await cluster.client(gateway).consume('ordered', 'step', handler, { group: 'process', ordered: true, concurrency: 8 });
      for (let n = 0; n < PER; n++) await Promise.all(Array.from({ length: PIDS }, (_, p) => publisher.publish({ domain: 'ordered', name: 'step', pid: `pid-${p}`, data: { n } })));
      await eventually(() => [...seen.values()].reduce((total, list) => total + list.length, 0) >= PIDS * PER, 60_000, 'every event handled');
      expect(violations).toEqual([]);
      expect(seen.size).toBe(PIDS);
      for (const [pid, list] of seen) expect(list, pid).toEqual(Array.from({ length: PER }, (_, n) => n));
    }, 90_000);

    it.each([
      ['of `*`', '*', 'step', false],
      ['of a name', 'step', '*', false],
      ['of `*`, recorded after the other', '*', 'step', true],
      ['of a name, recorded after the other', 'step', '*', true],
    ])('ordered on the default group %s holds the claims of the default group it shares its ledger with: a pid one at a time, in position order', async (_title, orderedName, otherName, otherFirst) => {
      const cluster = await start();
      const domain = `shared-order-${orderedName === '*' ? 'star' : 'name'}`;
      const running = new Set<string>();
      const overlaps: string[] = [];
      const starts: number[] = [];
      const handler = async (event: StoredEvent): Promise<void> => {
        const n = (event.data as { n: number }).n;
        if (running.has(event.pid)) overlaps.push(`${n} while ${event.pid} had a delivery open`);
        running.add(event.pid);
        starts.push(n);
        await sleep(15);
        running.delete(event.pid);
      };
      const operator = cluster.client(0);
      if (otherFirst) {
        // The unordered one recorded, and its group read (a claim, an event), before the ordered one exists.
        await cluster.client(1).consume(domain, otherName, handler, { concurrency: 5 });
        await operator.publish({ domain, name: 'step', pid: 'w', data: { n: -1 } });
        await eventually(() => starts.includes(-1), 10_000, 'the warm-up event');
        starts.splice(0);
      }
      await cluster.client(0).consume(domain, orderedName, handler, { ordered: true, concurrency: 5 });
      if (!otherFirst) await cluster.client(1).consume(domain, otherName, handler, { concurrency: 5 });
      // The other one is on another gateway where there are two: it reads the group anew within GROUP_READ_MS (1 s), the window
      // gateway/README states; on its own gateway at once. Time is what is tested.
      if (otherFirst && cluster.gateways > 1) await sleep(1_200);
      for (let n = 0; n < 12; n++) await operator.publish({ domain, name: 'step', pid: 'p', data: { n } });
      await eventually(() => starts.length === 12, 20_000, 'every event handled');
      // Before: the unordered group's claims took the pid's events while the ordered one had one open (5 of 10 at once).
      expect(overlaps).toEqual([]);
      expect(starts).toEqual(Array.from({ length: 12 }, (_, n) => n));
    });

    it("a default group deleted and recorded again: the deleted one's rows are not its work (no pid held back, nothing pending or dead for good, no requeue)", async () => {
      const cluster = await start();
      const operator = cluster.client(0);
      const domain = 'regroup';
      // pid d: retry(0) twice, a dead letter; pid a: a throw, pending again in ten minutes. Rows of the default group's ledger, which outlive its delete.
      const first = await cluster.client(0).consume(
        domain,
        'step',
        (event: StoredEvent, context) => {
          if (event.pid === 'd') return context.retry(0, new Error('gone for good'));
          throw new Error('later');
        },
        { ordered: true, retry: { attempts: 2, backoff: 'fixed', delayMs: 600_000 } },
      );
      const dead = await operator.publish({ domain, name: 'step', pid: 'd' });
      await operator.publish({ domain, name: 'step', pid: 'a' });
      await eventually(async () => (await listGroups(operator, domain))[0]?.deadLetters === 1 && (await listGroups(operator, domain))[0]?.pending === 1, 10_000, 'a dead letter and a retry pending');
      await first.remove();
      expect(await deleteGroup(operator, domain, 'step', '')).toBe(true);
      // Like a named group's: its dead letters go with it, and one cannot be requeued into no group.
      expect(await listDeadLetters(operator, { domain })).toEqual([]);
      expect(await requeueDeadLetter(operator, { eventId: dead, domain, name: 'step', group: '' })).toBe(false);

      const got: string[] = [];
      await cluster.client(1).consume(domain, 'step', (event: StoredEvent) => void got.push(event.pid), { ordered: true });
      await operator.publish({ domain, name: 'step', pid: 'a' });
      await operator.publish({ domain, name: 'step', pid: 'b' });
      // pid a's new event is not held back by the old group's pending one, which the new group never claims.
      await eventually(() => got.includes('a') && got.includes('b'), 10_000, "the new group's events of pids a and b");
      await eventually(async () => (await listGroups(operator, domain))[0]?.pending === 0, 10_000, 'nothing pending');
      const [group] = await listGroups(operator, domain);
      expect(group).toMatchObject({ group: '', pending: 0, inFlight: 0, deadLetters: 0 });
      expect(group?.oldestPendingAt).toBeUndefined();
      expect(await listDeadLetters(operator, { domain })).toEqual([]);
    });

    it("ordered across names (the domain's `*` default group): a pending row of a default group deleted before it was created holds no pid back", async () => {
      const cluster = await start();
      const operator = cluster.client(0);
      const domain = 'acrossdel';
      const got: string[] = [];
      // (acrossdel, run) first: its rows start before everything below.
      await cluster.client(0).consume(domain, 'run', (event: StoredEvent) => void got.push(`run:${event.pid}`));
      // (acrossdel, other): pid p's event pending for ten minutes, then the group deleted; its row stays (v4's columns).
      const other = await cluster.client(0).consume(domain, 'other', () => {
        throw new Error('later');
      }, { ordered: true, retry: { attempts: 2, backoff: 'fixed', delayMs: 600_000 } });
      await operator.publish({ domain, name: 'other', pid: 'p' });
      await eventually(async () => (await listGroups(operator, domain)).find((group) => group.name === 'other')?.pending === 1, 10_000, 'the other group\'s retry pending');
      await other.remove();
      expect(await deleteGroup(operator, domain, 'other', '')).toBe(true);
      // Then the domain's `*` default group, ordered: the run group's claims go in pid order across names.
      // Recorded, then left without members: the run group alone can deliver run's events.
      const across = await cluster.client(1).consume(domain, '*', (event: StoredEvent) => void got.push(`*:${event.name}:${event.pid}`), { ordered: true });
      await across.remove();
      await operator.publish({ domain, name: 'run', pid: 'p' });
      // Before, the run group's claim waited for the deleted group's pending row of pid p, which no group claims: for good.
      await eventually(() => got.some((entry) => entry.endsWith('run:p')), 10_000, "run:p delivered, not held by the deleted group's row");
    });

    it("ordered: a requeued dead letter waits while a later event of its pid is open, then goes before the pid's pending events", async () => {
      const cluster = await start();
      const operator = cluster.client(0);
      const starts: string[] = [];
      const running = new Set<string>();
      const overlaps: string[] = [];
      let healed = false;
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      const handler = async (event: StoredEvent): Promise<void> => {
        const step = `${event.pid}:${(event.data as { n: number }).n}`;
        if (running.has(event.pid)) overlaps.push(`${step} while ${event.pid} had a delivery open`);
        running.add(event.pid);
        starts.push(step);
        try {
          if (step === 'a:0' && !healed) throw new Error('not yet');
          if (step === 'a:1') await gate;
        } finally {
          running.delete(event.pid);
        }
      };
      try {
        for (const gateway of [0, 1]) await cluster.client(gateway).consume('requeue-order', 'step', handler, { group: 'process', ordered: true, concurrency: 4, retry: { attempts: 1 } });
        const ids: string[] = [];
        for (let n = 0; n < 3; n++) ids.push(await operator.publish({ domain: 'requeue-order', name: 'step', pid: 'a', data: { n } }));
        // a:0 is a dead letter (one attempt), which counts as its outcome: a:1 goes, and is held open.
        await eventually(() => starts.includes('a:1'), 10_000, 'a:1 to start after the dead letter of a:0');
        healed = true;
        expect(await requeueDeadLetter(operator, { eventId: ids[0] as string, domain: 'requeue-order', name: 'step', group: 'process' })).toBe(true);
        // A claim made after the requeue: pid b's event is handled, a:0 (earlier, claimable or not) is not while a:1 is open.
        await operator.publish({ domain: 'requeue-order', name: 'step', pid: 'b', data: { n: 0 } });
        await eventually(() => starts.includes('b:0'), 10_000, 'b:0 to be handled');
        expect(starts.filter((step) => step.startsWith('a:'))).toEqual(['a:0', 'a:1']);
        // Also not sent to a:1's own member, whose client would hold it until a:1 returns: one delivery open, a:1's.
        await eventually(async () => (await cluster.outcome(ids[0] as string, 'process')) === undefined && (await listGroups(operator, 'requeue-order'))[0]?.pending === 2, 10_000, 'a:0 and a:2 pending');
        expect((await listGroups(operator, 'requeue-order'))[0]).toMatchObject({ inFlight: 1, pending: 2 });
        open();
        await eventually(() => starts.includes('a:2'), 10_000, 'a:2 to be handled');
        expect(starts.filter((step) => step.startsWith('a:'))).toEqual(['a:0', 'a:1', 'a:0', 'a:2']);
        expect(overlaps).toEqual([]);
        await eventually(async () => (await cluster.outcome(ids[0] as string, 'process')) === 'success', 10_000, 'the requeued event to succeed');
      } finally {
        open();
      }
    });

    it('retry: a throwing handler is delivered again after the configured backoff, then its event is a dead letter with the last error', async () => {
      const cluster = await start();
      const worker = cluster.client(0);
      const attempts: Array<{ attempt: number; at: number }> = [];
      await worker.consume(
        'retries',
        'charge',
        (_event, { attempt }) => {
          attempts.push({ attempt, at: Date.now() });
          throw new Error(`Zahlung abgelehnt 💳 (${attempt})`);
        },
        { group: 'billing', retry: { attempts: 3, backoff: 'fixed', delayMs: 300 } },
      );
      const id = await cluster.client(0).publish({ domain: 'retries', name: 'charge', pid: 'p1' });
      await eventually(async () => (await cluster.outcome(id, 'billing')) === 'dead', 15_000, 'the dead letter');
      expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
      for (let i = 1; i < attempts.length; i++) expect((attempts[i]?.at ?? 0) - (attempts[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(280);
      const deadLetters = await listDeadLetters(worker, { domain: 'retries' });
      expect(deadLetters).toMatchObject([{ eventId: id, group: 'billing', attempts: 3, lastError: 'Zahlung abgelehnt 💳 (3)' }]);
      // No fourth delivery.
      await sleep(600);
      expect(attempts).toHaveLength(3);
    });

    it("request() of an event whose group retries: answered by the outcome after the retries, or rejected with the dead letter's last error, not at the first throw", async () => {
      const cluster = await start();
      const worker = cluster.client(0);
      const attempts = new Map<string, number[]>();
      await worker.consume(
        'charges',
        'charge',
        async (event, { attempt }) => {
          attempts.set(event.pid, [...(attempts.get(event.pid) ?? []), attempt]);
          if (event.pid === 'declined' || attempt < 3) throw new Error(`declined (${attempt})`);
          await worker.publish({ domain: 'charges', name: 'charged', pid: event.pid, rid: event.id });
        },
        { group: 'billing', ordered: true, retry: { attempts: 3, backoff: 'fixed', delayMs: 100 } },
      );
      const requester = cluster.client(0);
      const charged = await requester.request({ domain: 'charges', name: 'charge', pid: 'paid' }, { outcomes: ['charged'] });
      expect(charged.name).toBe('charged');
      expect(attempts.get('paid')).toEqual([1, 2, 3]);
      const refused = await requester.request({ domain: 'charges', name: 'charge', pid: 'declined' }, { outcomes: ['charged'] }).catch((error: unknown) => error);
      expect(isEventflowError(refused, 'E_EVENTFLOW_CONSUMER_FAILED'), String(refused)).toBe(true);
      expect((refused as { details?: unknown }).details).toMatchObject({ attempt: 3, error: 'declined (3)' });
      expect(attempts.get('declined')).toEqual([1, 2, 3]);
    });

    it('retry with exponential backoff: the delays grow, jittered within [half, full] of delayMs × 2^(attempt-1)', async () => {
      const cluster = await start();
      const worker = cluster.client(0);
      const at: number[] = [];
      await worker.consume(
        'backoff',
        'charge',
        () => {
          at.push(Date.now());
          throw new Error('later');
        },
        { group: 'billing', retry: { attempts: 4, delayMs: 200, maxDelayMs: 10_000 } },
      );
      const id = await cluster.client(0).publish({ domain: 'backoff', name: 'charge', pid: 'p1' });
      await eventually(async () => (await cluster.outcome(id, 'billing')) === 'dead', 20_000, 'the dead letter');
      const gaps = at.slice(1).map((time, i) => time - (at[i] ?? 0));
      expect(gaps).toHaveLength(3);
      gaps.forEach((gap, i) => {
        const nominal = 200 * 2 ** i;
        expect(gap).toBeGreaterThanOrEqual(nominal / 2 - 20);
        expect(gap).toBeLessThan(nominal + 1_200);
      });
    });

    it('group names are exact or refused: a trailing space and non-ASCII get a coded error, nothing is stored', async () => {
      const cluster = await start();
      const client = cluster.client(0);
      await client.consume('names', 'job', () => undefined, { group: 'audit' });
      for (const group of ['audit ', 'é', 'audit\u0000']) {
        const refused = await cluster
          .client(1)
          .call('consume', { consumer: 'c-bad', domain: 'names', name: 'job', group })
          .catch((error: unknown) => error);
        expect(isEventflowError(refused, 'E_EVENTFLOW_INVALID_INPUT'), `${JSON.stringify(group)}: ${String(refused)}`).toBe(true);
      }
      const groups = await listGroups(client, 'names');
      expect(groups.map((group) => group.group)).toEqual(['audit']);
    });

    it('a settle from a connection that may not consume the domain, or of a delivery no longer current, is refused and records nothing', async () => {
      const cluster = await start({ jwt: true });
      const token = cluster.token;
      if (!token) throw new Error('this cluster cannot run with tokens');
      const victimToken = await token({ consume: ['payroll'], publish: ['payroll'], subscribe: ['payroll'], read: ['payroll'] });
      const attackerToken = await token({ consume: ['tenant'], publish: ['tenant'], subscribe: ['tenant'], read: ['tenant'] });
      // The victim speaks the protocol itself, so that the test sees the delivery id it was sent.
      const victim = await connect(cluster.url(0), { hello: false });
      victim.send({ type: 'hello', protocol: PROTOCOL_VERSION, client: 'victim', token: victimToken });
      await victim.next((frame) => frame.type === 'welcome');
      expect((await victim.request('consume', { consumer: 'c1', domain: 'payroll', name: 'pay', group: 'bank' })).type).toBe('result');
      const id = await cluster.client(0, victimToken).publish({ domain: 'payroll', name: 'pay', pid: 'ceo' });
      const first = await victim.next((frame) => frame.type === 'delivery');
      const delivery = first.delivery as string;
      // The claim's time, then 128 bits the attacker cannot guess.
      expect(delivery).toMatch(/^[0-9a-f]{44}$/);
      // Guessing is hopeless (128 bits): the attacker is handed the real id, on both gateways.
      for (const gateway of [0, 1]) {
        const attacker = cluster.client(gateway, attackerToken);
        const refused = await attacker.call('settle', { delivery, outcome: 'success' }).catch((error: unknown) => error);
        expect(isEventflowError(refused, 'E_EVENTFLOW_UNKNOWN_DELIVERY'), String(refused)).toBe(true);
      }
      expect(await cluster.outcome(id, 'bank')).toBeUndefined();
      // Handed back: the id is void, also for its holder; the event goes out again under a new id.
      expect((await victim.request('settle', { delivery, outcome: 'release' })).type).toBe('result');
      const second = await victim.next((frame) => frame.type === 'delivery');
      expect(second.delivery).not.toBe(delivery);
      const stale = await victim.request('settle', { delivery, outcome: 'success' });
      expect(stale.code).toBe('E_EVENTFLOW_UNKNOWN_DELIVERY');
      expect(await cluster.outcome(id, 'bank')).toBeUndefined();
      expect((await victim.request('settle', { delivery: second.delivery, outcome: 'success' })).type).toBe('result');
      expect(await cluster.outcome(id, 'bank')).toBe('success');
      victim.ws.close();
    });

    it("a settle sent on the holder's new connection while the gateway still holds its old one (a silent socket) is recorded once; the old one's settle then is not", async () => {
      const cluster = await start();
      // The holder speaks the protocol itself, so that the test sees the delivery id it was sent.
      const old = await connect(cluster.url(0));
      expect((await old.request('consume', { consumer: 'c1', domain: 'jobs', name: 'run', group: 'g' })).type).toBe('result');
      const id = await cluster.client(0).publish({ domain: 'jobs', name: 'run', pid: 'p1' });
      const { delivery } = await old.next((frame) => frame.type === 'delivery');
      // Its client reconnected: the gateway has not noticed that the old socket is gone (it still is open here).
      const renewed = await connect(cluster.url(0));
      expect(await renewed.request('settle', { delivery, outcome: 'success' })).toMatchObject({ type: 'result' });
      expect(await cluster.outcome(id, 'g')).toBe('success');
      expect((await old.request('settle', { delivery, outcome: 'failed' })).code).toBe('E_EVENTFLOW_UNKNOWN_DELIVERY');
      expect(await cluster.outcome(id, 'g')).toBe('success');
      old.ws.close();
      renewed.ws.close();
    });

    it("a token's dead letters are listed without naming its domain while another domain has more, newer ones (a page read for all domains, filtered after, was empty)", async () => {
      const cluster = await start({ jwt: true });
      const token = cluster.token;
      if (!token) throw new Error('this cluster cannot run with tokens');
      const busy = cluster.client(0, await token({ consume: ['payroll'], publish: ['payroll'] }));
      const mine = cluster.client(0, await token({ consume: ['shop', 'shop.*'], publish: ['shop'] }));
      const retry = { attempts: 1 };
      await mine.consume('shop', 'ship', (_event: StoredEvent, context) => context.retry(0, new Error('courier down')), { group: 'couriers', retry });
      const id = await mine.publish({ domain: 'shop', name: 'ship', pid: 'o1' });
      await eventually(async () => (await listDeadLetters(mine, { domain: 'shop' })).length === 1, 10_000, 'its dead letter');
      await busy.consume('payroll', 'pay', (_event: StoredEvent, context) => context.retry(0, new Error('bank down')), { group: 'bank', retry });
      await Promise.all(Array.from({ length: 12 }, (_, i) => busy.publish({ domain: 'payroll', name: 'pay', pid: `p${i}` })));
      await eventually(async () => (await listDeadLetters(busy, { domain: 'payroll' })).length === 12, 10_000, "the other domain's dead letters");
      // Newest first, pages of 5: the first pages of all domains hold only payroll's.
      expect(await listDeadLetters(mine, { limit: 5 })).toMatchObject([{ eventId: id, domain: 'shop', group: 'couriers', lastError: 'courier down' }]);
      expect(await listDeadLetters(mine, { limit: 5, offset: 1 })).toEqual([]);
      expect(await listDeadLetters(busy, { limit: 5, offset: 10 })).toHaveLength(2);
    });
  });
}

