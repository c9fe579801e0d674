/**
 * The work API as an outside user meets it, against a real gateway and the Node client: whatever a
 * handler throws is reported (and the event settled) instead of crashing the worker; a retry() that
 * comes too late, a bad extend(), contradictory or misspelt options and hand-written frames that
 * would be ignored are refused with a coded error at the call; the connection stays usable.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createNodeClient, listGroups, routeConsumers, type ConsumeContext, type EventflowClient } from '@eventflow/node';
import { connect } from '@eventflow/test-support/raw-socket';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
const clients: EventflowClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close({ drainTimeout: 0 })));
  await h?.stop();
  h = undefined;
});

async function worker(): Promise<{ h: Harness; client: EventflowClient }> {
  h = await startHarness();
  const client = createNodeClient(h.gateway.url, { onError: () => undefined });
  clients.push(client);
  return { h, client };
}

describe('what a handler throws', () => {
  // Before: String() of the first and third threw inside the client, the settle was never sent (an
  // unhandled rejection, which ends a Node worker) and the event waited for its lease to run out; a
  // non-Error's own message was not used.
  const cyclic: Record<string, unknown> = { id: 1 };
  cyclic.self = cyclic;
  const thrown: Array<[string, () => unknown, string]> = [
    ['an object without a prototype', () => Object.create(null), '{}'],
    ['a cyclic object', () => cyclic, '[object Object]'],
    ['a Proxy whose every property throws', () => new Proxy({}, { get: () => { throw new Error('trap'); } }), 'a value that cannot be described'],
    ['a non-Error with a message and a code', () => ({ message: 'from a library', code: 'E_LIB' }), 'from a library'],
  ];
  it.each(thrown)('%s is reported as the failure, at once', async (_what, value, message) => {
    const { client } = await worker();
    await client.consume('jobs', 'run', () => {
      throw value();
    });
    const failed = await client.request({ domain: 'jobs', name: 'run', pid: 'p1' }, { timeout: 5_000 }).catch((error: unknown) => error);
    expect(failed).toMatchObject({ code: 'E_EVENTFLOW_CONSUMER_FAILED', details: { attempt: 1, error: message } });
  });

  it('an Error thrown without a message is reported by its name, not as an empty text', async () => {
    // Before: the settle's error was "": request() ended "failed: " and a dead letter's last error said nothing.
    const { client } = await worker();
    await client.consume('jobs', 'run', () => {
      throw new TypeError();
    });
    const failed = await client.request({ domain: 'jobs', name: 'run', pid: 'p1' }, { timeout: 5_000 }).catch((error: unknown) => error);
    expect(failed).toMatchObject({ code: 'E_EVENTFLOW_CONSUMER_FAILED', details: { error: 'TypeError (thrown with an empty message)' } });
  });

  it.each([
    ['a library\'s rejection object', () => ({ message: 'from a library', code: 'E_LIB' }), 'from a library'],
    ['an Error without a message', () => new RangeError(), 'RangeError (thrown with an empty message)'],
    ['a plain object', () => ({ status: 503 }), '{"status":503}'],
  ])('routeConsumers reports %s as consume does (String() made it "[object Object]" or nothing)', async (_what, value, message) => {
    const { client } = await worker();
    await routeConsumers(client, 'jobs', {
      onRun() {
        throw value();
      },
    }, 'run');
    const failed = await client.request({ domain: 'jobs', name: 'run', pid: 'p1' }, { timeout: 5_000 }).catch((error: unknown) => error);
    expect((failed as { details?: { error?: string } }).details?.error).toMatch(new RegExp(`^onRun failed for event \\S+ \\(jobs › run\\): ${message.replace(/[(){}]/g, '\\$&')}$`));
  });

  it('routeConsumers refuses, with a code, a service whose method is a getter that throws; under * the event fails saying so', async () => {
    // Before: the getter's own Error escaped routeConsumers uncoded, and under '*' the event failed in the getter's words.
    const { client } = await worker();
    class Service {
      get onRun(): () => void {
        throw new Error('not configured');
      }
    }
    const refused = await routeConsumers(client, 'jobs', new Service(), 'run').catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'E_EVENTFLOW_CONSUMER_HANDLER_MISSING', message: expect.stringContaining('reading onRun of the service Service threw (not configured)'), details: { method: 'onRun' } });
    await routeConsumers(client, 'jobs', new Service(), '*');
    const failed = await client.request({ domain: 'jobs', name: 'run', pid: 'p1' }, { timeout: 5_000 }).catch((error: unknown) => error);
    expect(failed).toMatchObject({ code: 'E_EVENTFLOW_CONSUMER_FAILED', details: { error: expect.stringContaining('reading onRun of the service Service threw (not configured)') } });
  });

  it('routeConsumers reports a method that throws an object without a prototype', async () => {
    const { client } = await worker();
    await routeConsumers(client, 'jobs', {
      onRun() {
        throw Object.create(null);
      },
    }, 'run');
    const failed = await client.request({ domain: 'jobs', name: 'run', pid: 'p1' }, { timeout: 5_000 }).catch((error: unknown) => error);
    expect(failed).toMatchObject({ code: 'E_EVENTFLOW_CONSUMER_FAILED', details: { error: expect.stringContaining('onRun failed for event') } });
  });
});

describe('the context of a delivery', () => {
  it('retry() after the handler returned throws E_EVENTFLOW_UNKNOWN_DELIVERY instead of doing nothing; the success stands', async () => {
    const { client } = await worker();
    let context: ConsumeContext | undefined;
    await client.consume('jobs', 'run', (_event, given) => void (context = given));
    await client.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    const late = await eventually(() => context, 5_000, 'the handler');
    await eventually(async () => (await listGroups(client, 'jobs'))[0]?.inFlight === 0, 5_000, 'the settle');
    expect(() => late.retry(10)).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_UNKNOWN_DELIVERY', message: expect.stringContaining('call it before the handler resolves') }));
    expect(await listGroups(client, 'jobs')).toMatchObject([{ pending: 0, inFlight: 0, redelivered: 0 }]);
  });

  it('extend() after the handler returned is refused at once, as retry() is, and sends nothing; the success stands', async () => {
    const { client } = await worker();
    let late: Promise<unknown> | undefined;
    // From a callback the handler did not await, right after it returned: before, sent ahead of the settle, it extended
    // a lease the outcome ended anyway, or was refused by the gateway in words that did not say why.
    await client.consume('jobs', 'run', (_event, context) => void setTimeout(() => (late = context.extend(1_000).catch((error: unknown) => error)), 0));
    await client.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    const answer = await eventually(() => late, 5_000, 'the late extend');
    expect(answer).toMatchObject({ code: 'E_EVENTFLOW_UNKNOWN_DELIVERY', message: expect.stringContaining('call it before the handler resolves') });
    await eventually(async () => (await listGroups(client, 'jobs'))[0]?.inFlight === 0, 5_000, 'the settle');
    expect(await listGroups(client, 'jobs')).toMatchObject([{ pending: 0, inFlight: 0, redelivered: 0 }]);
  });

  it('extend() with a value that is not a positive integer is refused naming it (NaN reached the gateway as null)', async () => {
    const { client } = await worker();
    const answers: unknown[] = [];
    await client.consume('jobs', 'run', async (_event, context) => {
      for (const ms of [Number.NaN, Number.POSITIVE_INFINITY, 0, 1.5]) answers.push(await context.extend(ms).catch((error: unknown) => error));
      answers.push(await context.extend(1_000));
    });
    await client.publish({ domain: 'jobs', name: 'run', pid: 'p1' });
    await eventually(() => answers.length === 5, 5_000, 'the extends');
    for (const answer of answers.slice(0, 4)) expect(answer).toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringMatching(/^extend\(ms\): ms must be a positive integer/) });
    expect(answers[4]).toEqual({ ms: 1_000 });
  });
});

describe('options that would be ignored or misread', () => {
  it('consume and request refuse misspelt and contradictory options at the call; nothing is registered or published', async () => {
    const { client } = await worker();
    await expect(client.consume('jobs', 'run', () => undefined, { concurrancy: 4 } as never)).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('options: unrecognized key "concurrancy"') });
    await expect(client.consume('jobs', 'run', () => undefined, null as never)).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('options: must be an object') });
    await expect(client.consume('jobs', 'run', () => undefined, { retry: { attempts: 3, delayMs: 5_000, maxDelayMs: 10 } })).rejects.toMatchObject({ message: expect.stringContaining('options.retry.maxDelayMs (10) must not be below options.retry.delayMs (5000)') });
    expect(await listGroups(client, 'jobs')).toEqual([]);
    await client.consume('jobs', 'run', () => undefined);
    const event = { domain: 'jobs', name: 'run', pid: 'p1' };
    await expect(client.request(event, { timout: 100 } as never)).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('unrecognized key "timout"') });
    await expect(client.request(event, { requireConsumer: 'no' as never })).rejects.toMatchObject({ message: 'options.requireConsumer: must be a boolean' });
    // A timer of 2³¹ ms or more fires at once: the request failed with E_EVENTFLOW_WAIT_TIMEOUT after publishing.
    await expect(client.request(event, { timeout: 2 ** 31 })).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('timeout') });
    // The wait's arguments are checked before the publish goes out beside it (welcome.waitsInOrder).
    await expect(client.request(event, { outcomes: [] })).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('names') });
    expect(await client.readEventlog('jobs', 'p1')).toEqual([]);
  });

  it('the gateway refuses a retry policy whose cap is below its delay, and a delayMs beside an outcome other than retry', async () => {
    ({ h } = await worker());
    const raw = await connect(h.gateway.url);
    try {
      const policy = await raw.request('consume', { consumer: 'c1', domain: 'jobs', name: 'run', retry: { attempts: 3, delayMs: 5_000, maxDelayMs: 10 } });
      expect(policy).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT', message: 'consume: params.retry.maxDelayMs: must not be below delayMs' });
      expect(await raw.request('consume', { consumer: 'c2', domain: 'jobs', name: 'run' })).toMatchObject({ type: 'result' });
      await raw.request('publish', { event: { domain: 'jobs', name: 'run', pid: 'p1' } });
      const { delivery } = await raw.next((frame) => frame.type === 'delivery');
      // Recorded as success, the delay would be dropped without a word.
      const delayed = await raw.request('settle', { delivery, outcome: 'success', delayMs: 1_000 });
      expect(delayed).toMatchObject({ type: 'error', code: 'E_EVENTFLOW_INVALID_INPUT', message: 'settle: params.delayMs: is taken only with outcome "retry"' });
      expect(await raw.request('settleMany', { settles: [{ delivery, outcome: 'failed', delayMs: 5 }] })).toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT' });
      // The delivery is still open: its proper settle is recorded.
      expect(await raw.request('settle', { delivery, outcome: 'retry', delayMs: 0 })).toMatchObject({ type: 'result' });
      await raw.ping();
    } finally {
      raw.ws.close();
    }
  });
});

describe('a request() from inside a handler', () => {
  it.each([
    ['concurrency 1', { concurrency: 1 }, 'all 1 of its concurrency running'],
    ['ordered, the same pid', { ordered: true }, 'ordered, a handler of pid p1 running'],
  ])('of an event its own consumer takes (%s) times out saying it waited for itself and what to do', async (_what, options, why) => {
    // Before: "wait timed out (300) for jobs › p1 › success | failed; its event … is published", nothing on why.
    const { client } = await worker();
    let inner: unknown;
    await client.consume('jobs', 'run', async (event) => {
      if (event.data.nested === true) return;
      inner = await client.request({ domain: 'jobs', name: 'run', pid: event.pid, data: { nested: true } }, { timeout: 300 }).catch((error: unknown) => error);
    }, options);
    await client.request({ domain: 'jobs', name: 'run', pid: 'p1' }, { timeout: 300 }).catch(() => undefined);
    await eventually(() => inner, 5_000, 'the inner request ended');
    expect(inner).toMatchObject({ code: 'E_EVENTFLOW_WAIT_TIMEOUT', details: { heldBy: { domain: 'jobs', name: 'run' } } });
    expect((inner as Error).message).toContain(why);
    expect((inner as Error).message).toContain('a handler that awaits request() of an event its own consumer takes waits for itself');
  });

  it('a timeout with room in the consumer says nothing of it (no heldBy)', async () => {
    const { client } = await worker();
    await client.consume('jobs', 'run', async () => undefined, { concurrency: 2 });
    const timedOut = await client.request({ domain: 'jobs', name: 'run', pid: 'p1' }, { timeout: 200 }).catch((error: unknown) => error);
    expect(timedOut).toMatchObject({ code: 'E_EVENTFLOW_WAIT_TIMEOUT' });
    expect((timedOut as { details: object }).details).not.toHaveProperty('heldBy');
  });
});

describe('a request() whose wait ends with no outcome', () => {
  it('says its event was published (details.published), after a timeout and after an abort, so that it is not published again under a new id', async () => {
    const { client } = await worker();
    // A consumer that takes the jobs and never publishes their outcome.
    await client.consume('jobs', 'slow', async () => undefined);
    const timedOut = await client.request({ id: 'slow-1', domain: 'jobs', name: 'slow', pid: 'p1' }, { timeout: 200 }).catch((error: unknown) => error);
    expect(timedOut).toMatchObject({ code: 'E_EVENTFLOW_WAIT_TIMEOUT', details: { published: 'slow-1' } });
    expect((timedOut as Error).message).toContain('its event slow-1 is published');
    const abort = new AbortController();
    const aborted = client.request({ id: 'slow-2', domain: 'jobs', name: 'slow', pid: 'p2' }, { signal: abort.signal }).catch((error: unknown) => error);
    // Aborted once the event is stored (readable), not before.
    await eventually(async () => (await client.read('slow-2').catch(() => undefined)) !== undefined, 5_000, 'the request event stored');
    abort.abort();
    expect(await aborted).toMatchObject({ code: 'E_EVENTFLOW_ABORTED', details: { published: 'slow-2' } });
    // Not published twice: the log holds each once.
    expect((await client.readEventlog('jobs', 'p1')).map((event) => event.id)).toEqual(['slow-1']);
  });
});
