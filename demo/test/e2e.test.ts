/**
 * End to end: the dashboard built by Vite, served by a real gateway (SQLite in a temp dir), fed by
 * the demo worker, driven in Debian's Chromium. Online it shows the connection, the live feed,
 * the processes and a process's composed state; with the gateway stopped a reload still opens it
 * (service worker) with the cached state marked stale (IndexedDB); with the gateway back on the
 * same port and database it catches up by itself. Screenshots of each step: test-results/e2e/.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createNodeClient, type EventflowClient } from '@eventflow/node';
import { buildApp } from '@eventflow/test-support/app-build';
import { chromiumArgs, chromiumPath } from '@eventflow/test-support/chromium';
import { startTempGateway, type TempGateway } from '@eventflow/test-support/temp-gateway';
import { eventually as poll } from '@eventflow/test-support/wait';
import { startWorker, type Worker } from '../worker.js';

const demoDir = fileURLToPath(new URL('..', import.meta.url));
const screenshots = fileURLToPath(new URL('../../test-results/e2e/', import.meta.url));
const domain = 'orders';
/** Upper bound of every wait for the page; generous because CI runs other suites alongside. */
const WAIT = 30_000;

const sel = {
  connection: '[data-testid="connection-state"]',
  feedItem: '[data-testid="event-feed-item"]',
  processItem: '[data-testid="process-item"]',
  statePanel: '[data-testid="state-panel"]',
  stateJson: '[data-testid="state-json"]',
  stale: '[data-testid="stale-marker"]',
};

let dir: string;
let outDir: string;
/** The gateway serving the demo build: stopped for the outage, started again on the same port and database. */
let gateway: TempGateway | undefined;
let worker: Worker | undefined;
let client: EventflowClient | undefined;
let browser: Browser | undefined;
let page: Page;
const pageErrors: string[] = [];
/** The page's console, printed when a step fails. */
const pageLog: string[] = [];

/** Rejects when `promise` does not settle within `ms`, naming what was awaited. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Polls `check` on the page until it returns a value other than undefined, for up to WAIT ms; a
 * check that throws (the page is reloading) counts as not yet.
 */
function eventually<T>(check: () => Promise<T | undefined>, what: string): Promise<T> {
  return poll(() => check().catch(() => undefined), WAIT, what, { every: 100 });
}

async function screenshot(name: string): Promise<void> {
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true, timeout: WAIT });
}

async function connectionState(): Promise<string | null> {
  return page.locator(sel.connection).getAttribute('data-state', { timeout: WAIT });
}

/** The composed state shown in the state panel, or undefined while there is none. */
async function shownState(): Promise<Record<string, unknown> | undefined> {
  const text = await page.locator(sel.stateJson).textContent({ timeout: 1_000 });
  return text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
}

async function newestFeedPosition(): Promise<number> {
  const positions = await page.locator(sel.feedItem).evaluateAll((items) => items.map((item) => Number(item.getAttribute('data-position'))));
  return Math.max(-1, ...positions);
}

/** In the page: whether a database of the dashboard's cache holds a record mentioning `pid`. */
async function cachedInIndexedDb(pid: string): Promise<boolean> {
  const request = <T,>(r: IDBRequest<T>) => new Promise<T>((resolve, reject) => ((r.onsuccess = () => resolve(r.result)), (r.onerror = () => reject(r.error))));
  for (const { name } of await indexedDB.databases()) {
    if (!name?.startsWith('eventflow-demo')) continue;
    const db = await request(indexedDB.open(name));
    try {
      for (const store of Array.from(db.objectStoreNames)) {
        const values = await request(db.transaction(store).objectStore(store).getAll());
        if (values.some((value) => JSON.stringify(value).includes(pid))) return true;
      }
    } finally {
      db.close();
    }
  }
  return false;
}

describe('demo dashboard end to end', () => {
  let selectedPid: string;
  let positionBeforeOutage: number;
  let pidsBeforeOutage: Set<string>;

  beforeAll(async () => {
    mkdirSync(screenshots, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), 'eventflow-e2e-'));
    outDir = join(dir, 'demo-dist');
    await buildApp(demoDir, outDir);

    gateway = await startTempGateway({ EVENTFLOW_DEMO_DIR: outDir }, 'eventflow-e2e-');
    const reconnect = { minDelay: 50, maxDelay: 500 };
    worker = await startWorker({ url: gateway.gateway.url, domain, intervalMs: 300, client: { reconnect } });
    client = createNodeClient(gateway.gateway.url, { reconnect, onError: () => undefined });

    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs, headless: true, timeout: WAIT });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    context.setDefaultTimeout(WAIT);
    page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    page.on('console', (message) => pageLog.push(`${message.type()}: ${message.text()}`));
    page.on('pageerror', (error) => pageLog.push(`uncaught: ${String(error)}`));
  });

  afterEach(({ task }) => {
    if (task.result?.state === 'fail' && pageLog.length > 0) console.log(`page console before "${task.name}" failed:\n${pageLog.slice(-40).join('\n')}`);
  });

  afterAll(async () => {
    const steps: Array<[string, () => Promise<unknown> | undefined]> = [
      ['browser', () => browser?.close()],
      ['worker', () => worker?.stop()],
      ['client', () => client?.close()],
      ['gateway', () => gateway?.dispose()],
    ];
    for (const [what, step] of steps) await within(Promise.resolve(step()), 15_000, `closing the ${what}`).catch((error: unknown) => console.error(error));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('connects to the gateway it was served from', async () => {
    await page.goto(gateway!.gateway.httpUrl, { waitUntil: 'load' });
    await page.locator(`${sel.connection}[data-state="open"]`).waitFor();
    expect(await page.locator(sel.connection).textContent()).toBe('open');
    // The operator console of the same gateway, one click away.
    expect(await page.getByTestId('console-link').getAttribute('href')).toBe(new URL('/console/', gateway!.gateway.httpUrl).href);
    await screenshot('01-connected');
  });

  it('shows events arriving live and the processes they belong to', async () => {
    const first = await eventually(async () => ((await page.locator(sel.feedItem).count()) >= 3 ? newestFeedPosition() : undefined), 'three events in the feed');
    // Live: the feed keeps growing without any reload.
    await eventually(async () => ((await newestFeedPosition()) > first ? true : undefined), 'a newer event in the feed');
    const names = await page.locator(sel.feedItem).evaluateAll((items) => items.map((item) => item.getAttribute('data-name')));
    expect(names).toContain('order-placed');
    expect(names.every((name) => ['order-placed', 'order-shipped', 'success', 'failed'].includes(name ?? ''))).toBe(true);
    await eventually(async () => ((await page.locator(sel.processItem).count()) >= 3 ? true : undefined), 'three processes listed');
    await screenshot('02-live-feed');
  });

  it('shows the composed state of a selected process', async () => {
    // A process the worker has shipped and completed, listed on the page.
    selectedPid = await eventually(async () => {
      const listed = new Set(await page.locator(sel.processItem).evaluateAll((items) => items.map((item) => item.getAttribute('data-pid'))));
      for (const pid of await client!.readDistinctPidByDomain(domain)) {
        if (!listed.has(pid)) continue;
        const state = await client!.readEventlogState(domain, pid);
        if (state['status'] === 'completed') return pid;
      }
      return undefined;
    }, 'a completed order in the process list');
    await page.locator(`${sel.processItem}[data-pid="${selectedPid}"] button`).click();
    await page.locator(`${sel.statePanel}[data-pid="${selectedPid}"]`).waitFor();
    const state = await eventually(async () => {
      const shown = await shownState();
      return shown?.['status'] === 'completed' ? shown : undefined;
    }, 'the completed state in the state panel');
    expect(state).toMatchObject({ shipped: true, status: 'completed' });
    expect(typeof state['item']).toBe('string');
    expect(typeof state['customer']).toBe('string');
    expect(await page.locator(sel.stale).count()).toBe(0);
    expect(new URL(page.url()).searchParams.get('pid')).toBe(selectedPid);
    await screenshot('03-process-state');
  });

  it('opens from its caches with the gateway down, marked stale', async () => {
    // The app shell is cached by the service worker once it is active.
    const cached = await within(
      page.evaluate(async () => {
        const registration = await navigator.serviceWorker.ready;
        const names = await caches.keys();
        const shell = await Promise.all(names.map(async (name) => (await caches.open(name)).match(new URL('index.html', registration.scope).href)));
        return { active: registration.active?.state, cached: shell.some((response) => response !== undefined) };
      }),
      WAIT,
      'the service worker to be ready',
    );
    expect(cached).toEqual({ active: 'activated', cached: true });
    // The browser client writes the watched eventlog to IndexedDB asynchronously: wait for it.
    await eventually(() => page.evaluate(cachedInIndexedDb, selectedPid).then((found) => found || undefined), 'the state to be cached in IndexedDB');
    positionBeforeOutage = await newestFeedPosition();
    pidsBeforeOutage = new Set(await client!.readDistinctPidByDomain(domain));

    await gateway!.stop();
    await eventually(async () => ((await connectionState()) !== 'open' ? true : undefined), 'the page to notice the gateway is gone');

    await page.reload({ waitUntil: 'load' });
    expect(await page.evaluate(() => navigator.serviceWorker.controller !== null)).toBe(true);
    await page.locator(`${sel.statePanel}[data-pid="${selectedPid}"]`).waitFor();
    const state = await eventually(async () => {
      const shown = await shownState();
      return shown?.['status'] === 'completed' ? shown : undefined;
    }, 'the cached state after an offline reload');
    expect(state).toMatchObject({ shipped: true, status: 'completed' });
    await page.locator(sel.stale).waitFor();
    expect(await connectionState()).not.toBe('open');
    // The last known process list is shown too.
    expect(await page.locator(`${sel.processItem}[data-pid="${selectedPid}"]`).count()).toBe(1);
    await screenshot('04-offline-reload');
  });

  it('catches up by itself when the gateway is back on the same port and database', async () => {
    // The port the page was served from, and the same database file.
    await gateway!.start();

    await page.locator(`${sel.connection}[data-state="open"]`).waitFor();
    await page.locator(sel.stale).waitFor({ state: 'detached' });
    expect(await shownState()).toMatchObject({ shipped: true, status: 'completed' });
    // Newer events than any seen before the outage reach the feed, and new processes the list.
    await eventually(async () => ((await newestFeedPosition()) > positionBeforeOutage ? true : undefined), 'events newer than before the outage');
    await eventually(async () => {
      const listed = await page.locator(sel.processItem).evaluateAll((items) => items.map((item) => item.getAttribute('data-pid')));
      return listed.find((pid) => pid !== null && !pidsBeforeOutage.has(pid));
    }, 'a process placed after the outage in the list');
    expect(pageErrors).toEqual([]);
    await screenshot('05-caught-up');
  });

  it('runs under its Content-Security-Policy and framing headers: every step above, and no violation reported', async () => {
    const response = await page.goto(gateway!.gateway.httpUrl, { waitUntil: 'load' });
    expect(response?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await page.locator(`${sel.connection}[data-state="open"]`).waitFor();
    expect(pageLog.filter((line) => /content security policy/i.test(line))).toEqual([]);
  });
});
