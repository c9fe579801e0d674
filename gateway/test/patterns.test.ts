/**
 * Pattern subscriptions (namespace patterns and filters) through real clients and a real gateway:
 * pattern + names + pid filters, authorization per delivered event (a domain created after
 * subscribing included), resume after a reconnect across all matched domains in one position
 * order without gaps or duplicates, and a pattern over 2,000 domains.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { isEventflowError, namespacePattern, type StoredEvent } from '@eventflow/core';
import { eventually, fence } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { connect } from '@eventflow/test-support/raw-socket';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const SECRET = 'test-secret-0123456789-abcdefghijklmnopqrstuvwxyz';
const token = (claims: Record<string, string[]>): Promise<string> =>
  new SignJWT({ eventflow: claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));

/** A listener collecting events, and a fence: a marker published in `domain` (which the subscription matches) that must come out after everything before it. */
function collect() {
  const events: StoredEvent[] = [];
  return { events, listener: (event: StoredEvent) => void events.push(event), real: () => events.filter((event) => event.name !== 'marker') };
}

describe('pattern subscriptions', () => {
  it('deliver the events of every matching domain, filtered by names AND a pid pattern', async () => {
    h = await startHarness();
    const client = h.client();
    const seen = collect();
    await client.subscribe(namespacePattern('prod.*'), ['placed', 'shipped', 'marker'], seen.listener, { pid: 'order-*' });
    const publish = (domain: string, name: string, pid: string) => client.publish({ domain, name, pid, data: { domain, name, pid } });
    const expected = [await publish('prod.eu', 'placed', 'order-1'), await publish('prod.us', 'shipped', 'order-2')];
    await publish('prod.eu', 'cancelled', 'order-1'); // name filtered out
    await publish('prod.eu', 'placed', 'invoice-1'); // pid filtered out
    await publish('prod', 'placed', 'order-3'); // `*` needs exactly one token
    await publish('prod.eu.1', 'placed', 'order-4'); // … and not two
    await publish('stage.eu', 'placed', 'order-5');
    expected.push(await publish('prod.new', 'placed', 'order-6')); // a domain created after subscribing
    await fence(() => publish('prod.eu', 'marker', 'order-m'), (id) => seen.events.some((event) => event.id === id));
    expect(seen.real().map((event) => event.id)).toEqual(expected);

    const deep = collect();
    await client.subscribe(namespacePattern('prod.>'), '*', deep.listener);
    const a = await publish('prod.eu.1', 'anything', 'p');
    const b = await publish('prod.x', 'other', 'q');
    await publish('prod', 'other', 'q');
    await fence(() => publish('prod.eu', 'marker', 'm'), (id) => deep.events.some((event) => event.id === id));
    expect(deep.real().map((event) => event.id)).toEqual([a, b]);
  });

  it('a pattern is a value of its own: a domain named like a pattern is a plain domain', async () => {
    h = await startHarness();
    const client = h.client();
    const literal: StoredEvent[] = [];
    await client.subscribe('prod.*', '*', (event) => void literal.push(event));
    await client.publish({ domain: 'prod.eu', name: 'n', pid: 'p' });
    const id = await client.publish({ domain: 'prod.*', name: 'n', pid: 'p' });
    await eventually(() => literal.length === 1);
    expect(literal.map((event) => event.id)).toEqual([id]);
    expect(() => namespacePattern('prod.>.x')).toThrow(/">" may only be the last token/);
    expect(() => namespacePattern('prod..x')).toThrow(/empty tokens/);
  });

  it('deliver only domains the token may subscribe to (also ones created later), and need the wildcard grant', async () => {
    h = await startHarness({ EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET });
    const admin = h.client({ token: await token({ publish: ['*'], subscribe: ['*'] }) });
    const tenant = h.client({ token: await token({ subscribe: ['tenant-a.*', 'shared.news'], wildcard: ['*'] }) });
    const seen = collect();
    await tenant.subscribe(namespacePattern('>'), '*', seen.listener);
    const publish = (domain: string) => admin.publish({ domain, name: 'n', pid: 'p', data: { domain } });
    const expected = [await publish('tenant-a.orders')];
    await publish('tenant-b.orders');
    expected.push(await publish('shared.news'));
    await publish('shared.secrets');
    expected.push(await publish('tenant-a.created-later'));
    await publish('tenant-b.created-later');
    const marker = await publish('tenant-a.marker');
    await eventually(() => seen.events.some((event) => event.id === marker));
    expect(seen.events.map((event) => event.id)).toEqual([...expected, marker]);

    const noWildcard = h.client({ token: await token({ subscribe: ['*'] }) });
    const refused = await noWildcard.subscribe(namespacePattern('tenant-a.*'), '*', () => undefined).catch((error: unknown) => error);
    expect(isEventflowError(refused, 'E_EVENTFLOW_FORBIDDEN')).toBe(true);
    const narrow = h.client({ token: await token({ subscribe: ['*'], wildcard: ['tenant-a.*'] }) });
    await narrow.subscribe(namespacePattern('tenant-a.>'), '*', () => undefined);
    const wider = await narrow.subscribe(namespacePattern('>'), '*', () => undefined).catch((error: unknown) => error);
    expect(isEventflowError(wider, 'E_EVENTFLOW_FORBIDDEN')).toBe(true);
  });

  it('resume after a reconnect across all matched domains in one position order, without gaps or duplicates', async () => {
    h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const subscriber = h.client();
    const publisher = h.client();
    const seen = collect();
    await subscriber.subscribe(namespacePattern('r.*'), '*', seen.listener);
    const published: string[] = [];
    const batch = async (from: number, count: number): Promise<void> => {
      for (let i = from; i < from + count; i++) published.push(await publisher.publish({ domain: `r.d${i % 7}`, name: 'n', pid: `p${i}` }));
    };
    await batch(0, 60);
    await eventually(() => seen.events.length === 60, 10_000, 'the first batch');
    await h.stopGateway();
    const missed = batch(60, 60); // sent once the publisher is back, maybe before the subscriber is
    await h.startGateway();
    await missed;
    await batch(120, 60);
    await eventually(() => seen.events.length >= 180, 20_000, 'every event after the reconnect');
    await fence(() => publisher.publish({ domain: 'r.d0', name: 'marker', pid: 'm' }), (id) => seen.events.some((event) => event.id === id));
    const ids = seen.real().map((event) => event.id);
    expect(ids).toEqual(published);
    const positions = seen.events.map((event) => event.position);
    expect(positions).toEqual([...positions].sort((x, y) => x - y));
    expect(new Set(ids).size).toBe(ids.length);
  }, 60_000);

  it('cover a pattern over 2,000 domains: every event once, in position order, replayed from a position too', async () => {
    h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const client = h.client();
    const live = collect();
    await client.subscribe(namespacePattern('big.*'), '*', live.listener);
    const published: string[] = [];
    const sends: Array<Promise<string>> = [];
    for (let i = 0; i < 2000; i++) sends.push(client.publish({ domain: `big.d${i}`, name: 'n', pid: 'p' }));
    published.push(...(await Promise.all(sends)));
    await eventually(() => live.events.length === 2000, 30_000, 'the 2,000 events');
    const byPosition = [...live.events].sort((x, y) => x.position - y.position);
    expect(live.events).toEqual(byPosition);
    expect(new Set(live.events.map((event) => event.id))).toEqual(new Set(published));

    // Resuming from the middle (what a reconnecting client sends): the replay reads every domain in one position order.
    const middle = byPosition[999] as StoredEvent;
    const raw = await connect(h.gateway.url);
    const answer = await raw.request('subscribePattern', { subscription: 's1', pattern: 'big.>', after: middle.position });
    expect(answer.type).toBe('result');
    await eventually(() => raw.frames.filter((frame) => frame.type === 'matched').length === 1000, 20_000, 'the replay');
    // Then live: a marker after the replay proves nothing else (no duplicate, nothing out of order) came on the wire.
    const marker = await client.publish({ domain: 'big.marker', name: 'n', pid: 'p' });
    const matchedFrames = () => raw.frames.filter((frame) => frame.type === 'matched') as unknown as Array<{ subscriptions: string[]; event: StoredEvent }>;
    await eventually(() => matchedFrames().some((frame) => frame.event.id === marker), 10_000, 'the marker');
    const matched = matchedFrames();
    expect(matched.map((frame) => frame.event.id)).toEqual([...byPosition.slice(1000).map((event) => event.id), marker]);
    expect(matched.every((frame) => frame.subscriptions.join() === 's1')).toBe(true);
    raw.ws.close();
  }, 60_000);
});
