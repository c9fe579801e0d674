/**
 * The v4-compatible hub against a real MariaDB (fresh database per test) and real mTLS (certificates
 * from the v4-compatible manager, fast PBKDF2), driven by raw v4-wire test spokes (hub-support.ts).
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { STX } from '../src/v4/codec.js';
import { clientTlsOptions } from '../src/v4/certificates/tls.js';
import { generateHubId, parseHubConfig } from '../src/v4/hub/config.js';
import { HubRegistry } from '../src/v4/hub/registry.js';
import { findStuckClaims, resetStuckClaim, serdeEncode, type StuckClaim } from '../src/v4/hub/store.js';
import { MASTER, TestSpoke, fenceRouting, isPublishOf, mysqlUnavailable, until, useHubFixture, type HubFixture } from './hub-support.js';
import { sleep } from '@eventflow/test-support/wait';

type Inserted = Awaited<ReturnType<HubFixture['insertPublished']>>;

const fixture = useHubFixture();
const describeDb = describe.skipIf(mysqlUnavailable !== undefined);

const hasMessage = (rows: Array<{ message: string }>, pattern: RegExp | string): boolean =>
  rows.some((row) => (typeof pattern === 'string' ? row.message.includes(pattern) : pattern.test(row.message)));

describe('hub configuration (no database)', () => {
  const base = { EVENTFLOW_CERT_PASS_ENCRYPTION_KEY: MASTER };

  it('has v4 defaults and our lease settings', () => {
    const config = parseHubConfig(base);
    expect(config).toMatchObject({
      name: 'EVENTFLOW-HUB',
      internalIp: '127.0.0.1',
      internalPort: 50001,
      externalIp: '127.0.0.1',
      externalPort: undefined,
      peerHubOnlineTimeoutMs: 5000,
      keepAliveIntervalMs: 60_000,
      scheduledPollMs: 1000,
      claimLeaseMs: 30_000,
      claimMaxRedeliveries: 3,
      mysql: { host: '127.0.0.1', port: 3306, user: 'root', password: '', database: 'eventflow', connectionLimit: 10 },
    });
    expect(config.certificates.CERT_PASS_PBKDF2_ITERATIONS).toBe(1_000_000);
  });

  it('names the variable of every bad value', () => {
    expect(() => parseHubConfig({ ...base, EVENTFLOW_HUB_INTERNAL_PORT: 'x' })).toThrow(/EVENTFLOW_HUB_INTERNAL_PORT/);
    expect(() => parseHubConfig({ ...base, EVENTFLOW_HUB_EXTERNAL_IP: '::1' })).toThrow(/EVENTFLOW_HUB_EXTERNAL_IP="::1": must be an IPv4/);
    expect(() => parseHubConfig({ ...base, EVENTFLOW_HUB_NAME: 'bad_name' })).toThrow(/EVENTFLOW_HUB_NAME/);
    expect(() => parseHubConfig({ ...base, EVENTFLOW_HUB_NAME: 'X'.repeat(32) })).toThrow(/EVENTFLOW_HUB_NAME="X{32}": must be at most 31/);
    expect(() => parseHubConfig({ ...base, EVENTFLOW_HUB_CLAIM_LEASE_MS: '500' })).toThrow(/EVENTFLOW_HUB_CLAIM_LEASE_MS/);
    expect(() => parseHubConfig({ ...base, EVENTFLOW_MYSQL_PORT: '0' })).toThrow(/EVENTFLOW_MYSQL_PORT/);
    expect(() => parseHubConfig({ ...base, EVENTFLOW_CERT_PASS_PBKDF2_ITERATIONS: '-1' })).toThrow(/EVENTFLOW_CERT_PASS_PBKDF2_ITERATIONS/);
    expect(() => parseHubConfig({})).toThrow(/EVENTFLOW_CERT_PASS_ENCRYPTION_KEY/);
  });

  it('generates v4 hub IDs that fit 64 characters', () => {
    const id = generateHubId('eventflow-hub', Date.UTC(2024, 0, 1));
    expect(id).toMatch(/^[A-Z]+-[A-Z]+-[0-9A-Z]{8}\.EVENTFLOW-HUB$/);
    for (let i = 0; i < 200; i++) expect(generateHubId('N'.repeat(31)).length).toBeLessThanOrEqual(64);
  });

  it('routes (domain, name) ∪ (domain, *), once each', () => {
    const registry = new HubRegistry<string>();
    registry.subscribe('a', 'd', 'x');
    registry.subscribe('b', 'd', '*');
    registry.subscribe('c', 'd', 'x');
    registry.subscribe('c', 'd', '*');
    registry.subscribe('c', 'd', 'x');
    registry.subscribe('e', 'other', '*');
    expect([...registry.recipients('d', 'x')].sort()).toEqual(['a', 'b', 'c']);
    expect([...registry.recipients('d', 'y')].sort()).toEqual(['b', 'c']);
    registry.unsubscribe('c', 'd', 'x');
    expect([...registry.recipients('d', 'x')].sort()).toEqual(['a', 'b', 'c']);
    registry.remove('c');
    expect([...registry.recipients('d', 'x')].sort()).toEqual(['a', 'b']);
    expect(registry.subscriptions('a')).toEqual([['d', 'x']]);
  });

  it('encodes logged errors as SERDE', () => {
    const error = Object.assign(new TypeError('boom'), { code: 'E_X', at: new Date(0) });
    const encoded = serdeEncode(error) as { $type: string; $value: Record<string, unknown> };
    expect(encoded.$type).toBe('Error');
    expect(Object.keys(encoded.$value)[0]).toBe('name');
    expect(encoded.$value).toMatchObject({ name: 'TypeError', message: 'boom', code: 'E_X', at: { $type: 'Date', $value: '1970-01-01T00:00:00.000Z' } });
  });
});

describeDb('hub (MariaDB, mTLS, v4 wire)', () => {
  it('bootstraps: tables, its hub row, STX alone as the first byte, a connected log row', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub();
    const tables = await f.db.query<{ name: string }>('SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()');
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['certificate', 'hub', 'event', 'event_cpid', 'event_eid', 'event_published', 'event_scheduled', 'log']));
    const [row] = await f.db.query<Record<string, unknown>>('SELECT * FROM hub WHERE id = ?', [hub.id]);
    expect(row).toMatchObject({ id: hub.id, internal_ip: '127.0.0.1', internal_port: hub.port, external_ip: '127.0.0.1', external_port: hub.port, quit: null });

    const spoke = await f.spoke(hub);
    expect(spoke.chunks[0]).toEqual(Buffer.of(STX));
    await until(() => f.logRows(hub.id), (rows) => hasMessage(rows, `connected ${spoke.id}`), 5000, 'connected row');
    const [log] = await f.logRows(hub.id);
    expect(log?.error).toBe('{}');
  });

  it('routes publish to (domain, name) and (domain, *) subscribers once each, in v4 unit order', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub();
    const [exact, star, both, other, foreign, publisher] = await f.spokes(hub, 6);
    await f.subscribe(hub, exact!, 'orders', 'placed');
    await f.subscribe(hub, star!, 'orders', '*');
    await f.subscribe(hub, both!, 'orders', 'placed');
    await f.subscribe(hub, both!, 'orders', '*');
    await f.subscribe(hub, both!, 'orders', 'placed'); // idempotent
    await f.subscribe(hub, other!, 'orders', 'shipped');
    await f.subscribe(hub, foreign!, 'billing', '*');

    const event = await f.insertPublished({ domain: 'orders', name: 'placed' });
    publisher!.send('publish', event.domain, event.id, event.name, event.pid);
    const expected = ['publish', 'orders', event.id, 'placed', event.pid];
    for (const spoke of [exact!, star!, both!]) expect(await spoke.waitFor(isPublishOf(event.id))).toEqual(expected);
    await fenceRouting(f, publisher!, [exact!, star!, both!], 'orders', 'placed');
    for (const spoke of [exact!, star!, both!]) expect(spoke.matching(isPublishOf(event.id))).toHaveLength(1);
    for (const spoke of [other!, foreign!, publisher!]) expect(spoke.records).toEqual([]);
    const row = await f.published(event.id);
    expect(row.hub).toBe(hub.id);
    expect(row.consumed_hub).not.toBeNull();
    expect([row.consumed_spoke, row.orphan]).toEqual([null, null]);
    // The store's claim left this hub's own row as it was: online.
    expect(await f.db.query('SELECT quit FROM hub WHERE id = ?', [hub.id])).toEqual([{ quit: null }]);

    // unsubscribe removes exactly that pair; a subscribed publisher gets its own event.
    exact!.send('unsubscribe', 'orders', 'placed');
    both!.send('unsubscribe', 'orders', 'placed');
    await f.subscribe(hub, publisher!, 'orders', 'placed');
    await until(() => hub.subscriptions().filter((s) => s.name === 'placed').length, (n) => n === 1, 5000, 'unsubscribes');
    const second = await f.insertPublished({ domain: 'orders', name: 'placed' });
    publisher!.send('publish', second.domain, second.id, second.name, second.pid);
    for (const spoke of [star!, both!, publisher!]) await spoke.waitFor(isPublishOf(second.id));
    await fenceRouting(f, publisher!, [star!, both!, publisher!], 'orders', 'placed');
    expect(exact!.matching(isPublishOf(second.id))).toEqual([]);
  });

  it('routes the publishes of one connection in the order received', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub();
    const [subscriber, publisher] = (await f.spokes(hub, 2)) as [TestSpoke, TestSpoke];
    await f.subscribe(hub, subscriber, 'flow', '*');
    const events: Inserted[] = [];
    for (let i = 0; i < 30; i++) events.push(await f.insertPublished({ domain: 'flow', name: `n${i % 3}` }));
    publisher.sendRaw(Buffer.concat(events.map((e) => Buffer.from(`publish\x1f${e.domain}\x1f${e.id}\x1f${e.name}\x1f${e.pid}\x1e`))));
    await until(() => subscriber.records.length, (n) => n === events.length, 5000, 'all publishes');
    expect(subscriber.records.map((r) => r[2])).toEqual(events.map((e) => e.id));
  });

  it('with two hubs exactly one wins the routing claim, and only its spokes get the event', async () => {
    // v4's property: the winning hub reaches only the sockets connected to it. This is why spokes
    // (and our gateways) connect to every online hub: then the winner always reaches them.
    const f = await fixture.setup();
    const a = await f.startHub();
    const b = await f.startHub();
    const onA = await f.spoke(a);
    const onB = await f.spoke(b);
    await f.subscribe(a, onA, 'orders', 'placed');
    await f.subscribe(b, onB, 'orders', 'placed');
    const publisherIdentity = f.spokeIdentity();
    const toA = await f.spoke(a, publisherIdentity);
    const toB = await f.spoke(b, publisherIdentity);

    const events: Inserted[] = [];
    for (let i = 0; i < 6; i++) events.push(await f.insertPublished({ domain: 'orders', name: 'placed' }));
    for (const e of events) {
      toA.send('publish', e.domain, e.id, e.name, e.pid);
      toB.send('publish', e.domain, e.id, e.name, e.pid);
    }
    await until(() => onA.records.length + onB.records.length, (n) => n >= events.length, 5000, 'routing');
    // A marker through each hub alone (each wins its own claim): each hub has routed the six before it.
    await fenceRouting(f, toA, [onA], 'orders', 'placed');
    await fenceRouting(f, toB, [onB], 'orders', 'placed');
    for (const e of events) {
      const row = await f.published(e.id);
      const winner = row.hub === a.id ? onA : onB;
      const loser = row.hub === a.id ? onB : onA;
      expect([a.id, b.id]).toContain(row.hub);
      expect(winner.matching(isPublishOf(e.id))).toEqual([['publish', e.domain, e.id, e.name, e.pid]]);
      expect(loser.matching(isPublishOf(e.id))).toEqual([]);
    }
  });

  it('marks an event without subscribers orphan, on the right row', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub();
    const publisher = await f.spoke(hub);
    const event = await f.insertPublished({ domain: 'lonely', name: 'nobody' });
    const untouched = await f.insertPublished({ domain: 'lonely', name: 'nobody' });
    publisher.send('publish', event.domain, event.id, event.name, event.pid);
    const row = await until(() => f.published(event.id), (r) => r.orphan !== null, 5000, 'orphan');
    expect(row.hub).toBe(hub.id);
    expect(row.consumed_spoke).toBeNull();
    expect((await f.published(untouched.id)).orphan).toBeNull();
    await until(() => f.logRows(hub.id), (rows) => hasMessage(rows, `observed an orphan event ${event.id}`), 5000, 'orphan row');
  });

  it('logs and ignores unknown records, drops a connection that sends garbage, and stays up for the others', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub();
    const [odd, garbage, subscriber, publisher] = (await f.spokes(hub, 4)) as [TestSpoke, TestSpoke, TestSpoke, TestSpoke];
    await f.subscribe(hub, subscriber, 'd', 'n');

    odd.send('bogus', 'x', 'y');
    odd.sendRaw(Buffer.from([0xff, 0xfe, 0x00, 0x1e])); // undecodable bytes, terminated: an unknown type
    odd.send('publish', 'only-a-domain');
    await until(() => f.logRows(hub.id), (rows) => hasMessage(rows, `observed invalid message bogus from spoke ${odd.id}`), 5000, 'invalid row');
    await f.subscribe(hub, odd, 'd', 'n'); // still connected and served

    garbage.sendRaw(Buffer.alloc(70 * 1024, 0x41)); // no terminator: over the 64 KiB record limit
    await garbage.closed;
    await until(() => f.logRows(hub.id), (rows) => hasMessage(rows, `dropped spoke ${garbage.id}`), 5000, 'drop row');
    const rows = await f.logRows(hub.id);
    expect(rows.find((r) => r.message.startsWith(`dropped spoke ${garbage.id}`))?.error).toMatch(/"\$type":"Error".*E_EVENTFLOW_WIRE_OVERSIZE/);

    const event = await f.insertPublished({ domain: 'd', name: 'n' });
    publisher.send('publish', event.domain, event.id, event.name, event.pid);
    await subscriber.waitFor(isPublishOf(event.id));
    await odd.waitFor(isPublishOf(event.id));
    expect(hub.running).toBe(true);
    expect(hub.clients()).not.toContain(garbage.id);
  });

  it('a starting hub announces itself; the peer forwards online(id, ip, port) to its spokes; a dead peer is marked quit', async () => {
    const f = await fixture.setup();
    const a = await f.startHub();
    const spoke = await f.spoke(a);
    // A peer that crashed without marking its row quit.
    await f.db.query("INSERT INTO hub (id, external_ip, external_port, internal_ip, internal_port) VALUES ('DEAD-PEER-M0000000.EVENTFLOW-HUB', '127.0.0.1', 1, '127.0.0.1', 1)");
    const b = await f.startHub();

    const online = await spoke.waitFor((r) => r[0] === 'online');
    expect(online).toEqual(['online', b.id, '127.0.0.1', String(b.port)]);
    expect(spoke.chunks[0]).toEqual(Buffer.of(STX));
    // The broadcast to each peer runs on its own: the dead peer's failure may be written after the spoke got `online`.
    await until(() => f.db.query<{ quit: string | null }>("SELECT quit FROM hub WHERE id = 'DEAD-PEER-M0000000.EVENTFLOW-HUB'"), ([dead]) => dead?.quit != null, 5000, 'dead peer marked quit');
    await until(() => f.logRows(b.id), (rows) => hasMessage(rows, `broadcasted online status to peer hub ${a.id}`), 5000, 'broadcast row');
    await until(() => f.logRows(b.id), (rows) => hasMessage(rows, 'failed to connect to peer hub DEAD-PEER-M0000000.EVENTFLOW-HUB'), 5000, 'failed connect row');
    await until(() => f.logRows(a.id), (rows) => hasMessage(rows, `forwarded online status of peer hub ${b.id}`), 5000, 'forward row');

    // Only a hub announces itself: a spoke claiming to be another hub is not forwarded.
    const liar = await f.spoke(a);
    liar.send('online', 'EVIL-HUB-M0000000.EVENTFLOW-HUB', '10.0.0.1', '50001');
    await until(() => f.logRows(a.id), (rows) => hasMessage(rows, 'ignored online status of EVIL-HUB-M0000000.EVENTFLOW-HUB'), 5000, 'ignored row');
    expect(spoke.matching((r) => r[0] === 'online')).toHaveLength(1);
  });

  it('rejects a client without a certificate or with the wrong SNI, and keeps serving the others', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub();
    const identity = f.spokeIdentity();
    const { trustedRoots } = await identity.getTlsMaterial();

    await expect(TestSpoke.connect(hub.port, { servername: hub.id, ca: [...trustedRoots] }, 3000)).rejects.toThrow();
    const wrong = await clientTlsOptions(identity, 'OTHER-HUB-M0000000.EVENTFLOW-HUB');
    await expect(TestSpoke.connect(hub.port, wrong, 3000)).rejects.toThrow();
    const noSni = { ...(await clientTlsOptions(identity, hub.id)), servername: undefined, checkServerIdentity: () => undefined };
    await expect(TestSpoke.connect(hub.port, noSni, 3000)).rejects.toThrow();

    const good = await f.spoke(hub, identity);
    expect(good.chunks[0]).toEqual(Buffer.of(STX));
    expect(hub.clients()).toEqual([identity.id]);
  });

  it('fires a due scheduled event exactly once across two hubs, with its pid, and settles it', async () => {
    const f = await fixture.setup();
    const a = await f.startHub({ EVENTFLOW_HUB_SHEDULED_INTERVAL_DELAY: 200 });
    const b = await f.startHub({ EVENTFLOW_HUB_SHEDULED_INTERVAL_DELAY: 200 });
    const onA = await f.spoke(a);
    const onB = await f.spoke(b);
    await f.subscribe(a, onA, 'timers', '*');
    await f.subscribe(b, onB, 'timers', '*');

    const due = await f.insertScheduled({ domain: 'timers', name: 'rang' }, -5);
    const later = await f.insertScheduled({ domain: 'timers', name: 'later' }, 2);
    const first = await Promise.race([onA.waitFor(isPublishOf(due.id)), onB.waitFor(isPublishOf(due.id))]);
    expect(first).toEqual(['publish', 'timers', due.id, 'rang', due.pid]);
    const [scheduled] = await f.db.query<Record<string, string | null>>('SELECT * FROM event_scheduled WHERE event_id = ?', [due.id]);
    expect(scheduled?.executed).not.toBeNull();
    await until(() => f.db.query<{ success: string | null }>('SELECT success FROM event_scheduled WHERE event_id = ?', [due.id]), ([r]) => r?.success != null, 5000, 'success');
    expect((await f.published(due.id)).hub).toMatch(new RegExp(`^(${a.id}|${b.id})$`.replace(/\./g, '\\.')));

    // Not before its due time (v4's filter selected future rows), then once.
    expect([...onA.matching(isPublishOf(later.id)), ...onB.matching(isPublishOf(later.id))]).toEqual([]);
    await Promise.race([onA.waitFor(isPublishOf(later.id), 6000), onB.waitFor(isPublishOf(later.id), 6000)]);
    // Time is what is tested: the other hub's scheduler timer runs out too, and fires nothing.
    await sleep(500);
    expect([...onA.matching(isPublishOf(due.id)), ...onB.matching(isPublishOf(due.id))]).toHaveLength(1);
    expect([...onA.matching(isPublishOf(later.id)), ...onB.matching(isPublishOf(later.id))]).toHaveLength(1);
  });

  it('redelivers an event whose consumer claim outlived the lease, a bounded number of times', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub({ EVENTFLOW_HUB_CLAIM_LEASE_MS: 1000, EVENTFLOW_HUB_CLAIM_MAX_REDELIVERIES: 1 });
    const [consumer, publisher] = (await f.spokes(hub, 2)) as [TestSpoke, TestSpoke];
    await f.subscribe(hub, consumer, 'jobs', 'run');
    const stuck = await f.insertPublished({ domain: 'jobs', name: 'run' });
    const done = await f.insertPublished({ domain: 'jobs', name: 'run' });
    publisher.send('publish', stuck.domain, stuck.id, stuck.name, stuck.pid);
    publisher.send('publish', done.domain, done.id, done.name, done.pid);
    await consumer.waitFor(isPublishOf(stuck.id));
    await consumer.waitFor(isPublishOf(done.id));

    // A v4 spoke claims both, settles one, and crashes on the other.
    await f.db.query("UPDATE event_published SET consumed_spoke = UTC_TIMESTAMP() - INTERVAL 5 SECOND, consumer = 'CRASHED-SPOKE-M0000000.EVENTFLOW-SPOKE' WHERE event_id IN (?, ?)", [stuck.id, done.id]);
    await f.db.query('UPDATE event_published SET success = UTC_TIMESTAMP() WHERE event_id = ?', [done.id]);

    await until(() => consumer.matching(isPublishOf(stuck.id)).length, (n) => n === 2, 6000, 'redelivery');
    expect(consumer.matching(isPublishOf(stuck.id))[1]).toEqual(['publish', 'jobs', stuck.id, 'run', stuck.pid]);
    const row = await f.published(stuck.id);
    expect([row.consumed_spoke, row.consumer, row.hub]).toEqual([null, null, hub.id]);
    expect(hasMessage(await f.logRows(hub.id), `redelivering event ${stuck.id}`)).toBe(true);

    // Nobody claims it again: after the one allowed redelivery the hub gives up; the settled event is never resent.
    await until(() => f.logRows(hub.id), (rows) => hasMessage(rows, `gave up redelivering event ${stuck.id}`), 6000, 'give-up row');
    expect(consumer.matching(isPublishOf(stuck.id))).toHaveLength(2);
    expect(consumer.matching(isPublishOf(done.id))).toHaveLength(1);
  });

  it('pages through stuck claims of its own and takes each back at most once', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub(); // default lease: its own sweeper leaves these rows alone
    const other = await f.startHub();
    const mine: Inserted[] = [];
    for (let i = 0; i < 5; i++) mine.push(await f.insertPublished({ domain: 'd', name: 'n' }));
    const foreign = await f.insertPublished({ domain: 'd', name: 'n' });
    const settled = await f.insertPublished({ domain: 'd', name: 'n' });
    const fresh = await f.insertPublished({ domain: 'd', name: 'n' });
    const ago = (seconds: number) => `UTC_TIMESTAMP() - INTERVAL ${seconds} SECOND`;
    await f.db.query(`UPDATE event_published SET hub = ?, consumed_hub = ${ago(10)} WHERE event_id IN (?)`, [hub.id, [...mine, settled].map((e) => e.id)]);
    await f.db.query(`UPDATE event_published SET consumed_spoke = ${ago(8)}, consumer = 'S.EVENTFLOW-SPOKE' WHERE event_id = ?`, [mine[0]!.id]);
    await f.db.query(`UPDATE event_published SET success = UTC_TIMESTAMP() WHERE event_id = ?`, [settled.id]);
    await f.db.query(`UPDATE event_published SET hub = ?, consumed_hub = ${ago(10)} WHERE event_id = ?`, [other.id, foreign.id]);
    await f.db.query(`UPDATE event_published SET hub = ?, consumed_hub = UTC_TIMESTAMP() WHERE event_id = ?`, [hub.id, fresh.id]);

    const seen: StuckClaim[] = [];
    let after: { hubAt: string; eventId: string } | undefined;
    for (;;) {
      const page = await findStuckClaims(f.pool, hub.id, 2, 60, 2, after);
      seen.push(...page);
      if (page.length < 2) break;
      after = { hubAt: page[1]!.hubAt, eventId: page[1]!.eventId };
    }
    expect(seen.map((c) => c.eventId).sort()).toEqual(mine.map((e) => e.id).sort());
    const claimed = seen.find((c) => c.eventId === mine[0]!.id)!;
    expect(claimed).toMatchObject({ consumer: 'S.EVENTFLOW-SPOKE', domain: 'd', name: 'n', pid: mine[0]!.pid });
    expect(await resetStuckClaim(f.pool, hub.id, claimed)).toBe(true);
    expect(await resetStuckClaim(f.pool, hub.id, claimed)).toBe(false); // changed since read
    expect(await f.published(claimed.eventId)).toMatchObject({ consumer: null, consumed_spoke: null, hub: hub.id });
    expect((await findStuckClaims(f.pool, hub.id, 2, 60, 10)).map((c) => c.eventId)).not.toContain(claimed.eventId);
  });

  it('undoes a peer marking it quit while it runs', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub({ EVENTFLOW_HUB_CLAIM_LEASE_MS: 1000 });
    await f.db.query('UPDATE hub SET quit = UTC_TIMESTAMP() WHERE id = ?', [hub.id]);
    await until(() => f.db.query<{ quit: string | null }>('SELECT quit FROM hub WHERE id = ?', [hub.id]), ([r]) => r?.quit === null, 5000, 'restore');
  });

  it('destroy() closes the spokes, marks its row quit in UTC and logs', async () => {
    const f = await fixture.setup();
    const hub = await f.startHub();
    const spoke = await f.spoke(hub);
    await f.subscribe(hub, spoke, 'd', '*');
    const stalled = connect(hub.port, '127.0.0.1'); // TCP only, never a TLS handshake
    stalled.on('error', () => undefined);
    await new Promise((resolve) => stalled.once('connect', resolve));
    const started = Date.now();
    await hub.destroy();
    expect(Date.now() - started).toBeLessThan(4000);
    await spoke.closed;
    const [row] = await f.db.query<{ late: number }>('SELECT ABS(TIMESTAMPDIFF(SECOND, quit, UTC_TIMESTAMP())) AS late FROM hub WHERE id = ? AND quit IS NOT NULL', [hub.id]);
    expect(Number(row?.late)).toBeLessThanOrEqual(5);
    expect(hasMessage(await f.logRows(hub.id), 'destroyed')).toBe(true);
    expect(hub.running).toBe(false);
    await hub.destroy(); // idempotent
  });
});
