import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';

let h: Harness;
beforeEach(async () => (h = await startHarness()));
afterEach(async () => h.stop());

describe('smoke', () => {
  it('publishes and reads', async () => {
    const client = h.client();
    const id = await client.publish({ domain: 'orders', name: 'placed', pid: 'p1', data: { a: 1 } });
    const event = await client.read(id);
    expect(event).toMatchObject({ id, domain: 'orders', name: 'placed', pid: 'p1', data: { a: 1 } });
  });
});
