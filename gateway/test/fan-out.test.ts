/**
 * Fan-out: one event to many connections is encoded once and sent to each (session.ts
 * encodeEvent); what each connection receives must still be exactly its own frame: the names it
 * subscribed to, the full event, once, in order, also while one of its subscriptions replays.
 * Over `ws` the frame is also framed once and the same bytes written to every socket
 * (server/shared-frame.ts): the sizes where the WebSocket header changes are checked here.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Conn, type Frame } from '@eventflow/test-support/raw-socket';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
const conns: Conn[] = [];

afterEach(async () => {
  for (const conn of conns.splice(0)) conn.ws.terminate();
  await h?.stop();
  h = undefined;
});

async function open(): Promise<Conn> {
  const conn = await connect((h as Harness).gateway.url);
  conns.push(conn);
  return conn;
}

async function subscribe(conn: Conn, domain: string, name: string, after?: number): Promise<number> {
  const answer = await conn.request('subscribe', { domain, name, ...(after === undefined ? {} : { after }) });
  expect(answer.type).toBe('result');
  return (answer.result as { head: number }).head;
}

async function publish(conn: Conn, name: string, seq: number): Promise<number> {
  const answer = await conn.request('publish', { event: { domain: 'fan', name, pid: `p${seq}`, data: { seq, text: 'é'.repeat(20) } } });
  expect(answer.type).toBe('result');
  return (answer.result as { position: number }).position;
}

const events = (conn: Conn): Frame[] => conn.frames.filter((frame) => frame.type === 'event');
const seqOf = (frame: Frame): number => (frame.event as { data: { seq: number } }).data.seq;
const nameOf = (frame: Frame): string | undefined => (frame.names as string[] | undefined)?.[0];

describe('fan-out', () => {
  it('gives every subscriber its own names and the whole event, once', async () => {
    h = await startHarness();
    const exact = await Promise.all(Array.from({ length: 12 }, open));
    const star = await open();
    const both = await open();
    const other = await open();
    for (const conn of exact) await subscribe(conn, 'fan', 'made');
    await subscribe(star, 'fan', '*');
    await subscribe(both, 'fan', 'made');
    await subscribe(both, 'fan', '*');
    await subscribe(other, 'fan', 'other');
    const publisher = await open();

    const positions = [];
    for (let seq = 0; seq < 5; seq++) positions.push(await publish(publisher, 'made', seq));
    await both.next((frame) => frame.type === 'event' && seqOf(frame) === 4);
    await star.next((frame) => frame.type === 'event' && seqOf(frame) === 4);
    for (const conn of exact) await conn.next((frame) => frame.type === 'event' && seqOf(frame) === 4);

    for (const conn of exact) {
      expect(events(conn).map((frame) => frame.names)).toEqual(Array(5).fill(['made']));
      expect(events(conn).map((frame) => (frame.event as { position: number }).position)).toEqual(positions);
      expect(events(conn).map((frame) => frame.event)).toEqual(events(exact[0] as Conn).map((frame) => frame.event));
    }
    expect(events(star).map((frame) => frame.names)).toEqual(Array(5).fill(['*']));
    // One frame naming both, not two frames.
    expect(events(both).map((frame) => frame.names)).toEqual(Array(5).fill(['made', '*']));
    expect(events(both)[2]?.event).toMatchObject({ domain: 'fan', name: 'made', pid: 'p2', data: { seq: 2, text: 'é'.repeat(20) }, position: positions[2] });
    expect(events(other)).toEqual([]);
  });

  it('keeps live events of other subscriptions flowing while one subscription of the connection replays', async () => {
    h = await startHarness();
    const publisher = await open();
    const subscriber = await open();
    await subscribe(subscriber, 'fan', 'live');
    for (let seq = 0; seq < 600; seq++) await publish(publisher, 'old', seq);

    // The replay of 600 events (two pages) runs while both names keep being published.
    const replay = subscribe(subscriber, 'fan', 'old', 0);
    const more = (async () => {
      for (let seq = 600; seq < 630; seq++) {
        await publish(publisher, 'old', seq);
        await publish(publisher, 'live', seq);
      }
    })();
    await Promise.all([replay, more]);
    await subscriber.next((frame) => frame.type === 'event' && nameOf(frame) === 'old' && seqOf(frame) === 629, 10_000);
    await subscriber.next((frame) => frame.type === 'event' && nameOf(frame) === 'live' && seqOf(frame) === 629, 10_000);

    const old = events(subscriber).filter((frame) => nameOf(frame) === 'old');
    expect(old.map(seqOf)).toEqual(Array.from({ length: 630 }, (_, i) => i));
    const live = events(subscriber).filter((frame) => nameOf(frame) === 'live');
    expect(live.map(seqOf)).toEqual(Array.from({ length: 30 }, (_, i) => 600 + i));
  });

  it('replays a backlog larger than EVENTFLOW_MAX_BUFFERED_BYTES at the pace of the client instead of cutting it off', async () => {
    h = await startHarness({ EVENTFLOW_MAX_BUFFERED_BYTES: 64 * 1024 });
    const publisher = await open();
    const big = 'x'.repeat(4096);
    const count = 1000; // ≈ 4 MB of frames: more than the kernel's socket buffers take while the client reads nothing
    for (let first = 0; first < count; first += 200) {
      const ids = Array.from({ length: 200 }, (_, i) => publisher.sendRequest('publish', { event: { domain: 'fan', name: 'big', pid: 'p', data: { seq: first + i, big } } }));
      for (const id of ids) expect((await publisher.answer(id)).type).toBe('result');
    }
    const subscriber = await open();
    const received: number[] = [];
    subscriber.ws.on('message', (data) => {
      const frame = JSON.parse(data.toString()) as Frame;
      if (frame.type === 'event') received.push(seqOf(frame));
    });
    const answer = subscriber.answer(subscriber.sendRequest('subscribe', { domain: 'fan', name: 'big', after: 0 }));
    // The client stops reading while the replay starts, then takes everything.
    const socket = (subscriber.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    socket.pause();
    // Time is the condition: the replay fills the socket's buffers while nothing is read.
    await new Promise((resolve) => setTimeout(resolve, 500));
    socket.resume();
    expect((await answer).type).toBe('result');
    await subscriber.next((frame) => frame.type === 'event' && seqOf(frame) === count - 1, 10_000);
    expect(received).toEqual(Array.from({ length: count }, (_, i) => i));
    await subscriber.ping();
  });

  it('frames every size of event frame once for all, intact, in order with each connection\'s own answers', async () => {
    h = await startHarness();
    const subscribers = await Promise.all(Array.from({ length: 3 }, open));
    for (const conn of subscribers) await subscribe(conn, 'fan', 'sized');
    const publisher = subscribers[0] as Conn;
    const sized = (seq: number, text: string) => ({ domain: 'fan', name: 'sized', pid: 'p', data: { seq, text } });
    // Positions of two digits throughout, so that one more character is one more byte of frame.
    for (let seq = 0; seq < 10; seq++) await publisher.request('publish', { event: sized(seq, '') });
    const [probe] = await Promise.all([subscribers[1] as Conn].map((conn) => conn.next((frame) => frame.type === 'event' && seqOf(frame) === 9)));
    const base = Buffer.byteLength(JSON.stringify(probe)) + 1; // +1: the seq has 2 digits from now on
    // Every event frame is longer than 125 bytes: around the switch from the 16-bit length to the
    // 64-bit one, with 2-byte characters mixed in, and one long frame of 3-byte characters.
    const texts = ['short'];
    for (let over = -3; over <= 3; over++) texts.push('é'.repeat(40) + 'x'.repeat(65_535 + over - base - 80));
    texts.push('€'.repeat(100_000));
    const seqs = texts.map((_, i) => 10 + i);
    // The publisher's answers and its own events share its socket: each answer must still be one frame, in order.
    const answers = await Promise.all(texts.map((text, i) => publisher.request('publish', { event: sized(seqs[i] as number, text) })));
    expect(answers.every((answer) => answer.type === 'result')).toBe(true);
    const last = seqs[seqs.length - 1] as number;
    for (const conn of subscribers) await conn.next((frame) => frame.type === 'event' && seqOf(frame) === last, 10_000);
    const lengths = new Set<number>();
    for (const conn of subscribers) {
      const got = events(conn).filter((frame) => seqOf(frame) >= 10);
      expect(got.map(seqOf)).toEqual(seqs);
      expect(got.map((frame) => (frame.event as { data: { text: string } }).data.text)).toEqual(texts);
      for (const frame of got) lengths.add(Buffer.byteLength(JSON.stringify(frame)));
    }
    for (const boundary of [65_535, 65_536]) expect(lengths.has(boundary), `a frame of ${boundary} bytes`).toBe(true);
    await Promise.all(subscribers.map((conn) => conn.ping()));
  });

  it('still cuts off a subscriber that stops reading live events, and only that one', async () => {
    h = await startHarness({ EVENTFLOW_MAX_BUFFERED_BYTES: 64 * 1024, EVENTFLOW_MAX_RECEIVE_RATE: 0, EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    const slow = await open();
    const fast = await open();
    await subscribe(slow, 'fan', 'live');
    await subscribe(fast, 'fan', 'live');
    const publisher = await open();
    (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const big = 'x'.repeat(16 * 1024);
    const count = 600; // ≈ 10 MB: more than the kernel's socket buffers and the 64 kB allowance take
    // One at a time: a reading client never holds more than one event unsent, however corked the tick.
    for (let seq = 0; seq < count; seq++) {
      const answer = await publisher.request('publish', { event: { domain: 'fan', name: 'live', pid: 'p', data: { seq, big } } });
      expect(answer.type).toBe('result');
    }
    await fast.next((frame) => frame.type === 'event' && seqOf(frame) === count - 1, 20_000);
    expect(events(fast).map(seqOf)).toEqual(Array.from({ length: count }, (_, i) => i));
    // The gateway closed it (4008) and, as it read nothing, dropped the socket after the close grace.
    (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    const closed = await slow.closed;
    expect([4008, 1006]).toContain(closed.code);
    expect(events(slow).length).toBeLessThan(count);
  }, 60_000);
});
