/** Gateway process concerns: configuration, HTTP endpoints, scheduling across gateways. */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, type StoredEvent } from '@eventflow/core';
import { parseConfig, startGateway, type Gateway } from '../src/index.js';
import { SqliteStore } from '../src/store/sqlite/sqlite.js';
import { eventually } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';

let h: Harness | undefined;
const extra: Gateway[] = [];
afterEach(async () => {
  await Promise.all(extra.splice(0).map((gateway) => gateway.close()));
  await h?.stop();
  h = undefined;
});

describe('configuration', () => {
  it('has working defaults: loopback, port 8080, SQLite in ./data', () => {
    expect(parseConfig({})).toMatchObject({
      EVENTFLOW_HOST: '127.0.0.1',
      EVENTFLOW_PORT: 8080,
      EVENTFLOW_STORE: 'sqlite',
      EVENTFLOW_SQLITE_PATH: './data/eventflow.db',
      EVENTFLOW_MAX_FRAME_BYTES: 1_048_576,
    });
  });

  it.each([
    ['EVENTFLOW_PORT', 'eighty'],
    ['EVENTFLOW_PORT', '70000'],
    ['EVENTFLOW_MAX_FRAME_BYTES', '-1'],
    ['EVENTFLOW_STORE', 'oracle'],
    ['EVENTFLOW_LOG_LEVEL', 'loud'],
    ['EVENTFLOW_GATEWAY_ID', 'has spaces'],
  ])('a bad %s (%s) fails start with E_EVENTFLOW_CONFIG naming the variable', async (name, value) => {
    expect(() => parseConfig({ [name]: value })).toThrow(expect.objectContaining({ code: 'E_EVENTFLOW_CONFIG', message: expect.stringContaining(name) }));
    await expect(startGateway({ [name]: value })).rejects.toMatchObject({ code: 'E_EVENTFLOW_CONFIG' });
  });

  it('ignores unrelated environment variables', () => {
    expect(parseConfig({ PATH: '/bin', HOME: '/root' }).EVENTFLOW_PORT).toBe(8080);
  });
});

describe('HTTP', () => {
  it('answers /healthz, a hint at /, and 404 elsewhere', async () => {
    h = await startHarness();
    const health = await fetch(`${h.gateway.httpUrl}healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok', gateway: h.gateway.id });
    expect((await fetch(h.gateway.httpUrl)).status).toBe(200);
    expect((await fetch(`${h.gateway.httpUrl}nope`)).status).toBe(404);
    expect(h.gateway.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/$/);
  });
});

describe('scheduling', () => {
  it('fires a scheduled event exactly once even with two gateways on one database', async () => {
    h = await startHarness();
    // A gateway refuses a SQLite file another one holds (EVENTFLOW_SQLITE_PATH); given the store, the
    // second one shares it, as gateways share a MySQL database, which is what the scheduler's guard is for.
    const second = await startGateway({ EVENTFLOW_PORT: 0, EVENTFLOW_LOG_LEVEL: 'silent' }, { store: new SqliteStore({ path: h.dbPath }) });
    extra.push(second);
    const seen: StoredEvent[] = [];
    const onFirst = h.client();
    const onSecond = createClient(second.url);
    try {
      await onFirst.subscribe('timers', '*', (event) => seen.push(event));
      await onSecond.subscribe('timers', '*', (event) => seen.push(event));
      // Scheduled on the first gateway; the second learns of it only from the shared database.
      for (let i = 0; i < 5; i++) await onFirst.schedule(Date.now() + 300 + i * 10, { domain: 'timers', name: 'tick', pid: `t${i}` });
      await eventually(() => seen.length >= 5, 5_000, 'scheduled events');
      // Time is what is tested: the second gateway's scheduler timer runs out too, and fires nothing.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(seen).toHaveLength(5);
      expect(new Set(seen.map((event) => event.pid)).size).toBe(5);
    } finally {
      await onSecond.close();
    }
  });

  it('fires events whose due time passed while no gateway was running', async () => {
    h = await startHarness();
    const client = h.client();
    const id = await client.schedule(Date.now() + 200, { domain: 'timers', name: 'late', pid: 'p' });
    await h.gateway.close();
    // Time is what is tested: the due time passes while no gateway runs.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await h.restart();
    const reader = h.client();
    await eventually(async () => (await reader.readEventlog('timers', 'p')).length === 1, 5_000, 'fired after restart');
    expect((await reader.read(id)).name).toBe('late');
  });
});
