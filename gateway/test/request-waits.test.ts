/**
 * How the answers of a pipelined request() leave (connection/request-waits.ts › takeAnswer): the
 * wait's with the publish's, the publish's with the outcome, unless the wait was answered first.
 */
import { describe, expect, it } from 'vitest';
import { RequestWaits } from '../src/connection/request-waits.js';

/** A wait with its publish right behind it, the wait registered: the publish's check has passed. */
async function pipelined(waits: RequestWaits, handle: string, id: string): Promise<void> {
  const decided = waits.begin({ wait: handle, domain: 'orders', pid: 'p1', names: ['success'], request: id });
  const check = waits.check(id);
  expect(waits.takeAnswer('wait', { wait: handle, request: id })).toBe('hold');
  decided?.(undefined);
  await check;
}

describe('RequestWaits.takeAnswer', () => {
  it('holds the wait\'s answer for the publish, and the publish\'s briefly for the outcome', async () => {
    const waits = new RequestWaits();
    await pipelined(waits, 'w1', 'e1');
    expect(waits.takeAnswer('publish', { event: { id: 'e1' } })).toBe('holdBriefly');
    // Asked once: a second answer for the same id (an idempotent retry) goes at once.
    expect(waits.takeAnswer('publish', { event: { id: 'e1' } })).toBe('send');
  });

  it('sends the publish\'s answer at once when its wait was answered first (an outcome already on its way)', async () => {
    const waits = new RequestWaits();
    await pipelined(waits, 'w2', 'e2');
    waits.ended('w2');
    expect(waits.takeAnswer('publish', { event: { id: 'e2' } })).toBe('send');
  });

  it('sends at once what is not a pipelined request()', () => {
    const waits = new RequestWaits();
    expect(waits.takeAnswer('publish', { event: { id: 'alone' } })).toBe('send');
    expect(waits.takeAnswer('wait', { wait: 'w3', request: 'never-published' })).toBe('send');
    expect(waits.takeAnswer('subscribe', { domain: 'orders', name: 'placed' })).toBe('send');
    waits.ended('unknown');
  });
});
