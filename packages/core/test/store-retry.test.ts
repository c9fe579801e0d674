/**
 * A write the gateway answers E_EVENTFLOW_STORE_FAILED with `details.retryable` (its store failed;
 * the event stored or not, or unknown) is sent again, the same frame with the same event id, until
 * its timeout; then it fails with the store's error. Against the request manager, a fake gateway
 * answering by hand (the real store outages are in gateway/test/store-outage.test.ts and
 * disk-full.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { isEventflowError, type EventflowError } from '@eventflow/core';
import { RequestManager } from '../src/requests.js';
import { eventually } from '@eventflow/test-support/wait';

interface Sent {
  id: number;
  op: string;
  params: unknown;
}

function manager(timeout = 5_000): { requests: RequestManager; sent: Sent[] } {
  const sent: Sent[] = [];
  const requests = new RequestManager((frame) => {
    sent.push(JSON.parse(frame) as Sent);
    return true;
  }, timeout);
  requests.open({ maxPublishRate: 0 });
  return { requests, sent };
}

const event = { id: 'e1', domain: 'orders', name: 'placed', pid: 'p1' };
const storeFailed = (id: number, stored: false | 'unknown', retryable = true) =>
  ({ type: 'error', id, code: 'E_EVENTFLOW_STORE_FAILED', message: 'the store failed', details: { id: 'e1', stored, ...(retryable && { retryable }) } }) as const;

describe('writes the store failed', () => {
  it('are sent again, unchanged, until the store takes them', async () => {
    const { requests, sent } = manager();
    const published = requests.request('publish', { event });
    expect(sent).toHaveLength(1);
    requests.settle(storeFailed(sent[0]!.id, 'unknown'));
    await eventually(() => sent.length === 2, 2_000, 'the first retry');
    requests.settle(storeFailed(sent[1]!.id, false));
    await eventually(() => sent.length === 3, 2_000, 'the second retry');
    // The same frame each time: the same request id and, above all, the same event id.
    expect(sent[1]).toEqual(sent[0]);
    expect(sent[2]).toEqual(sent[0]);
    requests.settle({ type: 'result', id: sent[2]!.id, result: { id: 'e1', position: 7, timestamp: '2025-06-01T10:00:00.000Z' } });
    await expect(published).resolves.toMatchObject({ id: 'e1', position: 7 });
  });

  it('out of time while waiting to go again, fail with the store error, unknown if any attempt was', async () => {
    // Every attempt answered a microtask after it is sent (no timer runs in between): out of time, the
    // request waits for its next attempt, and the store's last answer is all there is to tell.
    let attempts = 0;
    const requests: RequestManager = new RequestManager((frame) => {
      const { id } = JSON.parse(frame) as Sent;
      attempts += 1;
      queueMicrotask(() => requests.settle(storeFailed(id, attempts === 1 ? 'unknown' : false)));
      return true;
    }, 400);
    requests.open({ maxPublishRate: 0 });
    const error = (await requests.request('publish', { event }).catch((failure: unknown) => failure)) as EventflowError;
    expect(isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED')).toBe(true);
    expect(error.details).toMatchObject({ id: 'e1', stored: 'unknown', retryable: true });
    expect(Number(error.details?.attempts)).toBeGreaterThanOrEqual(2);
  });

  it("out of time with the retry sent and not answered (it may be stored): a request timeout, its fate unknown, not the first failure's stored: false", async () => {
    const { requests, sent } = manager(400);
    const published = requests.request('publish', { event });
    requests.settle(storeFailed(sent[0]!.id, false));
    // The retry goes out; the store takes it, but its answer comes after the timeout.
    await eventually(() => sent.length === 2, 2_000, 'the retry');
    const error = (await published.catch((failure: unknown) => failure)) as EventflowError;
    expect(error).toMatchObject({ code: 'E_EVENTFLOW_REQUEST_TIMEOUT', details: { id: 'e1' } });
    expect(error.message).toBe('publish of event e1: no answer from the gateway within 400 ms');
  });

  it('out of time with the retry lost with its connection, unanswered: a request timeout too', async () => {
    const { requests, sent } = manager(400);
    const published = requests.request('publish', { event });
    requests.settle(storeFailed(sent[0]!.id, false));
    await eventually(() => sent.length === 2, 2_000, 'the retry');
    requests.lost();
    await expect(published).rejects.toMatchObject({ code: 'E_EVENTFLOW_REQUEST_TIMEOUT', details: { id: 'e1' } });
  });

  it('are not sent again when the failure is not retryable, nor when the request is not a write', async () => {
    const { requests, sent } = manager();
    const published = requests.request('publish', { event });
    requests.settle(storeFailed(sent[0]!.id, false, false));
    await expect(published).rejects.toMatchObject({ code: 'E_EVENTFLOW_STORE_FAILED' });
    const read = requests.request('read', { id: 'e1' });
    requests.settle(storeFailed(sent[1]!.id, false));
    await expect(read).rejects.toMatchObject({ code: 'E_EVENTFLOW_STORE_FAILED' });
    // Failed at once, so never sent again: the promise is settled and the request forgotten.
    expect(sent.map((frame) => frame.op)).toEqual(['publish', 'read']);
  });
});
