/**
 * The dashboard's actions go through the outbox, end to end in Chromium: with the gateway down,
 * three notes are added (shown pending on top of the cached state); the page is reloaded (service
 * worker, IndexedDB) and still shows them pending; the gateway restarts on the same port and
 * database; the three are stored exactly once, in order, and the marker goes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createNodeClient, type EventflowClient } from '@eventflow/node';
import { buildApp } from '@eventflow/test-support/app-build';
import { chromiumArgs, chromiumPath } from '@eventflow/test-support/chromium';
import { startTempGateway, type TempGateway } from '@eventflow/test-support/temp-gateway';
import { eventually } from '@eventflow/test-support/wait';

const demoDir = fileURLToPath(new URL('..', import.meta.url));
const WAIT = 30_000;
const pid = 'order-outbox-e2e';

let dir: string;
let gateway: TempGateway;
let client: EventflowClient;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'eventflow-outbox-e2e-'));
  const outDir = join(dir, 'demo-dist');
  await buildApp(demoDir, outDir);
  gateway = await startTempGateway({ EVENTFLOW_DEMO_DIR: outDir }, 'eventflow-outbox-e2e-');
  client = createNodeClient(gateway.gateway.url, { reconnect: { minDelay: 50, maxDelay: 500 }, onError: () => undefined });
  browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs, headless: true, timeout: WAIT });
  page = await browser.newPage();
  page.setDefaultTimeout(WAIT);
});

afterAll(async () => {
  await browser?.close();
  await client?.close();
  await gateway?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const pendingCount = async (): Promise<number> => Number(await page.locator('[data-testid="state-panel"]').getAttribute('data-pending'));
const shownState = async (): Promise<Record<string, unknown>> => JSON.parse((await page.locator('[data-testid="state-json"]').textContent()) ?? '{}') as Record<string, unknown>;

it('notes added offline are shown pending, survive a reload and a gateway restart, and are stored once, in order', async () => {
  await client.publish({ domain: 'orders', name: 'order-placed', pid, data: { item: 'lamp', status: 'placed' } });
  await page.goto(`${gateway.gateway.httpUrl}?pid=${pid}`, { waitUntil: 'load' });
  await page.locator('[data-testid="connection-state"][data-state="open"]').waitFor();
  await eventually(async () => (await shownState())['status'] === 'placed', WAIT, 'the placed order');
  // The shell is cached by the service worker, the state by the client, before the outage.
  await page.evaluate(() => navigator.serviceWorker.ready.then(() => undefined));
  await eventually(async () => (await page.evaluate(() => caches.keys())).length > 0, WAIT, 'the shell cached');

  await gateway.stop();
  await page.locator('[data-testid="connection-state"]:not([data-state="open"])').waitFor();
  for (const note of ['first', 'second', 'third']) {
    await page.locator('[data-testid="note-input"]').fill(note);
    await page.locator('[data-testid="add-note"]').click();
    await eventually(async () => (await shownState())['note'] === note, WAIT, `note ${note} shown`);
  }
  expect(await pendingCount()).toBe(3);
  expect(await page.locator('[data-testid="pending-marker"]').textContent()).toBe('3 pending');

  await page.reload({ waitUntil: 'load' });
  await eventually(async () => (await pendingCount().catch(() => 0)) === 3, WAIT, 'three pending after the reload');
  expect(await shownState()).toMatchObject({ status: 'placed', note: 'third' });

  await gateway.start();
  await page.locator('[data-testid="connection-state"][data-state="open"]').waitFor();
  await page.locator('[data-testid="pending-marker"]').waitFor({ state: 'detached' });
  expect(await shownState()).toMatchObject({ status: 'placed', note: 'third' });
  const stored = await client.readEventlog('orders', pid);
  expect(stored.map((event) => [event.name, event.data['note']])).toEqual([
    ['order-placed', undefined],
    ['note-added', 'first'],
    ['note-added', 'second'],
    ['note-added', 'third'],
  ]);
});
