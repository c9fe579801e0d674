/**
 * The work features in a browser: without them consume, wait and request reject with a coded error
 * (so do the v4 reads and associations without `v4Reads`, and events() and eventlogStates() without `iterating`; the
 * client still reads, subscribes and publishes); passed from '@eventflow/browser/work', they
 * consume, wait and request against a real gateway, and come back after it restarts.
 */
import { commands } from 'vitest/browser';
import { expect, it } from 'vitest';
import { consuming, iterating, v4Reads, waiting } from '@eventflow/browser/work';
import { iterating as coreIterating } from '@eventflow/core';
import type { StoredEvent } from '../src/index.js';
import { browserClient, cacheName, gateway, otherClient } from './helpers.js';

it('without the features, consume, removeConsumer, wait and request reject with E_EVENTFLOW_FEATURE_NOT_ENABLED; reads, subscriptions and publishes work', async () => {
  const { url } = await gateway();
  const client = browserClient(url, cacheName());
  const notEnabled = (feature: string) => ({ code: 'E_EVENTFLOW_FEATURE_NOT_ENABLED', details: { feature }, message: expect.stringContaining(`import { ${feature} } from '@eventflow/browser/work'`) });
  await expect(client.consume('d', 'job', () => undefined)).rejects.toMatchObject(notEnabled('consuming'));
  await expect(client.removeConsumer('d', 'job', () => undefined)).rejects.toMatchObject(notEnabled('consuming'));
  await expect(client.wait('d', 'p')).rejects.toMatchObject(notEnabled('waiting'));
  await expect(client.request({ domain: 'd', name: 'job', pid: 'p' })).rejects.toMatchObject(notEnabled('waiting'));
  await expect(client.readEventlogByEid('e')).rejects.toMatchObject(notEnabled('v4Reads'));
  await expect(client.persistEntityAssociation('id', 'e')).rejects.toMatchObject(notEnabled('v4Reads'));
  expect(() => client.events('d', '*')).toThrow(expect.objectContaining(notEnabled('iterating')));
  expect(() => client.eventlogStates('d', 'p')).toThrow(expect.objectContaining(notEnabled('iterating')));
  // Core's iterating brings events() but not the browser's eventlogStates(): the message says which to import.
  const withCore = browserClient(url, cacheName(), { features: [coreIterating] });
  expect(() => withCore.eventlogStates('d', 'p')).toThrow(expect.objectContaining(notEnabled('iterating')));

  const seen: string[] = [];
  await client.subscribe('d', '*', (event) => seen.push(event.name));
  await client.publish({ domain: 'd', name: 'hello', pid: 'p' });
  await expect.poll(() => seen).toEqual(['hello']);
  expect((await client.readEventlog('d', 'p')).map((event) => event.name)).toEqual(['hello']);
});

it('with consuming and waiting, a browser client consumes, waits and requests, also after the gateway restarts', async () => {
  const { handle, url } = await gateway();
  const client = browserClient(url, cacheName(), { features: [consuming, waiting] });
  const other = otherClient(url);
  const handled: StoredEvent[] = [];
  // The worker's side, in the browser: every job gets its outcome.
  const consumer = await client.consume('jobs', 'job', async (event) => {
    handled.push(event);
    await client.publish({ domain: 'jobs', name: 'success', pid: event.pid, data: { done: event.id } });
  });

  const outcome = await other.request({ domain: 'jobs', name: 'job', pid: 'j1' });
  expect(outcome).toMatchObject({ name: 'success', pid: 'j1', data: { done: handled[0]?.id } });

  // The browser requests too: its own consumer answers.
  const answered = await client.request({ domain: 'jobs', name: 'job', pid: 'j2' });
  expect(answered).toMatchObject({ name: 'success', pid: 'j2' });

  // A wait and the consumer are registered again on the new connection.
  const waited = client.wait('jobs', 'j3', ['success'], 15_000);
  await expect.poll(async () => (await commands.gatewayStats(handle)).waits).toBe(1);
  await commands.gatewayRestart(handle);
  await expect.poll(() => client.state, { timeout: 5_000 }).toBe('open');
  await expect.poll(async () => commands.gatewayStats(handle), { timeout: 5_000 }).toMatchObject({ consumers: 1, waits: 1 });
  await other.publish({ domain: 'jobs', name: 'job', pid: 'j3' });
  expect(await waited).toMatchObject({ name: 'success', pid: 'j3' });
  expect(handled.map((event) => event.pid)).toEqual(['j1', 'j2', 'j3']);

  await consumer.remove();
  await expect.poll(async () => (await commands.gatewayStats(handle)).consumers).toBe(0);
});

it('with v4Reads and iterating, a browser client reads by entity and timestamp, associates, and iterates events', async () => {
  const { url } = await gateway();
  const client = browserClient(url, cacheName(), { features: [v4Reads, iterating] });
  // The fence: once (v4, *) is registered, the iterator's listener (added at the call) gets what follows.
  await client.subscribe('v4', '*', () => undefined);
  const events = client.events('v4', '*');
  const id = await client.publish({ domain: 'v4', name: 'made', pid: 'p1', data: { n: 1 } });
  expect(await client.persistEntityAssociation(id, 'customer-1')).toBe(true);
  expect(await client.persistChildProcessAssociation(id, 'v4', 'child-1')).toBe(true);
  expect((await client.readEventlogByEid('customer-1')).map((event) => event.id)).toEqual([id]);
  expect((await client.readEventlogByDomainAndEid('v4', 'customer-1')).map((event) => event.id)).toEqual([id]);
  expect((await client.readEventlogByChildProcess('v4', 'child-1')).map((event) => event.id)).toEqual([id]);
  expect((await client.readEventlogFilteredByNames('v4', 'p1', ['made'])).map((event) => event.id)).toEqual([id]);
  expect((await client.readEventlogByTimestamp('v4', 'p1', 0, Date.now() + 60_000)).map((event) => event.id)).toEqual([id]);
  await expect(client.readEventlogByTimestamp('v4', 'p1', 'yesterday', 0)).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_DATE' });
  const first = await events.next();
  expect(first.value).toMatchObject({ id, name: 'made' });
  await events.return?.();
});
