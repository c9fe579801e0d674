/**
 * The README's "Examples" block, as a reader pastes it after creating a client: run against a real
 * gateway, it completes and prints what its comments say. (Its request() once came after its
 * consumer's group was deleted, and rejected with E_EVENTFLOW_NO_CONSUMER.)
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { deleteGroup, listGroups } from '@eventflow/core';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** The first ```ts block after `heading` in the core README. */
function example(heading: string): string {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const match = /```ts\n([\s\S]*?)```/.exec(readme.slice(readme.indexOf(heading)));
  if (!match?.[1]) throw new Error(`no ts block after ${heading}`);
  return match[1];
}

const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor as new (...args: string[]) => (...values: unknown[]) => Promise<void>;

describe("the core README's examples", () => {
  it('run as written against a gateway and print what their comments say', async () => {
    h = await startHarness();
    const client = h.client();
    const publisher = h.client();
    const printed: unknown[][] = [];
    // The iterator example waits for an event of order-42: published until the loop has taken one
    // (the loop's subscription starts when it is iterated, which nothing outside can observe).
    const feeding = setInterval(() => void publisher.publish({ domain: 'orders', name: 'placed', pid: 'order-42', data: { total: 1 } }), 50);
    try {
      const run = new AsyncFunction('client', 'deleteGroup', 'console', example('### Examples'));
      await run(client, deleteGroup, { log: (...values: unknown[]) => void printed.push(values) });
    } finally {
      clearInterval(feeding);
    }
    expect(printed).toContainEqual(['success']);
    // Its consumer group was deleted, as the example says to when no member will come back.
    expect((await listGroups(client, 'orders')).filter((group) => group.name === 'placed' && group.group === '')).toEqual([]);
  });
});
