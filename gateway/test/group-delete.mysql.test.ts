/**
 * A consumer group deleted on one gateway while its members are connected to another, on one
 * MariaDB database (EVENTFLOW_ROUTER=local: the gateways do not notify each other, so only A's own
 * claims can tell). A's members are ended with E_EVENTFLOW_GROUP_DELETED (their open deliveries
 * revoked, a settle of one answered as unknown), A does not record the group again, and a consume
 * registered afterwards records a new group from then on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { deleteGroup, isEventflowError, listGroups, type EventflowError } from '@eventflow/core';
import { createNodeClient } from '@eventflow/node';
import { connect, type Conn } from '@eventflow/test-support/raw-socket';
import { eventually } from '@eventflow/test-support/wait';
import { mysqlGatewayEnv, mysqlUnavailable, useTestDatabases, type TestDatabase } from '@eventflow/test-support/mysql';
import { startGateway, type Gateway } from '../src/index.js';
import { GROUP_POLL_MS } from '../src/defaults.js';
import { GROUP_READ_MS } from '../src/store/mysql/ledger-rows.js';
import { MysqlStore } from '../src/store/mysql/mysql.js';

/**
 * How soon A ends its members: at its first claim that reads the group after the delete. A drained
 * group claims on its timer every GROUP_POLL_MS, and the MySQL ledger reads a group again once its
 * copy is GROUP_READ_MS old (a claim after a route goes by the copy): 2 s. The rest is room for a
 * machine under load.
 */
const ENDED_WITHIN = GROUP_POLL_MS + GROUP_READ_MS + 3_000;

describe.skipIf(mysqlUnavailable !== undefined)('a consumer group deleted on another gateway (MariaDB, two gateways)', () => {
  const databases = useTestDatabases();
  const sockets: Conn[] = [];
  afterEach(() => {
    for (const socket of sockets.splice(0)) socket.ws.close();
  });

  async function twoGateways(): Promise<{ db: TestDatabase; a: Gateway; b: Gateway }> {
    const db = await databases.fresh();
    const env = { ...mysqlGatewayEnv(db.options), EVENTFLOW_PORT: 0, EVENTFLOW_ROUTER: 'local', EVENTFLOW_LOG_LEVEL: 'silent', EVENTFLOW_CONSOLE_DIR: 'off' };
    const [a, b] = [await startGateway(env), await startGateway(env)];
    databases.onCleanup(() => a.close());
    databases.onCleanup(() => b.close());
    return { db, a, b };
  }

  it.each([
    ['a named group', 'billing'],
    ['the default group', ''],
  ])('%s: its members on the other gateway are ended, not recorded again at their next claim; a new consume starts a new group', async (_title, group) => {
    const { db, a, b } = await twoGateways();
    const key = { domain: 'jobs', name: 'run', group };
    const errors: unknown[] = [];
    const worker = createNodeClient(a.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: (error) => void errors.push(error) });
    const admin = createNodeClient(b.url, { onError: () => undefined });
    databases.onCleanup(() => worker.close({ drainTimeout: 0 }));
    databases.onCleanup(() => admin.close({ drainTimeout: 0 }));

    // A member on A that holds its one delivery open: a raw connection, so that its settle can be sent after the end.
    const holder = await connect(a.url);
    sockets.push(holder);
    expect(await holder.request('consume', { consumer: 'c1', ...key, concurrency: 1 })).toMatchObject({ type: 'result' });
    await worker.publish({ domain: 'jobs', name: 'run', pid: 'held' });
    const held = await holder.next((frame) => frame.type === 'delivery', 10_000);

    const got: string[] = [];
    const consumer = await worker.consume('jobs', 'run', (event) => void got.push(event.pid), { group });
    await worker.publish({ domain: 'jobs', name: 'run', pid: 'before' });
    await eventually(() => got.includes('before'), 10_000, 'the worker on A to get an event of the group');

    // B has no member: the delete is not refused there.
    expect(await deleteGroup(admin, 'jobs', 'run', group)).toBe(true);
    const deletedAt = Date.now();
    const between = await admin.publish({ domain: 'jobs', name: 'run', pid: 'between' });

    const ended = await eventually(() => errors.find((error): error is EventflowError => isEventflowError(error, 'E_EVENTFLOW_GROUP_DELETED')), ENDED_WITHIN, 'the worker on A to be told its group was deleted');
    const latency = Date.now() - deletedAt;
    expect(latency).toBeLessThan(ENDED_WITHIN);
    expect(ended.details).toEqual(key);
    expect(ended.message).toMatch(/register the consumer again to start a new group from now .* or ask the operator/);

    // The raw member: its open delivery revoked first, then the consumer ended; a settle of that delivery is answered as unknown.
    expect(await holder.next((frame) => frame.type === 'revoked')).toMatchObject({ delivery: held.delivery });
    expect(await holder.next((frame) => frame.type === 'consumerEnded')).toMatchObject({ consumer: 'c1', code: 'E_EVENTFLOW_GROUP_DELETED', details: key });
    expect(await holder.request('settle', { delivery: held.delivery, outcome: 'success' })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_UNKNOWN_DELIVERY' });

    // A holds no member of the group any more, so nothing of it claims there: the group stays deleted.
    expect(a.dispatcher.members(key)).toBe(0);
    expect(await db.query('SELECT grp FROM eventflow_group WHERE domain = ? AND name = ? AND grp = ?', [key.domain, key.name, key.group])).toEqual([]);
    expect((await listGroups(admin, 'jobs')).map((one) => one.group)).toEqual([]);
    // The ended consumer's remove() has nothing left to do; the connection serves on.
    await consumer.remove();
    await holder.ping();

    // A new consume on A records the group anew, from now: it gets what is published after it, not `between`.
    await worker.consume('jobs', 'run', (event) => void got.push(event.pid), { group });
    const [created] = await listGroups(admin, 'jobs');
    expect(created).toMatchObject({ ...key, members: 0 });
    expect(created!.createdPosition).toBeGreaterThanOrEqual(await positionOf(db, between));
    await worker.publish({ domain: 'jobs', name: 'run', pid: 'after' });
    await eventually(() => got.includes('after'), 10_000, 'the new consume on A to get an event published after it');
    expect(got).toEqual(['before', 'after']);
    expect(errors.filter((error) => isEventflowError(error, 'E_EVENTFLOW_GROUP_DELETED'))).toHaveLength(1);
  });

  it('a group recorded again does not count the rows a stale claim wrote for the deleted one as its pending work', async () => {
    const db = await databases.fresh();
    const store = new MysqlStore(db.options);
    await store.init();
    databases.onCleanup(() => store.close());
    const ledger = store.ledger();
    const key = { domain: 'jobs', name: 'run', group: 'billing' };
    const first = await ledger.ensureGroup(key);
    const event = (await store.append({ id: 'e1', domain: 'jobs', name: 'run', pid: 'p1', data: {} }, { publisher: 'test' })).event;
    expect(await ledger.deleteGroup(key)).toBe(true);
    // What another gateway's claim going by its cached copy of the group writes after the delete: the group's row for the event, leased.
    await db.query(
      `INSERT INTO eventflow_delivery (event_id, domain, gname, grp, position, name, attempts, updated, delivery, owner, deadline) VALUES (?, 'jobs', 'run', 'billing', ?, 'run', 1, UTC_TIMESTAMP(3), 'stale', 'gw-a', ?)`,
      [event.id, event.position, Date.now() + 60_000],
    );
    const again = await ledger.ensureGroup(key);
    expect(again.createdPosition).toBeGreaterThanOrEqual(first.createdPosition);
    const [listed] = await ledger.groups(Date.now(), ['jobs']);
    expect(listed).toMatchObject({ ...key, pending: 0, inFlight: 0 });
    expect(await db.query('SELECT event_id FROM eventflow_delivery WHERE gname = ? AND grp = ?', ['run', 'billing'])).toEqual([]);
  });

  it("request()'s check for a group sees a delete on another gateway within GROUP_READ_MS, its own at once, a new group at once", async () => {
    const db = await databases.fresh();
    const [here, there] = [new MysqlStore(db.options), new MysqlStore(db.options)];
    for (const store of [here, there]) {
      await store.init();
      databases.onCleanup(() => store.close());
    }
    const key = { domain: 'jobs', name: 'run', group: 'billing' };
    await there.ledger().ensureGroup(key);
    // Recorded on another gateway: found at once (a group's absence is not kept).
    expect(await here.ledger().consumed('jobs', 'run')).toBe(true);
    expect(await there.ledger().deleteGroup(key)).toBe(true);
    expect(await there.ledger().consumed('jobs', 'run')).toBe(false);
    // `here` may go by what it found for up to GROUP_READ_MS, no longer.
    await eventually(async () => (await here.ledger().consumed('jobs', 'run')) === false, GROUP_READ_MS + 3_000, 'the delete seen on the other store', { every: 50 });
    await here.ledger().ensureGroup(key);
    expect(await here.ledger().consumed('jobs', 'run')).toBe(true);
    expect(await here.ledger().deleteGroup(key)).toBe(true);
    expect(await here.ledger().consumed('jobs', 'run')).toBe(false);
  });
});

async function positionOf(db: TestDatabase, eventId: string): Promise<number> {
  const [row] = await db.query<{ position: number }>('SELECT position FROM eventflow_position WHERE event_id = ?', [eventId]);
  return Number(row?.position);
}
