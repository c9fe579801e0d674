/**
 * Reads whose answer the protocol does not bound (a whole eventlog, every pid of a domain, …) are
 * a client's cheapest way to make the gateway work and hold memory: a frame of ~100 bytes asks for
 * every event of a process. Sent together, up to EVENTFLOW_MAX_IN_FLIGHT of them were each read
 * from the store in the turn their frame arrived (SQLite reads synchronously), every result held
 * at once, before the first answer could show that the client takes nothing: 100 such requests
 * over a process of 20,000 events of 2 kB ran the gateway out of heap (4 GB) in 90 s, serving
 * no one meanwhile. Each now waits for a read turn (read-turns.ts), and at its turn a client that
 * has not taken what was sent to it is cut off (4008) instead of being read for.
 *
 * The client that takes nothing is a transport whose unsent bytes grow with every frame (the
 * fault), attached with gateway.accept; the store, the gateway and the other client are real.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { metric } from '@eventflow/test-support/gateway-http';
import { eventually } from '@eventflow/test-support/wait';
import { connect } from '@eventflow/test-support/raw-socket';
import { StallingTransport } from './stalling-transport.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** A reader that never reads: everything sent stays buffered. */
class NeverReading extends StallingTransport {
  override send(frame: string): void {
    super.send(frame);
    this.bufferedAmount += frame.length;
  }
}

const MAX_BUFFERED = 64 * 1024;
const REQUESTS = 50;

async function bigProcess(h: Harness): Promise<void> {
  const client = h.client();
  const pad = 'x'.repeat(1_000);
  // ~110 kB as one answer: more than the connection's send limit.
  await Promise.all(Array.from({ length: 100 }, (_, n) => client.publish({ domain: 'big', name: 'n', pid: 'p1', data: { n, pad } })));
  await client.publish({ domain: 'big', name: 'n', pid: 'small', data: {} });
  await client.close();
}

const reads = (h: Harness): Promise<number> => metric(h.gateway, 'eventflow_store_operation_seconds_count{operation="readEventlog"}');

describe('reads without a bound on their answer', () => {
  it('a client that takes nothing gets one answer read for it, then is cut off (4008), however many it asks for', async () => {
    h = await startHarness({ EVENTFLOW_MAX_BUFFERED_BYTES: MAX_BUFFERED, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    await bigProcess(h);
    const stalled = new NeverReading();
    h.gateway.accept(stalled);
    stalled.deliver({ type: 'hello', protocol: 1, client: 'never-reads' });
    await eventually(() => stalled.frames.some((frame) => frame.type === 'welcome'), 10_000, 'welcome');
    const before = await reads(h);

    for (let id = 1; id <= REQUESTS; id++) stalled.deliver({ type: 'request', id, op: 'readEventlog', params: { domain: 'big', pid: 'p1' } });
    await eventually(() => stalled.closed === 4008, 10_000, 'the slow client cut off');

    // Fence: turns go round-robin over connections, so once another client has had more turns
    // than the stalled one had requests, every request of the stalled one has had its turn.
    const other = await connect(h.gateway.url);
    for (let n = 0; n < REQUESTS + 2; n++) {
      const answer = await other.request('readEventlog', { domain: 'big', pid: 'small' });
      expect(answer.type).toBe('result');
    }
    expect((await reads(h)) - before - (REQUESTS + 2)).toBeLessThanOrEqual(2);
    expect(stalled.frames.filter((frame) => frame.type === 'result')).toHaveLength(1);
    other.ws.close();
  }, 60_000);

  it('another client is answered between the reads of one that asks for many', async () => {
    h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    await bigProcess(h);
    const greedy = new StallingTransport();
    h.gateway.accept(greedy);
    greedy.deliver({ type: 'hello', protocol: 1, client: 'greedy' });
    await eventually(() => greedy.frames.some((frame) => frame.type === 'welcome'), 10_000, 'welcome');
    const other = await connect(h.gateway.url);

    const ping = other.sendRequest('ping', {});
    for (let id = 1; id <= REQUESTS; id++) greedy.deliver({ type: 'request', id, op: 'readEventlog', params: { domain: 'big', pid: 'p1' } });
    expect((await other.answer(ping)).type).toBe('result');
    const answeredBefore = greedy.frames.filter((frame) => frame.type === 'result').length;
    expect(answeredBefore).toBeLessThan(REQUESTS / 2);

    await eventually(() => greedy.frames.filter((frame) => frame.type === 'result').length === REQUESTS, 30_000, 'every read answered');
    expect(greedy.closed).toBeUndefined();
    other.ws.close();
  }, 60_000);

  it('a wait from a position (or an id) looks for its outcome in turn too: another client is answered between the waits of one that makes many', async () => {
    h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    await bigProcess(h);
    const greedy = new StallingTransport();
    h.gateway.accept(greedy);
    greedy.deliver({ type: 'hello', protocol: 1, client: 'greedy' });
    await eventually(() => greedy.frames.some((frame) => frame.type === 'welcome'), 10_000, 'welcome');
    const other = await connect(h.gateway.url);

    // One handle again and again (each replaces the last: one wait against the limit), each reading the whole process for an outcome it lacks.
    const ping = other.sendRequest('ping', {});
    for (let id = 1; id <= REQUESTS; id++) greedy.deliver({ type: 'request', id, op: 'wait', params: { wait: 'w', domain: 'big', pid: 'p1', names: ['done'], afterPosition: 0 } });
    expect((await other.answer(ping)).type).toBe('result');
    expect(greedy.frames.filter((frame) => frame.type === 'result').length).toBeLessThan(REQUESTS / 2);
    await eventually(() => greedy.frames.filter((frame) => frame.type === 'result').length === REQUESTS, 30_000, 'every wait answered');

    // Still a wait: the outcome, once published, reaches it.
    const publisher = h.client();
    await publisher.publish({ domain: 'big', name: 'done', pid: 'p1', data: {} });
    await eventually(() => greedy.frames.some((frame) => frame.type === 'waited'), 10_000, 'the outcome');
    expect(h.gateway.dispatcher.stats.waits).toBe(0);
    other.ws.close();
  }, 60_000);

  it('listDomains counts the store once for many askers when counting is slow, and exactly when it is fast', async () => {
    h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    await bigProcess(h);
    const asker = await connect(h.gateway.url);
    const { catalog } = h.gateway.store;
    const count = catalog.domains.bind(catalog);
    let counted = 0;
    catalog.domains = () => {
      counted++;
      return count();
    };
    // Fast: every ask counts, and sees what was just stored.
    await h.client().publish({ domain: 'fresh', name: 'n', pid: 'p', data: {} });
    const fast = await asker.request('listDomains', {});
    expect((fast.result as { domains: Array<{ domain: string }> }).domains.map(({ domain }) => domain)).toContain('fresh');
    await asker.request('listDomains', {});
    expect(counted).toBe(2);

    // Slow, as on a store of millions of events (the fault: a synchronous count holding the event loop 100 ms).
    counted = 0;
    catalog.domains = () => {
      counted++;
      const until = performance.now() + 100;
      while (performance.now() < until);
      return count();
    };
    const asks = Array.from({ length: 30 }, () => asker.sendRequest('listDomains', {}));
    const answers = await Promise.all(asks.map((id) => asker.answer(id)));
    expect(answers.every((answer) => answer.type === 'result' && JSON.stringify(answer.result) === JSON.stringify(answers[0]?.result))).toBe(true);
    expect(counted).toBe(1);
    asker.ws.close();
  }, 60_000);

  it("a subscription's \"last N\" is read in turn too: another client is answered between the subscriptions of one that makes many", async () => {
    h = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    await bigProcess(h);
    const greedy = new StallingTransport();
    h.gateway.accept(greedy);
    greedy.deliver({ type: 'hello', protocol: 1, client: 'greedy' });
    await eventually(() => greedy.frames.some((frame) => frame.type === 'welcome'), 10_000, 'welcome');
    const other = await connect(h.gateway.url);

    // The same subscription again and again: it counts once against EVENTFLOW_MAX_SUBSCRIPTIONS, and each finds its start anew.
    const ping = other.sendRequest('ping', {});
    for (let id = 1; id <= REQUESTS; id++) greedy.deliver({ type: 'request', id, op: 'subscribe', params: { domain: 'big', name: 'n', last: 10_000 } });
    expect((await other.answer(ping)).type).toBe('result');
    expect(greedy.frames.filter((frame) => frame.type === 'result').length).toBeLessThan(REQUESTS / 2);

    await eventually(() => greedy.frames.filter((frame) => frame.type === 'result').length === REQUESTS, 30_000, 'every subscribe answered');
    expect(greedy.frames.filter((frame) => frame.type === 'result').every((frame) => (frame as { result?: { after?: number } }).result?.after === 0)).toBe(true);
    other.ws.close();
  }, 60_000);
});
