/**
 * Arguments of the wrong type fail at the call with E_EVENTFLOW_INVALID_INPUT naming the argument,
 * also while offline (the client here never connects), instead of resolving and failing later.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { consuming, createClient, EventflowClient, retry, retryOnConflict, iterating, v4Reads, waiting, type Connector } from '../src/index.js';
import { DATA_MAX_DEPTH } from '../src/json-check.js';
import { eventInput } from '../src/protocol.js';
import { assertEventInput } from '../src/validate.js';

/** Offline: every connection attempt waits forever. */
const offline: Connector = () => new Promise(() => undefined);
const clients: EventflowClient[] = [];
const client = (): EventflowClient => {
  const created = new EventflowClient(offline, { features: [consuming, waiting, v4Reads, iterating], onError: () => undefined });
  clients.push(created);
  return created;
};
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
});

const invalid = (field: string) => expect.objectContaining({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining(field) });
/** `run` rejects (a promise-returning method never throws synchronously) with a coded input error naming `field`. */
const refuses = (run: () => unknown, field: string): Promise<void> => refusesWith(run, invalid(field));

// The wrong types a caller may pass; `as never` stands for what an untyped (JS) caller can do.
const bad = 'nope' as never;

describe('listeners and handlers must be functions', () => {
  it('subscribe, unsubscribe, consume and removeConsumer refuse a non-function at the call', async () => {
    const c = client();
    await refuses(() => c.subscribe('d', 'n', bad), 'listener: must be a function, got "nope"');
    await refuses(() => c.subscribe('d', 'n', undefined as never), 'listener: must be a function, got undefined');
    await refuses(() => c.unsubscribe('d', 'n', bad), 'listener');
    await refuses(() => c.consume('d', 'n', bad), 'handler: must be a function, got "nope"');
    await refuses(() => c.consume('d', 'n', null as never), 'handler: must be a function, got null');
    await refuses(() => c.removeConsumer('d', 'n', bad), 'handler');
  });

  it('onStateChange, onDeleted and events throw at once (they return synchronously)', () => {
    const c = client();
    expect(() => c.onStateChange(bad)).toThrow(invalid('listener'));
    expect(() => c.onDeleted(bad)).toThrow(invalid('listener'));
    expect(() => c.events('d', 'n', { bufferSize: 0 })).toThrow(invalid('options.bufferSize'));
    expect(() => c.events('', 'n')).toThrow(invalid('domain'));
    expect(() => c.events('d', 'n', { signal: 'x' as never })).toThrow(invalid('options.signal: must be an AbortSignal'));
  });
});

describe('options, signals, durations and ids are checked at the call', () => {
  it("consume's options: concurrency, ordered and retry are checked at the call, each message saying what was wrong", async () => {
    const c = client();
    const handler = () => undefined;
    await refuses(() => c.consume('d', 'n', handler, { concurrency: 0 }), 'options.concurrency must be an integer from 1 to 1000; got 0');
    await refuses(() => c.consume('d', 'n', handler, { concurrency: 1.5 }), 'got 1.5');
    await refuses(() => c.consume('d', 'n', handler, { concurrency: '5' as never }), 'got "5"');
    await refuses(() => c.consume('d', 'n', handler, { concurrency: null as never }), 'got null');
    await refuses(() => c.consume('d', 'n', handler, { ordered: 'yes' as never }), 'options.ordered must be a boolean');
    await refuses(() => c.consume('d', 'n', handler, { retry: { backoff: 'fixed' } as never }), 'options.retry.attempts must be an integer from 1 to 100; it is missing');
    await refuses(() => c.consume('d', 'n', handler, { retry: { attempts: 101 } }), 'options.retry.attempts must be an integer from 1 to 100; got 101');
    await refuses(() => c.consume('d', 'n', handler, { retry: { attempts: 3, backoff: 'linear' as never } }), "options.retry.backoff must be 'exponential' or 'fixed'");
    await refuses(() => c.consume('d', 'n', handler, { retry: { attempts: 3, delayMs: -1 } }), 'options.retry.delayMs must be an integer from 0 to 86400000; got -1');
    await refuses(() => c.consume('d', 'n', handler, { retry: { attempts: 3, delayMs: 10, maxDelayMs: 5 } }), 'options.retry.maxDelayMs (5) must not be below options.retry.delayMs (10)');
    await refuses(() => c.consume('d', 'n', handler, { retry: { attempts: 3, tries: 2 } as never }), 'options.retry: unrecognized key "tries"');
    await refuses(() => c.consume('d', 'n', handler, { priority: 1 } as never), 'options: unrecognized key "priority"');
  });

  it('subscribe/consume/wait/request/ready refuse a signal that is not an AbortSignal', async () => {
    const c = client();
    await refuses(() => c.subscribe('d', 'n', () => undefined, { signal: {} as never }), 'options.signal: must be an AbortSignal');
    await refuses(() => c.consume('d', 'n', () => undefined, { signal: 1 as never }), 'options.signal');
    await refuses(() => c.wait('d', 'p', 'done', 100, { signal: 'x' as never }), 'signal');
    await refuses(() => c.request({ domain: 'd', name: 'n', pid: 'p' }, { signal: {} as never }), 'signal');
    await refuses(() => c.ready('x' as never), 'signal');
  });

  it('timeouts, versions and positions must be numbers in range', async () => {
    const c = client();
    const event = { domain: 'd', name: 'n', pid: 'p' };
    await refuses(() => c.wait('d', 'p', 'done', Number.NaN), 'timeout: must be a number of ms from 0 to 2147483647, got NaN');
    await refuses(() => c.wait('d', 'p', 'done', '100' as never), 'timeout');
    await refuses(() => c.request(event, { timeout: -1 }), 'timeout');
    await refuses(() => c.publish(event, { expectedVersion: -1 }), 'options.expectedVersion: must be an integer ≥ 0, got -1');
    await refuses(() => c.persist(event, { expectedVersion: 1.5 }), 'options.expectedVersion');
    await refuses(() => c.publish(event, { timeout: 'soon' as never }), 'options.timeout');
    // A timer of 2³¹ ms or more fires at once: such a timeout would have failed the call at once.
    await refuses(() => c.request(event, { timeout: 2 ** 31 }), 'timeout: must be a number of ms from 0 to 2147483647, got 2147483648');
    await refuses(() => c.wait('d', 'p', 'done', 1e12), 'timeout');
    await refuses(() => c.publish(event, { timeout: 1e12 }), 'options.timeout');
    await refuses(() => c.close({ drainTimeout: 2 ** 40 }), 'options.drainTimeout');
    expect(() => new EventflowClient(offline, { requestTimeout: 2 ** 31 })).toThrow(invalid('options.requestTimeout'));
  });

  it('reads, deletes and associations check their ids before sending (a bad one would wait for a connection)', async () => {
    const c = client();
    await refuses(() => c.read(42 as never), 'id: must be a string');
    await refuses(() => c.delete(undefined as never), 'id');
    await refuses(() => c.deleteEventlog('d', '' as never), 'pid: must not be empty');
    await refuses(() => c.readEventlog({} as never, 'p'), 'domain');
    await refuses(() => c.readEventlogByChildProcess('d', 7 as never), 'cpid');
    await refuses(() => c.readEventlogByEid(null as never), 'eid');
    await refuses(() => c.readDistinctPidByDomain('x'.repeat(65)), 'domain: must be at most 64 characters');
    await refuses(() => c.readEventlogFilteredByNames('d', 'p', 'n' as never), 'names: must be a non-empty array');
    await refuses(() => c.readEventlogFilteredByNames('d', 'p', ['n', 3] as never), 'names.1');
    await refuses(() => c.persistEntityAssociation('e', 5 as never), 'eid');
    await refuses(() => c.call('read', { id: 5 as never }), 'id');
  });

  it('dates must be a Date, epoch ms or a string (new Date(null) would be 1970)', async () => {
    const c = client();
    const event = { domain: 'd', name: 'n', pid: 'p' };
    await expect(c.schedule(null as never, event)).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_DATE', message: expect.stringContaining('date') });
    await expect(c.readEventlogByTimestamp('d', 'p', true as never, 0)).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_DATE' });
  });

  it('the constructor, createClient and retry check what they are given', async () => {
    expect(() => createClient('nope')).toThrow(invalid('url: must be a ws:// or wss:// URL'));
    expect(() => createClient(8080 as never)).toThrow(invalid('url'));
    expect(() => createClient('ftp://x/')).toThrow(invalid('url'));
    expect(() => new EventflowClient(offline, { onError: 'log' as never })).toThrow(invalid('options.onError: must be a function'));
    expect(() => new EventflowClient(offline, { requestTimeout: -5 })).toThrow(invalid('options.requestTimeout'));
    expect(() => new EventflowClient(offline, { token: 5 as never })).toThrow(invalid('options.token'));
    expect(() => new EventflowClient('ws://x' as never)).toThrow(invalid('connect'));
    expect(() => new EventflowClient(offline, { features: consuming as never })).toThrow(invalid('options.features: must be an array of features'));
    expect(() => new EventflowClient(offline, { features: [{ name: 'consuming' }] as never })).toThrow(invalid('options.features'));
    await refuses(() => retryOnConflict(bad), 'attempt: must be a function');
    await refuses(() => retry(async () => 1, {} as never), 'options.shouldRetry');
  });
});

describe('event data must survive JSON unchanged', () => {
  const event = (data: unknown) => ({ domain: 'd', name: 'n', pid: 'p', data });
  class Price {
    amount = 3;
  }
  const circular: Record<string, unknown> = { a: 1 };
  circular['self'] = { back: circular };
  let deep: Record<string, unknown> = {};
  for (let i = 0; i < DATA_MAX_DEPTH + 5; i++) deep = { d: deep };

  const refused: Array<[string, unknown, string]> = [
    ['a BigInt (JSON.stringify throws a raw TypeError)', { items: [{}, {}, { price: 10n }] }, 'event.data.items[2].price: a bigint is not JSON'],
    ['a function (JSON drops it)', { total: 1, format: () => 'x' }, 'event.data.format: a function is not JSON'],
    ['a symbol', { tag: Symbol('t') }, 'event.data.tag: a symbol is not JSON'],
    ['NaN (JSON stores null)', { n: Number.NaN }, 'event.data.n: NaN is not JSON (it would be stored as null)'],
    ['Infinity', { n: [1, -Infinity] }, 'event.data.n[1]: -Infinity is not JSON'],
    ['undefined in an array (JSON stores null)', { list: [1, undefined] }, 'event.data.list[1]: undefined in an array is not JSON'],
    ['a hole in an array', { list: [1, , 3] }, 'event.data.list[1]'],
    ['a Date (JSON stores a string)', { at: new Date(0) }, 'event.data.at: a Date is not JSON; convert it'],
    ['a Map (JSON stores {})', { m: new Map([['a', 1]]) }, 'event.data.m: a Map is not JSON'],
    ['a class instance', { p: new Price() }, 'event.data.p: a Price is not JSON'],
    ['a circular reference', circular, 'event.data.self.back: a circular reference is not JSON'],
    ['over-deep nesting', deep, `nested deeper than ${DATA_MAX_DEPTH} levels`],
    ['symbol keys', { [Symbol('k')]: 1 }, 'event.data: symbol keys are not JSON'],
    ['a key that is not an identifier, named in brackets', { 'line items': [{ 'unit price': 1n }] }, 'event.data["line items"][0]["unit price"]'],
  ];

  it.each(refused)('refuses %s, naming the path', async (_, data, message) => {
    const c = client();
    for (const run of [() => c.publish(event(data) as never), () => c.persist(event(data) as never), () => c.schedule(0, event(data) as never), () => c.request(event(data) as never)]) {
      await refuses(run, message);
    }
  });

  it('what it accepts, JSON carries unchanged (undefined properties are dropped, as absent), and the gateway schema accepts', () => {
    const accepted: unknown[] = [{}, { a: 'x', b: 1.5, c: true, d: null, e: [1, [2, { f: [] }]] }, Object.assign(Object.create(null) as object, { a: 1 }), { shared: [circular['a'], circular['a']] }];
    const shared = { x: 1 };
    accepted.push({ one: shared, two: shared }); // shared, not circular: JSON copies it
    for (const data of accepted) {
      expect(() => assertEventInput(event(data)), JSON.stringify(data)).not.toThrow();
      expect(JSON.parse(JSON.stringify(data))).toEqual(data);
      expect(eventInput.safeParse(JSON.parse(JSON.stringify(event(data)))).success).toBe(true);
    }
    const withUndefined = { a: 1, b: undefined };
    expect(() => assertEventInput(event(withUndefined))).not.toThrow();
    expect(JSON.parse(JSON.stringify(withUndefined))).toEqual({ a: 1 });
  });

  it('an array with a `keys` property of its own is walked by its indexes (a raw TypeError before), its items still checked', async () => {
    const list = Object.assign([1, 2], { keys: 5 });
    expect(() => assertEventInput(event({ list }))).not.toThrow();
    const lying = Object.assign([1, 10n], { keys: () => [0][Symbol.iterator]() });
    await refuses(() => client().publish(event({ lying }) as never), 'event.data.lying[1]: a bigint is not JSON');
  });

  it('everything it refuses, the gateway schema refuses too (on the value as given)', () => {
    // Not compared: zod recurses without end on a cycle, and ignores symbol keys (JSON drops them).
    const comparable = refused.filter(([what]) => !/circular|over-deep|symbol keys/.test(what));
    for (const [, data] of comparable) {
      expect(eventInput.safeParse(event(data)).success).toBe(false);
    }
  });
});

describe('features', () => {
  it('without a feature, its methods reject (never throw) with E_EVENTFLOW_FEATURE_NOT_ENABLED, naming what to import and pass', async () => {
    const bare = new EventflowClient(offline, { onError: () => undefined });
    clients.push(bare);
    const notEnabled = (method: string, feature: string) =>
      expect.objectContaining({ code: 'E_EVENTFLOW_FEATURE_NOT_ENABLED', details: { feature }, message: `${method}() needs the ${feature} feature: create the client with { features: [${feature}] } (import { ${feature} } from '@eventflow/browser/work')` });
    await refusesWith(() => bare.consume('d', 'n', () => undefined), notEnabled('consume', 'consuming'));
    await refusesWith(() => bare.removeConsumer('d', 'n', () => undefined), notEnabled('removeConsumer', 'consuming'));
    await refusesWith(() => bare.wait('d', 'p'), notEnabled('wait', 'waiting'));
    await refusesWith(() => bare.request({ domain: 'd', name: 'n', pid: 'p' }), notEnabled('request', 'waiting'));
    await refusesWith(() => bare.readEventlogByTimestamp('d', 'p', 0, 1), notEnabled('readEventlogByTimestamp', 'v4Reads'));
    await refusesWith(() => bare.readEventlogFilteredByNames('d', 'p', ['n']), notEnabled('readEventlogFilteredByNames', 'v4Reads'));
    await refusesWith(() => bare.readEventlogByChildProcess('d', 'c'), notEnabled('readEventlogByChildProcess', 'v4Reads'));
    await refusesWith(() => bare.readEventlogByEid('e'), notEnabled('readEventlogByEid', 'v4Reads'));
    await refusesWith(() => bare.readEventlogByDomainAndEid('d', 'e'), notEnabled('readEventlogByDomainAndEid', 'v4Reads'));
    await refusesWith(() => bare.persistEntityAssociation('i', 'e'), notEnabled('persistEntityAssociation', 'v4Reads'));
    await refusesWith(() => bare.persistChildProcessAssociation('i', 'd', 'c'), notEnabled('persistChildProcessAssociation', 'v4Reads'));
    // events() returns an iterator, not a promise: it throws, as it does for a bad argument.
    expect(() => bare.events('d', 'n')).toThrow(notEnabled('events', 'iterating'));
  });

  it('the feature methods are the prototype\'s, so a subclass can still override them', () => {
    class Custom extends EventflowClient {
      override readEventlogByEid(_eid: string): Promise<never[]> {
        return Promise.resolve([]);
      }
    }
    const custom = new Custom(offline, { onError: () => undefined });
    clients.push(custom);
    expect(Object.hasOwn(EventflowClient.prototype, 'readEventlogByEid')).toBe(true);
    return expect(custom.readEventlogByEid('e')).resolves.toEqual([]);
  });

  it('one feature does not bring the other', async () => {
    const consumer = new EventflowClient(offline, { features: [consuming], onError: () => undefined });
    clients.push(consumer);
    await expect(consumer.wait('d', 'p')).rejects.toMatchObject({ code: 'E_EVENTFLOW_FEATURE_NOT_ENABLED', details: { feature: 'waiting' } });
    // The feature is there: its own argument checks answer.
    await expect(consumer.consume('d', 'n', 'no' as never)).rejects.toEqual(invalid('handler: must be a function'));
  });
});

/** `run` rejects with `expected` (a promise-returning method never throws synchronously). */
async function refusesWith(run: () => unknown, expected: unknown): Promise<void> {
  let result: unknown;
  expect(() => (result = run()), 'must not throw synchronously').not.toThrow();
  await expect(result).rejects.toEqual(expected);
}
