/**
 * EVENTFLOW_MAX_SUBSCRIPTIONS counts what is registered, not the handles a client names: a wait
 * handle re-registered for another (domain, pid) replaces its wait, a consumer handle cannot
 * stand for two consumers, and a subscription re-made while its replay runs does not leave the
 * old replay running. EVENTFLOW_MAX_GROUPS_PER_DOMAIN counts the groups stored, however many
 * registrations arrive at once. Checked on the dispatcher's own counts, over real WebSockets.
 */
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';
import { connect } from '@eventflow/test-support/raw-socket';

const sockets: WebSocket[] = [];
let h: Harness | undefined;
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  await h?.stop();
  h = undefined;
});

describe('registrations counted by what they register', () => {
  it('one wait handle reused for many (domain, pid) pairs holds one wait, the last one', async () => {
    h = await startHarness({ EVENTFLOW_MAX_SUBSCRIPTIONS: 5, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const conn = await connect(h.gateway.url, { client: 'registration-test' });
    sockets.push(conn.ws);
    // Pipelined in rounds below EVENTFLOW_MAX_IN_FLIGHT.
    for (let round = 0; round < 5; round++) {
      const ids = Array.from({ length: 100 }, (_, i) => round * 100 + i).map((i) => conn.sendRequest('wait', { wait: 'w', domain: `d${i % 7}`, pid: `p${i}`, names: ['done'] }));
      for (const id of ids) expect(await conn.answer(id)).toMatchObject({ type: 'result' });
    }
    expect(h.gateway.dispatcher.stats.waits).toBe(1);

    // An outcome for a replaced wait is not sent; one for the last registration is.
    const publisher = await connect(h.gateway.url, { client: 'publisher' });
    sockets.push(publisher.ws);
    expect(await publisher.request('publish', { event: { domain: 'd0', name: 'done', pid: 'p0', data: {} } })).toMatchObject({ type: 'result' });
    expect(await publisher.request('publish', { event: { domain: `d${499 % 7}`, name: 'done', pid: 'p499', data: {} } })).toMatchObject({ type: 'result' });
    const waited = await conn.next((frame) => frame.type === 'waited');
    expect(waited).toMatchObject({ wait: 'w', event: { pid: 'p499' } });
    expect(conn.frames.filter((frame) => frame.type === 'waited')).toHaveLength(1);
    await eventually(() => h?.gateway.dispatcher.stats.waits === 0, 5_000, 'the wait to finish');

    // The limit still holds for distinct handles, and the re-registrations used none of it.
    for (let i = 0; i < 5; i++) expect(await conn.request('wait', { wait: `h${i}`, domain: 'd', pid: `q${i}`, names: ['done'] })).toMatchObject({ type: 'result' });
    expect(await conn.request('wait', { wait: 'h5', domain: 'd', pid: 'q5', names: ['done'] })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });
    expect(await conn.request('wait', { wait: 'h0', domain: 'other', pid: 'x', names: ['done'] })).toMatchObject({ type: 'result' });
    expect(h.gateway.dispatcher.stats.waits).toBe(5);
    expect(await conn.request('cancelWait', { wait: 'h0' })).toMatchObject({ type: 'result' });
    expect(h.gateway.dispatcher.stats.waits).toBe(4);
  });

  it('a consumer handle stands for one consumer; resubscribing does not multiply registrations', async () => {
    h = await startHarness({ EVENTFLOW_MAX_SUBSCRIPTIONS: 3, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const conn = await connect(h.gateway.url, { client: 'registration-test' });
    sockets.push(conn.ws);
    expect(await conn.request('consume', { consumer: 'c', domain: 'a', name: 'n' })).toMatchObject({ type: 'result' });
    const again = await Promise.all(Array.from({ length: 50 }, (_, i) => conn.request('consume', { consumer: 'c', domain: `a${i}`, name: 'n' })));
    for (const answer of again) expect(answer).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT' });
    const subscribes = await Promise.all(Array.from({ length: 50 }, () => conn.request('subscribe', { domain: 'a', name: 'n', after: 0 })));
    for (const answer of subscribes) expect(answer).toMatchObject({ type: 'result' });
    expect(h.gateway.dispatcher.stats).toMatchObject({ consumers: 1, subscriptions: 1 });
  });

  it('a pattern subscription and a subscription whose keys spell alike are two registrations', async () => {
    h = await startHarness({ EVENTFLOW_MAX_SUBSCRIPTIONS: 3, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const conn = await connect(h.gateway.url, { client: 'registration-test' });
    sockets.push(conn.ws);
    // A handle may hold any character: `h0\u001fn` read as a subscription key is domain `pattern:h0`, name `n`.
    for (let i = 0; i < 3; i++) expect(await conn.request('subscribePattern', { subscription: `h${i}\u001fn`, pattern: 'tenant.*' })).toMatchObject({ type: 'result' });
    for (let i = 0; i < 3; i++) {
      expect(await conn.request('subscribe', { domain: `pattern:h${i}`, name: 'n' })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });
    }
    expect(await conn.request('unsubscribePattern', { subscription: 'h0\u001fn' })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribe', { domain: 'pattern:h0', name: 'n' })).toMatchObject({ type: 'result' });
    expect(await conn.request('subscribePattern', { subscription: 'h0\u001fn', pattern: 'tenant.*' })).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_LIMIT_EXCEEDED' });
  });
});

describe('EVENTFLOW_MAX_GROUPS_PER_DOMAIN under registrations sent at once', () => {
  it('consumes into new groups from several connections in one burst create no more groups than the limit; joining one still works', async () => {
    h = await startHarness({ EVENTFLOW_MAX_GROUPS_PER_DOMAIN: 3 });
    const conns = await Promise.all(Array.from({ length: 4 }, () => connect(h!.gateway.url, { client: 'registration-test' })));
    for (const conn of conns) sockets.push(conn.ws);
    const sent = conns.flatMap((conn, c) => Array.from({ length: 5 }, (_, i) => ({ conn, id: conn.sendRequest('consume', { consumer: `c${i}`, domain: 'jobs', name: 'run', group: `g${c}-${i}` }) })));
    const answers = await Promise.all(sent.map(({ conn, id }) => conn.answer(id)));
    const refused = answers.filter((answer) => answer.type === 'error');
    expect(answers.filter((answer) => answer.type === 'result')).toHaveLength(3);
    for (const answer of refused) expect(answer).toMatchObject({ code: 'E_EVENTFLOW_LIMIT_EXCEEDED', details: { limit: 'EVENTFLOW_MAX_GROUPS_PER_DOMAIN', value: 3 } });
    const groups = await h.gateway.store.ledger().groups(Date.now());
    expect(groups).toHaveLength(3);

    // Joining a group that exists is not creating one, also many at once; another domain has its own room.
    const member = { domain: 'jobs', name: 'run', group: groups[0]!.group };
    const joins = await Promise.all(conns.map((conn) => conn.request('consume', { consumer: 'member', ...member })));
    for (const answer of joins) expect(answer).toMatchObject({ type: 'result' });
    expect(await conns[0]!.request('consume', { consumer: 'other', domain: 'billing', name: 'run', group: 'g' })).toMatchObject({ type: 'result' });
  });
});

describe('a removal sent right behind its registration', () => {
  it('removeConsumer and cancelWait pipelined behind consume and wait(afterId) take effect: nothing stays registered, served or counted', async () => {
    h = await startHarness({ EVENTFLOW_MAX_SUBSCRIPTIONS: 3, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const conn = await connect(h.gateway.url, { client: 'registration-test' });
    sockets.push(conn.ws);
    expect(await conn.request('publish', { event: { id: 'first', domain: 'jobs', name: 'run', pid: 'p', data: {} } })).toMatchObject({ type: 'result' });
    // Each registration awaits the store before it is made; its removal is read meanwhile.
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(conn.sendRequest('consume', { consumer: `c${i}`, domain: 'jobs', name: 'run' }), conn.sendRequest('removeConsumer', { consumer: `c${i}` }));
    }
    for (const id of ids.splice(0)) expect(await conn.answer(id)).toMatchObject({ type: 'result' });
    for (let i = 0; i < 3; i++) {
      ids.push(conn.sendRequest('wait', { wait: `w${i}`, domain: 'jobs', pid: 'p', names: ['done'], afterId: 'first' }), conn.sendRequest('cancelWait', { wait: `w${i}` }));
    }
    for (const id of ids.splice(0)) expect(await conn.answer(id)).toMatchObject({ type: 'result' });
    expect(h.gateway.dispatcher.stats).toMatchObject({ consumers: 0, waits: 0 });

    // A refused registration does not hold up the removal behind it.
    ids.push(conn.sendRequest('wait', { wait: 'w', domain: 'jobs', pid: 'p', names: ['done'], afterId: 'missing' }), conn.sendRequest('cancelWait', { wait: 'w' }));
    expect(await conn.answer(ids[0]!)).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_EVENT_NOT_FOUND' });
    expect(await conn.answer(ids[1]!)).toMatchObject({ type: 'result' });

    // The whole limit is free, and an event goes to a consumer that is registered.
    for (let i = 0; i < 3; i++) expect(await conn.request('consume', { consumer: `n${i}`, domain: 'jobs', name: 'later' })).toMatchObject({ type: 'result' });
    expect(await conn.request('publish', { event: { domain: 'jobs', name: 'run', pid: 'p', data: {} } })).toMatchObject({ type: 'result' });
    expect(await conn.request('publish', { event: { domain: 'jobs', name: 'later', pid: 'p', data: {} } })).toMatchObject({ type: 'result' });
    expect(await conn.next((frame) => frame.type === 'delivery')).toMatchObject({ consumer: expect.stringMatching(/^n/), event: { name: 'later' } });
    expect(conn.frames.filter((frame) => frame.type === 'delivery' && frame.consumer !== undefined && /^c/.test(String(frame.consumer)))).toEqual([]);
  });

  it('unsubscribe and unsubscribePattern pipelined behind subscribe (also its "last N") and subscribePattern take effect: nothing stays subscribed, sent or counted', async () => {
    // A React component mounted and unmounted at once (StrictMode mounts twice) sends just this.
    // Six registrations are in flight at once below (each counts until its request is done).
    h = await startHarness({ EVENTFLOW_MAX_SUBSCRIPTIONS: 6, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const conn = await connect(h.gateway.url, { client: 'registration-test' });
    sockets.push(conn.ws);
    for (let i = 0; i < 3; i++) expect(await conn.request('publish', { event: { domain: 'feed', name: `s${i}`, pid: 'p', data: {} } })).toMatchObject({ type: 'result' });
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(conn.sendRequest('subscribe', { domain: 'feed', name: `s${i}`, ...(i === 0 ? {} : { last: i }) }), conn.sendRequest('unsubscribe', { domain: 'feed', name: `s${i}` }));
      ids.push(conn.sendRequest('subscribePattern', { subscription: `p${i}`, pattern: 'feed', names: [`s${i}`] }), conn.sendRequest('unsubscribePattern', { subscription: `p${i}` }));
    }
    for (const id of ids.splice(0)) expect(await conn.answer(id)).toMatchObject({ type: 'result' });
    expect(h.gateway.dispatcher.stats).toMatchObject({ subscriptions: 0 });

    // The whole limit is free, and only what is subscribed is sent.
    for (let i = 0; i < 6; i++) expect(await conn.request('subscribe', { domain: 'feed', name: `later${i}` })).toMatchObject({ type: 'result' });
    for (let i = 0; i < 3; i++) expect(await conn.request('publish', { event: { domain: 'feed', name: `s${i}`, pid: 'p', data: {} } })).toMatchObject({ type: 'result' });
    expect(await conn.request('publish', { event: { domain: 'feed', name: 'later0', pid: 'p', data: {} } })).toMatchObject({ type: 'result' });
    expect(await conn.next((frame) => frame.type === 'event')).toMatchObject({ event: { name: 'later0' } });
    expect(conn.frames.filter((frame) => frame.type === 'event' && /^s/.test(String((frame.event as { name?: string } | undefined)?.name)))).toEqual([]);
  });
});
