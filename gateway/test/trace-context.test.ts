/**
 * An event's trace context through a real gateway (PROTOCOL.md › Event input): given in the publish
 * options it is stored, returned on reads, pushed to subscribers and delivered to consumers (so that
 * a handler's span can continue it); a malformed one is refused naming the field, nothing stored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isEventflowError, type EventflowClient, type StoredEvent } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { eventually } from '@eventflow/test-support/wait';

const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const tracestate = 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE';

describe('trace context through the gateway', () => {
  let harness: Harness;
  let client: EventflowClient;

  beforeAll(async () => {
    harness = await startHarness({ EVENTFLOW_MAX_PUBLISH_RATE: 0 });
    client = harness.client();
  });
  afterAll(() => harness?.stop());

  it('publish, request and schedule options give the event its context: stored, read, pushed and delivered with it', async () => {
    const pushed: StoredEvent[] = [];
    await client.subscribe('traced', '*', (event) => pushed.push(event));
    const delivered: StoredEvent[] = [];
    await client.consume('traced', 'asked', async (event) => {
      delivered.push(event);
      await client.publish({ domain: 'traced', name: 'success', pid: event.pid, rid: event.id });
    });
    const id = await client.publish({ domain: 'traced', name: 'placed', pid: 't1' }, { traceparent, tracestate });
    const outcome = await client.request({ domain: 'traced', name: 'asked', pid: 't2' }, { traceparent });
    const scheduled = await client.schedule(Date.now(), { domain: 'traced', name: 'due', pid: 't3' }, { traceparent, tracestate });
    expect(await client.read(id)).toMatchObject({ id, traceparent, tracestate });
    expect(delivered).toHaveLength(1);
    expect(delivered[0]).toMatchObject({ name: 'asked', traceparent });
    expect('tracestate' in (delivered[0] as StoredEvent)).toBe(false);
    // The outcome published in the handler without options or SDK carries none.
    expect('traceparent' in outcome).toBe(false);
    await eventually(() => pushed.some((event) => event.id === scheduled) || undefined, 5_000, 'the scheduled event fired');
    expect(pushed.find((event) => event.id === id)).toMatchObject({ traceparent, tracestate });
    expect(pushed.find((event) => event.id === scheduled)).toMatchObject({ traceparent, tracestate });
    expect((await client.readEventlog('traced', 't2')).map((event) => event.traceparent)).toEqual([traceparent, undefined]);
  });

  it('refuses a malformed trace context with E_EVENTFLOW_INVALID_INPUT naming the field, and stores nothing', async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7' }, 'event.traceparent'],
      [{ traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' }, 'event.traceparent'],
      [{ traceparent: traceparent.toUpperCase() }, 'event.traceparent'],
      [{ traceparent, tracestate: 'x'.repeat(513) }, 'event.tracestate'],
      [{ tracestate }, 'event.tracestate'],
    ];
    for (const [options, field] of cases) {
      const error = await client.publish({ id: `bad-${field}-${Object.values(options).join('').length}`, domain: 'traced', name: 'bad', pid: 'bad' }, options).catch((caught: unknown) => caught);
      expect(isEventflowError(error, 'E_EVENTFLOW_INVALID_INPUT'), String(error)).toBe(true);
      expect((error as Error).message).toContain(field);
    }
    expect(await client.readEventlog('traced', 'bad')).toEqual([]);
  });
});
