/** The small single-purpose pieces of the client, tested on their own. */
import { describe, expect, it, vi } from 'vitest';
import { backoffDelay } from '../src/backoff.js';
import { createAsyncQueue } from '../src/async-queue.js';
import { generateEventId, generatePid } from '../src/ids.js';
import { connectionLost, RequestManager } from '../src/requests.js';
import { SubscriptionRegistry } from '../src/subscriptions.js';
import { createMemoryPair } from '../src/transport.js';
import { identifier } from '../src/protocol.js';
import { assertEventInput } from '../src/validate.js';

describe('backoffDelay', () => {
  it('grows exponentially up to the cap, with full jitter between min and the cap', () => {
    const options = { minDelay: 100, maxDelay: 1_000, factor: 2 };
    expect(backoffDelay(0, options, () => 1)).toBe(100);
    expect(backoffDelay(3, options, () => 1)).toBe(800);
    expect(backoffDelay(10, options, () => 1)).toBe(1_000);
    expect(backoffDelay(10, options, () => 0)).toBe(100);
    for (let i = 0; i < 100; i++) {
      const delay = backoffDelay(5, options);
      expect(delay).toBeGreaterThanOrEqual(100);
      expect(delay).toBeLessThanOrEqual(1_000);
    }
  });
});

describe('SubscriptionRegistry', () => {
  it('keeps keys independent: removing one listener touches nothing else', () => {
    const registry = new SubscriptionRegistry<() => void>();
    const [a, b, c] = [vi.fn(), vi.fn(), vi.fn()];
    registry.add('d', 'x', a);
    registry.add('d', 'x', b);
    registry.add('d', 'y', c);
    expect(registry.remove('d', 'x', a)).toBeDefined();
    expect([...(registry.get('d', 'x')?.listeners.keys() ?? [])]).toEqual([b]);
    expect([...(registry.get('d', 'y')?.listeners.keys() ?? [])]).toEqual([c]);
    expect(registry.remove('d', 'x', a)).toBeUndefined();
    registry.remove('d', 'x', b);
    expect(registry.get('d', 'x')).toBeUndefined();
    expect([...registry.keys()].map((key) => key.name)).toEqual(['y']);
  });

  it('accepts domains that collide with object members (v4 §8.14)', () => {
    const registry = new SubscriptionRegistry<() => void>();
    for (const domain of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) registry.add(domain, 'newListener', () => undefined);
    expect([...registry.keys()]).toHaveLength(4);
  });
});

describe('createAsyncQueue', () => {
  it('yields pushed values in order, ends on return(), drops the oldest past its limit', async () => {
    const onEnd = vi.fn();
    const queue = createAsyncQueue<number>(onEnd, 2);
    queue.push(1);
    queue.push(2);
    queue.push(3);
    expect((await queue.next()).value).toBe(2);
    expect((await queue.next()).value).toBe(3);
    const pending = queue.next();
    queue.push(4);
    expect((await pending).value).toBe(4);
    await queue.return();
    expect(onEnd).toHaveBeenCalledOnce();
    expect((await queue.next()).done).toBe(true);
  });

  it('fail() rejects the waiting reader', async () => {
    const queue = createAsyncQueue<number>(() => undefined);
    const pending = queue.next();
    queue.fail(new Error('closed'));
    await expect(pending).rejects.toThrow('closed');
  });
});

describe('ids', () => {
  it('event ids are v4-shaped, valid identifiers and distinct', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => generateEventId()));
    expect(ids.size).toBe(10_000);
    for (const id of [...ids].slice(0, 100)) {
      expect(id).toMatch(/^[0-9a-z]+-[0-9a-z]+$/);
      expect(identifier.safeParse(id).success).toBe(true);
    }
  });

  it('an event id is its time and two random 32-bit words in base 36, each word 7 digits', () => {
    const words = [0, 2 ** 32 - 1, 35, 36, 1_234_567_890, 2 ** 31, 7, 2 ** 32 - 36];
    const spy = vi.spyOn(crypto, 'getRandomValues').mockImplementation(<T extends ArrayBufferView | null>(array: T): T => {
      const pool = array as unknown as Uint32Array;
      pool.fill(1);
      pool.set(words);
      return array;
    });
    try {
      // Uses up what the pool held before the mock; the id that refills it takes its first two words.
      const times = [1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_001, 0];
      let first = generateEventId(times[0]);
      while (spy.mock.calls.length === 0) first = generateEventId(times[0]);
      const ids = [first, ...times.slice(1).map((time) => generateEventId(time))];
      const base36 = (n: number): string => n.toString(36).padStart(7, '0');
      expect(ids).toEqual(times.map((time, i) => `${time.toString(36)}-${base36(words[2 * i]!)}${base36(words[2 * i + 1]!)}`));
    } finally {
      spy.mockRestore();
    }
  });

  it('pids are lower-case <characteristic>-<name>-<base36 time>', () => {
    expect(generatePid(0)).toMatch(/^[a-z]+-[a-z]+-0$/);
  });
});

describe('RequestManager', () => {
  it('times out with E_EVENTFLOW_REQUEST_TIMEOUT and aborts with E_EVENTFLOW_ABORTED', async () => {
    const sent: string[] = [];
    const requests = new RequestManager((frame) => (sent.push(frame), true), 50);
    requests.open();
    await expect(requests.request('ping', {})).rejects.toMatchObject({ code: 'E_EVENTFLOW_REQUEST_TIMEOUT' });
    const controller = new AbortController();
    const pending = requests.request('ping', {}, { signal: controller.signal, timeout: 10_000 });
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: 'E_EVENTFLOW_ABORTED' });
    // Both are forgotten: a new connection sends neither again.
    requests.lost();
    requests.open();
    expect(sent).toHaveLength(2);
  });

  it('on a lost connection resends resendable requests and fails the others with connectionLost', async () => {
    const sent: string[] = [];
    let open = true;
    const requests = new RequestManager((frame) => (open ? (sent.push(frame), true) : false), 5_000);
    requests.open();
    const resendable = requests.request('ping', {});
    const once = requests.request('ping', {}, {}, false);
    open = false;
    requests.lost();
    await expect(once).rejects.toBe(connectionLost);
    open = true;
    requests.open();
    expect(sent).toHaveLength(3);
    const id = JSON.parse(sent[2] ?? '{}').id as number;
    requests.settle({ type: 'result', id, result: {} });
    await expect(resendable).resolves.toEqual({});
  });

  it('turns error frames into EventflowErrors with the same code', async () => {
    const requests = new RequestManager(() => true, 5_000);
    const pending = requests.request('read', { id: 'x' });
    requests.settle({ type: 'error', id: 1, code: 'E_EVENTFLOW_EVENT_NOT_FOUND', message: 'no event has id "x"' });
    await expect(pending).rejects.toMatchObject({ code: 'E_EVENTFLOW_EVENT_NOT_FOUND', message: 'no event has id "x"' });
  });
});

describe('createMemoryPair', () => {
  it('delivers frames both ways asynchronously, buffers until listen, and propagates close', async () => {
    const [a, b] = createMemoryPair();
    a.send('early');
    const received: string[] = [];
    const closed = new Promise<number>((resolve) => b.listen({ message: (frame) => received.push(frame), close: (code) => resolve(code) }));
    a.listen({ message: () => undefined, close: () => undefined });
    a.send('late');
    await Promise.resolve();
    await Promise.resolve();
    expect(received).toEqual(['early', 'late']);
    a.close(4001, 'bye');
    expect(await closed).toBe(4001);
  });
});

describe('forbiddenKeyPath', () => {
  it('finds a __proto__ key 50,000 levels deep in linear time, with its path', async () => {
    const { forbiddenKeyPath } = await import('../src/data-keys.js');
    const depth = 50_000;
    const text = '{"a":['.repeat(depth) + '{"__proto__":1}' + ']}'.repeat(depth);
    const value = JSON.parse(text) as unknown;
    const started = performance.now();
    const path = forbiddenKeyPath(value);
    // Linear: a few ms; a path copied per level (quadratic) took seconds.
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(path).toHaveLength(2 * depth + 1);
    expect(path?.slice(0, 4)).toEqual(['a', 0, 'a', 0]);
    expect(path?.at(-1)).toBe('__proto__');
    expect(forbiddenKeyPath(JSON.parse('{"a":['.repeat(depth) + '{"constructor":1}' + ']}'.repeat(depth)))).toBeUndefined();
  });
});

describe('client-side validation agrees with the zod schemas', () => {
  it('identifierProblem accepts and refuses exactly what `identifier` does, with the same message', async () => {
    const { identifierProblem } = await import('../src/validate.js');
    const samples: unknown[] = ['a', 'a b', ' a', 'a ', '', 'x'.repeat(64), 'x'.repeat(65), 'ordér', '😀', 'a\u001eb', 'a\u001fb', 'line\nbreak', '\u007f', '~!@#$%^&*()', 42, null, undefined, {}, ['a']];
    let seed = 7;
    const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 2_000; i++) samples.push(String.fromCharCode(...Array.from({ length: Math.floor(random() * 70) }, () => Math.floor(random() * 140))));
    for (const value of samples) {
      const parsed = identifier.safeParse(value);
      const problem = identifierProblem(value);
      expect(problem === undefined, JSON.stringify(value)).toBe(parsed.success);
      if (!parsed.success) expect(parsed.error.issues.map((issue) => issue.message)).toContain(problem);
    }
  });

  it('assertEventInput refuses what eventInput refuses', async () => {
    const { eventInput } = await import('../src/protocol.js');
    const base = { domain: 'd', name: 'n', pid: 'p' };
    const cases: unknown[] = [base, { ...base, id: 'i', rid: 'r', data: { a: [1, { b: null }] } }, { ...base, data: [] }, { ...base, data: 'x' }, { ...base, data: null }, { ...base, extra: 1 }, { ...base, domain: '' }, { domain: 'd', name: 'n' }, null, 'event', { ...base, id: 'x'.repeat(65) }];
    // Keys like prototype machinery: own "__proto__" keys (as JSON.parse makes them) anywhere are refused, the rest is plain data.
    for (const data of ['{"__proto__":{}}', '{"a":{"__proto__":1}}', '{"a":[0,{"b":{"__proto__":null}}]}', '{"constructor":{"prototype":1},"prototype":{},"toString":1}', '{"a":[{"constructor":2}]}']) {
      cases.push({ ...base, data: JSON.parse(data) as unknown });
    }
    for (const value of cases) {
      let accepted = true;
      try {
        assertEventInput(value);
      } catch {
        accepted = false;
      }
      expect(accepted, JSON.stringify(value)).toBe(eventInput.safeParse(value).success);
    }
  });
});

describe('createConnection', () => {
  it('reports frames that are not JSON objects with a string type, and passes every other frame on', async () => {
    const { createConnection } = await import('../src/connection.js');
    const [client, gateway] = createMemoryPair();
    const errors: unknown[] = [];
    const frames: unknown[] = [];
    const opened = new Promise<void>((resolve) => {
      gateway.listen({
        message: () => {
          gateway.send(JSON.stringify({ type: 'welcome', protocol: 1, limits: {} }));
          for (const frame of ['not json', 'null', '{"type":1}', '{"type":"fromTheFuture","x":1}']) gateway.send(frame);
          gateway.send(JSON.stringify({ type: 'result', id: 1, result: {} }));
        },
        close: () => undefined,
      });
      const connection = createConnection(async () => client, { heartbeatInterval: 0 }, {
        open: () => undefined,
        frame: (frame) => {
          frames.push(frame);
          if (frames.length === 2) resolve(connection.close());
        },
        lost: () => undefined,
        error: (error) => errors.push(error),
        blocked: () => undefined,
        ping: async () => undefined,
      });
    });
    await opened;
    expect(errors.map((error) => (error as { code?: string }).code)).toEqual(['E_EVENTFLOW_INVALID_FRAME', 'E_EVENTFLOW_INVALID_FRAME', 'E_EVENTFLOW_INVALID_FRAME']);
    expect(frames).toEqual([{ type: 'fromTheFuture', x: 1 }, { type: 'result', id: 1, result: {} }]);
  });
});
