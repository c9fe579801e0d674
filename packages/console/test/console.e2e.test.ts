/**
 * The console end to end: built by Vite, served by a real gateway (SQLite in a temp dir) at `/`,
 * fed by the demo worker and a consumer that throws, driven in Debian's Chromium. Each view and
 * each action: domains, processes (search, status), a process (timeline, event JSON, state as of
 * an event with its changes, current state), live with history and pause, scheduled with cancel,
 * the gateway's charts, work (consumer groups, dead letters with the last error, requeue to a healed
 * consumer, discard), publishing from the form (online, and offline through the outbox: pending,
 * then stored once the gateway is back), at 390 px wide, and with EVENTFLOW_AUTH=jwt (a token
 * without `manage` sees dead letters but no buttons; signing out deletes what was cached). Also:
 * the demo's refused orders listed as failed, the most recent first, their outcome events not
 * painted as orphans; Live after a process of the same domain opening with its history; a
 * `?gateway=` link to another server asked first, never sent the stored token. Screenshots:
 * test-results/console/.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT } from 'jose';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { createNodeClient, listDeadLetters, listDomains, listProcesses, listScheduled, readTimeline, type EventflowClient } from '@eventflow/node';
import { buildApp } from '@eventflow/test-support/app-build';
import { chromiumArgs, chromiumPath } from '@eventflow/test-support/chromium';
import { startTempGateway, type TempGateway } from '@eventflow/test-support/temp-gateway';
import { eventually as poll } from '@eventflow/test-support/wait';
import { startWorker, type Worker } from '@eventflow/demo/worker';

const consoleDir = fileURLToPath(new URL('..', import.meta.url));
const screenshots = fileURLToPath(new URL('../../../test-results/console/', import.meta.url));
const domain = 'orders';
const WAIT = 30_000;

let dir: string;
let outDir: string;
let gateway: TempGateway | undefined;
let worker: Worker | undefined;
let slowWorker: Worker | undefined;
/** How long the slow worker's handler takes per order (its `handlerMs`). */
const HANDLER_MS = 300;
/**
 * A handler time the gateway may report for HANDLER_MS of work: at least the sleep (less 1 ms of timer and clock
 * rounding), at most half more (the handler's two publishes and its settle took 125 ms once in CI, every other test
 * file running on two cores; a figure in seconds is still far outside).
 */
const nearHandler = (ms: number): boolean => ms >= HANDLER_MS - 1 && ms <= HANDLER_MS * 1.5;
const TRACE_LINK = 'http://tracing.example/trace/{traceId}';
let client: EventflowClient | undefined;
let browser: Browser | undefined;
let page: Page;
const pageLog: string[] = [];

const eventually = <T>(check: () => Promise<T | undefined>, what: string): Promise<T> => poll(() => check().catch(() => undefined), WAIT, what, { every: 100 });
const screenshot = (name: string, target: Page = page): Promise<Buffer> => target.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true, timeout: WAIT });
/** The failing consumer asks for retries with this error; after EVENTFLOW_CONSUME_MAX_ATTEMPTS its events are dead letters. */
const FAILURE = 'notification service down';
const go = async (hash: string): Promise<void> => {
  await page.evaluate((to) => (window.location.hash = to), hash);
};

describe('the console end to end', () => {
  let scheduledId: string;
  /** The failing consumer succeeds once healed: a requeued dead letter then ends in success. */
  let healed = false;

  beforeAll(async () => {
    mkdirSync(screenshots, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), 'eventflow-console-e2e-'));
    outDir = join(dir, 'console-dist');
    await buildApp(consoleDir, outDir);
    gateway = await startTempGateway(
      { EVENTFLOW_CONSOLE_DIR: outDir, EVENTFLOW_MAX_PUBLISH_RATE: 0, EVENTFLOW_CONSUME_MAX_ATTEMPTS: 2, EVENTFLOW_TRACE_LINK: TRACE_LINK },
      'eventflow-console-e2e-',
    );
    const reconnect = { minDelay: 50, maxDelay: 500 };
    worker = await startWorker({ url: gateway.gateway.url, domain, intervalMs: 200, client: { reconnect } });
    // A second demo worker whose orders take HANDLER_MS each, in a domain of its own: the Latency view.
    slowWorker = await startWorker({ url: gateway.gateway.url, domain: 'shop', intervalMs: 0, handlerMs: HANDLER_MS, client: { reconnect } });
    client = createNodeClient(gateway.gateway.url, { reconnect, onError: () => undefined });
    // The failing consumer: every `notify` fails (retry with the error) until healed; after two
    // attempts each is a dead letter, so its processes show as failed.
    await client.consume(domain, 'notify', (_event, context) => {
      if (!healed) context.retry(0, new Error(FAILURE));
    });
    for (let i = 0; i < 3; i++) await client.publish({ domain, name: 'notify', pid: `notify-${i}`, data: { attempt: i } });
    // A named group whose only member left: what is published after waits, pending, with an age.
    const archiver = createNodeClient(gateway.gateway.url, { onError: () => undefined });
    await archiver.consume(domain, 'audit', () => undefined, { group: 'archive' });
    await archiver.close();
    for (let i = 0; i < 2; i++) await client.publish({ domain, name: 'audit', pid: `audit-${i}`, data: {} });
    scheduledId = await client.schedule(Date.now() + 3_600_000, { domain, name: 'reminder', pid: 'reminder-1', data: { say: 'hello' } });
    // A process with a child process and an entity, for the associations.
    // Names the demo worker does not consume.
    const parent = await client.publish({ domain, name: 'crate-packed', pid: 'parent-1', data: { item: 'crate', status: 'packed' } });
    await client.persistChildProcessAssociation(parent, domain, 'child-1');
    await client.persistEntityAssociation(parent, 'customer-42');
    await client.publish({ domain, name: 'crate-labelled', pid: 'parent-1', data: { status: 'labelled', labelled: true } });
    await client.publish({ domain, name: 'noted', pid: 'child-1', data: { note: 'a child' } });

    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs, headless: true, timeout: WAIT });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(WAIT);
    page = await context.newPage();
    page.on('console', (message) => pageLog.push(`${message.type()}: ${message.text()}`));
    page.on('pageerror', (error) => pageLog.push(`uncaught: ${String(error)}`));
  });

  afterEach(async ({ task }) => {
    if (task.result?.state !== 'fail') return;
    console.log(`page console before "${task.name}" failed:\n${pageLog.slice(-40).join('\n')}`);
    await screenshot(`failed-${task.name.slice(0, 24).replace(/\W+/g, '-')}`).catch(() => undefined);
  });

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await worker?.stop().catch(() => undefined);
    await slowWorker?.stop().catch(() => undefined);
    await client?.close().catch(() => undefined);
    await gateway?.dispose().catch(() => undefined);
  });

  it('Domains: the readable domains with counts and last activity, served at /', async () => {
    await page.goto(gateway!.gateway.httpUrl, { waitUntil: 'load' });
    await page.locator('[data-testid="connection-state"][data-state="open"]').waitFor();
    await page.locator(`[data-testid="domain-row"][data-domain="${domain}"]`).waitFor();
    const text = await page.locator(`[data-testid="domain-row"][data-domain="${domain}"]`).textContent();
    expect(text).toMatch(/\d/);
    await screenshot('01-domains');
  });

  it('Processes: status from outcomes, search by pid prefix', async () => {
    await page.locator(`[data-testid="domain-row"][data-domain="${domain}"] th a`).click();
    await page.locator('[data-testid="process-row"]').first().waitFor();
    await page.getByLabel('Search by pid prefix').fill('notify-');
    await eventually(async () => {
      const statuses = await page.locator('[data-testid="process-row"]').evaluateAll((rows) => rows.map((row) => `${row.getAttribute('data-pid')}:${row.getAttribute('data-status')}`));
      return statuses.length === 3 && statuses.every((s) => s.endsWith(':failed')) ? statuses : undefined;
    }, 'the three notify processes, failed');
    await screenshot('02-processes-search');
    await page.getByLabel('Search by pid prefix').fill('');
    await eventually(async () => ((await page.locator('[data-testid="process-row"][data-status="completed"]').count()) > 0 ? true : undefined), 'completed processes');
    // The demo's orders that could not be shipped publish `failed`: listed as failed, not completed.
    await eventually(async () => ((await page.locator('[data-testid="process-row"][data-status="failed"]:not([data-pid^="notify-"])').count()) > 0 ? true : undefined), "the demo's failed orders");
    // The most recently active first.
    const last = await page.locator('[data-testid="process-row"] [data-label="Last event"] time').evaluateAll((times) => times.map((time) => time.getAttribute('datetime') ?? ''));
    expect(last.length).toBeGreaterThan(5);
    expect(last).toEqual([...last].sort().reverse());
    await screenshot('03-processes');
  });

  it("A process: the demo's outcome events are not orphans, a refusal reads as a failure; events numbered within the process", async () => {
    const { processes } = await listProcesses(client!, domain, { order: 'recent', limit: 200 });
    const ended = (status: string): string => {
      const found = processes.find((process) => process.status === status && process.events === (status === 'failed' ? 2 : 3) && !process.pid.startsWith('notify-'));
      if (!found) throw new Error(`no ${status} order among ${processes.map((p) => `${p.pid}:${p.status}`).join(' ')}`);
      return found.pid;
    };
    const outcome = (name: string) => page.locator(`[data-testid="timeline-row"][data-name="${name}"] [data-testid="row-outcome"]`);
    await go(`#/d/orders/p/${ended('completed')}`);
    await eventually(async () => ((await outcome('success').count()) === 1 ? true : undefined), 'the shipped order');
    expect(await outcome('order-placed').textContent()).toBe('success');
    expect(await outcome('order-shipped').textContent()).toBe('not consumed');
    expect(await outcome('success').textContent()).toBe('success reported');
    expect(await page.locator('[data-testid="timeline-row"] [data-testid="row-number"]').allTextContents()).toEqual(['#1', '#2', '#3']);
    await page.locator('[data-testid="timeline-row"][data-name="order-placed"]').click();
    expect(await page.getByTestId('claimed-by').textContent()).not.toBe('—');
    await go(`#/d/orders/p/${ended('failed')}`);
    await eventually(async () => ((await outcome('failed').count()) === 1 ? true : undefined), 'the refused order');
    expect(await outcome('failed').textContent()).toBe('failure reported');
    expect(await page.locator('[data-testid="timeline-row"][data-name="failed"] .outcome-failure-reported').count()).toBe(1);
    await screenshot('03b-process-refused');
  });

  it('A process: timeline, event JSON, the state as of an event with its changes, associations', async () => {
    await go('#/d/orders/p/parent-1');
    await eventually(async () => ((await page.locator('[data-testid="timeline-row"]').count()) === 2 ? true : undefined), 'two timeline rows');
    await page.locator('[data-testid="timeline-row"][data-index="0"]').click();
    expect(JSON.parse((await page.locator('[data-testid="event-json"]').textContent()) ?? '{}')).toMatchObject({ name: 'crate-packed', pid: 'parent-1', data: { item: 'crate' } });
    // Keyboard: the next event, whose change of `status` is highlighted.
    await page.locator('[data-testid="timeline"]').press('ArrowDown');
    await eventually(async () => ((await page.locator('[data-testid="event-json"]').textContent())?.includes('crate-labelled') ? true : undefined), 'the second event selected');
    const changed = await page.locator('[data-testid="state-as-of"] li[data-change="changed"]').allTextContents();
    expect(changed.join(' ')).toContain('status');
    expect(await page.locator('[data-testid="state-as-of"] li[data-change="added"]').allTextContents()).toEqual([expect.stringContaining('labelled')]);
    expect(JSON.parse((await page.locator('[data-testid="current-state"]').textContent()) ?? '{}')).toMatchObject({ status: 'labelled', item: 'crate' });
    await page.locator('[data-testid="associations"]').getByRole('link', { name: /child-1/ }).waitFor();
    expect(await page.locator('[data-testid="associations"]').textContent()).toContain('customer-42');
    await screenshot('04-process');
    await page.locator('[data-testid="associations"]').getByRole('link', { name: /child-1/ }).click();
    await eventually(async () => ((await page.locator('[data-testid="timeline-row"][data-name="noted"]').count()) === 1 ? true : undefined), 'the child process');
  });

  it('Live after a process of the same domain: opens with its history (the shared subscription replays for it)', async () => {
    // The demo worker publishes the domain's events as time passes: at least the feed's 50 stored
    // (and one scheduled) before the feed opens, however fast the tests before this one ran.
    await eventually(async () => (((await listDomains(client!)).domains.find((d) => d.domain === domain)?.events ?? 0) >= 51 ? true : undefined), 'the domain holds 50 published events');
    await go('#/d/orders/p/parent-1');
    await page.locator('[data-testid="current-state"]').waitFor();
    // Seen by the process view's watch, on the client's one (orders, *) subscription, before Live joins it.
    await client!.publish({ domain, name: 'marked', pid: 'parent-1', data: { marked: true } });
    await eventually(async () => ((await page.locator('[data-testid="current-state"]').textContent())?.includes('"marked": true') ? true : undefined), 'the marker in the watch');
    await go('#/live/orders');
    await page.locator('[data-testid="feed-item"][data-name="marked"][data-pid="parent-1"]').waitFor({ timeout: 10_000 });
    expect(await page.locator('[data-testid="feed-item"]').count()).toBeGreaterThanOrEqual(50);
  });

  it('Live: opens with recent history, filters by name, pauses', async () => {
    await go('#/live/orders');
    await eventually(async () => ((await page.locator('[data-testid="feed-item"]').count()) >= 10 ? true : undefined), 'history in the feed at once');
    await page.getByTestId('filter-name').fill('order-shipped');
    await eventually(async () => {
      const names = await page.locator('[data-testid="feed-item"]').evaluateAll((items) => items.map((item) => item.getAttribute('data-name')));
      return names.length > 0 && names.every((name) => name === 'order-shipped') ? true : undefined;
    }, 'only order-shipped');
    await page.getByTestId('filter-name').fill('');
    await page.getByTestId('pause').click();
    const frozen = await page.locator('[data-testid="feed-item"]').count();
    await eventually(async () => ((await page.getByTestId('pause').textContent())?.includes('new') ? true : undefined), 'new events waiting while paused');
    expect(await page.locator('[data-testid="feed-item"]').count()).toBe(frozen);
    await screenshot('05-live-paused');
    await page.getByTestId('pause').click();
  });

  it('Scheduled: lists the reminder and cancels it', async () => {
    await go('#/scheduled');
    await page.locator(`[data-testid="scheduled-row"][data-id="${scheduledId}"]`).waitFor();
    await screenshot('06-scheduled');
    await page.locator(`[data-testid="scheduled-row"][data-id="${scheduledId}"] [data-testid="cancel"]`).click();
    await page.locator(`[data-testid="scheduled-row"][data-id="${scheduledId}"]`).waitFor({ state: 'detached' });
    expect(await page.getByTestId('scheduled-message').textContent()).toContain('Cancelled');
    expect((await listScheduled(client!)).scheduled.map((s) => s.id)).not.toContain(scheduledId);
    await screenshot('07-scheduled-cancelled');
  });

  it('Work: the failing consumer\'s group with its dead letters and the last error', async () => {
    await go('#/work');
    const group = page.locator(`[data-testid="group-row"][data-domain="${domain}"][data-name="notify"][data-group=""]`);
    await eventually(async () => ((await group.getAttribute('data-dead-letters')) === '3' ? true : undefined), 'the notify group with three dead letters');
    expect(await page.locator(`[data-testid="group-row"][data-domain="${domain}"][data-name="order-placed"]`).count()).toBe(1);
    const rows = page.locator('[data-testid="dead-letter-row"]');
    expect((await rows.evaluateAll((list) => list.map((row) => row.getAttribute('data-pid')))).sort()).toEqual(['notify-0', 'notify-1', 'notify-2']);
    expect(await page.locator('[data-testid="dead-letter-row"][data-pid="notify-0"] [data-testid="last-error"]').textContent()).toBe(FAILURE);
    expect(await page.locator('[data-testid="dead-letter-row"][data-pid="notify-0"] [data-testid="attempts"]').textContent()).toBe('2');
    await page.locator('[data-testid="dead-letter-row"][data-pid="notify-0"]').getByRole('link', { name: /notify-0/ }).waitFor();
    const archive = page.locator(`[data-testid="group-row"][data-name="audit"][data-group="archive"]`);
    expect(await archive.locator('[data-label="Members here"]').textContent()).toBe('0');
    expect(await archive.locator('[data-label="Pending"]').textContent()).toBe('2');
    expect(await archive.locator('[data-label="Oldest pending"]').textContent()).toMatch(/^\d+ (s|min) ago$/);
    await screenshot('16-work');
    // The dead letter's process: the timeline row counts its attempts, the event its group's delivery.
    await go('#/d/orders/p/notify-2');
    const attempts = page.locator('[data-testid="timeline-row"][data-name="notify"] [data-testid="row-attempts"]');
    await eventually(async () => ((await attempts.count()) === 1 ? true : undefined), 'the attempts of notify-2');
    expect(await attempts.textContent()).toBe('×2');
    expect(await attempts.getAttribute('aria-label')).toBe('2 attempts');
    await page.locator('[data-testid="timeline-row"][data-name="notify"]').click();
    expect(await page.locator('[data-testid="event-deliveries"] li[data-group=""]').textContent()).toBe(`default group: dead after 2 attempts — ${FAILURE}`);
    await screenshot('16b-process-attempts');
    await go('#/work');
    await page.locator('[data-testid="dead-letter-row"][data-pid="notify-0"]').waitFor();
  });

  it('Work: requeue a dead letter to the healed consumer (confirmed, keyboard), and the process succeeds; discard another', async () => {
    healed = true;
    const row = (pid: string) => page.locator(`[data-testid="dead-letter-row"][data-pid="${pid}"]`);
    // Keyboard: the Requeue button, then Enter on the confirmation (it takes the focus).
    await row('notify-0').getByRole('button', { name: 'Requeue notify of orders › notify-0' }).focus();
    await page.keyboard.press('Enter');
    await row('notify-0').getByTestId('confirm').waitFor();
    expect(await page.evaluate(() => document.activeElement?.getAttribute('data-testid'))).toBe('confirm');
    await screenshot('17-work-confirm');
    await page.keyboard.press('Enter');
    await row('notify-0').waitFor({ state: 'detached' });
    expect(await page.getByTestId('work-message').textContent()).toContain('Requeued notify of orders › notify-0');
    await eventually(async () => {
      const { fates } = await readTimeline(client!, domain, 'notify-0');
      return fates.some((fate) => fate.success !== undefined && fate.deadLetter === undefined) ? true : undefined;
    }, 'the requeued event consumed with success');
    // Escape keeps a dead letter; Discard drops one (the event stays failed).
    await row('notify-1').getByTestId('discard').click();
    await page.keyboard.press('Escape');
    await row('notify-1').getByTestId('requeue').waitFor();
    await row('notify-1').getByTestId('discard').click();
    await row('notify-1').getByTestId('confirm').click();
    await row('notify-1').waitFor({ state: 'detached' });
    expect(await page.getByTestId('work-message').textContent()).toContain('Discarded notify of orders › notify-1');
    expect((await listDeadLetters(client!, { domain })).map((letter) => letter.pid)).toEqual(['notify-2']);
    await eventually(async () => ((await page.locator(`[data-testid="group-row"][data-name="notify"]`).getAttribute('data-dead-letters')) === '1' ? true : undefined), 'the group counting one dead letter');
    await screenshot('18-work-after');
    // The process view, from the dead letter's link: the requeued event's outcome is success.
    await go('#/d/orders/p/notify-0');
    await eventually(async () => ((await page.locator('[data-testid="timeline-row"][data-name="notify"] .outcome').textContent()) === 'success' ? true : undefined), 'notify-0 shown with success');
    await screenshot('19-work-requeued-process');
    await go('#/d/orders');
    await page.getByLabel('Search by pid prefix').fill('notify-');
    await eventually(async () => {
      const statuses = await page.locator('[data-testid="process-row"]').evaluateAll((list) => list.map((r) => `${r.getAttribute('data-pid')}:${r.getAttribute('data-status')}`));
      return statuses.sort().join(' ') === 'notify-0:completed notify-1:failed notify-2:failed' ? true : undefined;
    }, 'notify-0 completed, the others failed');
    await page.getByLabel('Search by pid prefix').fill('');
  });

  it('Gateway: live figures and readiness', async () => {
    await go('#/gateway');
    await page.locator('[data-testid="readiness"][data-ready="true"]').waitFor();
    await eventually(async () => {
      const value = await page.locator('[data-testid="stat-published"] .stat-value').textContent();
      return Number(value) > 0 ? true : undefined;
    }, 'a published rate above 0 (the worker publishes)');
    expect(Number(await page.locator('[data-testid="stat-connections"] .stat-value').textContent())).toBeGreaterThanOrEqual(3);
    await screenshot('08-gateway');
  });

  it('Latency: p50/p99 of queue, handler and end-to-end time match the handler\'s known time, the slowest processes open their timelines with durations and the trace link', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const pids: string[] = [];
    for (let i = 0; i < 4; i++) {
      pids.push(`slow-${i}`);
      await client!.publish({ domain: 'shop', name: 'order-placed', pid: `slow-${i}`, data: { sequence: i + 1, item: 'lamp' } }, { traceparent: `00-${traceId}-b7ad6b716920333${i}-01` });
    }
    await eventually(async () => ((await client!.readEventlog('shop', 'slow-3')).some((event) => String(event.name) === 'success') ? true : undefined), 'the slow orders shipped');
    await go('#/latency?domain=shop&name=order-placed&window=300000');
    await page.locator('[data-testid="latency-figures"]').waitFor();
    await eventually(async () => ((await page.locator('[data-testid="latency-count"]').textContent())?.startsWith('4 ') ? true : undefined), 'four settled deliveries');
    const rows = await page.locator('[data-testid="latency-row"]').evaluateAll((list) => list.map((row) => [...row.querySelectorAll('th, td')].map((cell) => cell.textContent ?? '')));
    const ms = (text: string): number => (text.endsWith(' ms') ? Number(text.slice(0, -3)) : text.endsWith(' s') ? Number(text.slice(0, -2)) * 1000 : NaN);
    const [queue, handler, total] = rows;
    // Handler time is the handler's sleep plus its two publishes and the settle: never under the
    // sleep, and over it by no more than those round trips take on a loaded two-core CI machine (they
    // have taken 34–125 ms there while every other test file ran; a figure in seconds is still far outside).
    for (const cell of handler!.slice(1)) expect(ms(cell), `handler ${cell}`).toSatisfy(nearHandler);
    // Nothing waited for a consumer; end to end is queue + handler, so within the same bounds.
    expect(ms(queue![1]!)).toBeLessThan(HANDLER_MS * 0.1);
    expect(ms(total![1]!), `end to end ${total![1]!}`).toSatisfy(nearHandler);
    const slow = page.locator('[data-testid="latency-slow"]');
    expect(await slow.count()).toBe(4);
    expect((await slow.evaluateAll((list) => list.map((row) => row.getAttribute('data-pid')))).sort()).toEqual(pids);
    await screenshot('10-latency');
    // One click: the slowest process's timeline, its order's row and facts with the same durations and the trace link.
    const slowest = await slow.first().getAttribute('data-pid');
    await slow.first().locator('th a').click();
    await page.locator('h1#process-title', { hasText: slowest ?? '' }).waitFor();
    const orderRow = page.locator('[data-testid="timeline-row"][data-name="order-placed"]');
    await orderRow.waitFor();
    const handlerMs = Number(await orderRow.locator('[data-testid="row-timing"]').getAttribute('data-handler-ms'));
    expect(handlerMs).toSatisfy(nearHandler);
    await orderRow.click();
    const link = page.locator('[data-testid="trace-link"]');
    expect(await link.textContent()).toBe(traceId);
    expect(await link.getAttribute('href')).toBe(TRACE_LINK.replace('{traceId}', traceId));
    const timing = await page.locator('[data-testid="event-timings"] li').first().textContent();
    expect(timing).toMatch(/stored → delivered \d+ ms → settled \d+ ms/);
    await screenshot('11-process-timing');
  });

  it('Publish: validates the JSON, publishes, and the event is stored', async () => {
    await go('#/publish?domain=orders&pid=form-1');
    // Nothing typed yet: a hint, not an error.
    await page.getByTestId('publish-problem').waitFor();
    expect(await page.getByTestId('publish-problem').getAttribute('class')).toBe('muted');
    expect(await page.getByTestId('publish-submit').isDisabled()).toBe(true);
    await page.getByLabel('Event name').fill('note-added');
    await page.getByLabel('Data (a JSON object)').fill('{"note": ');
    await eventually(async () => ((await page.getByTestId('publish-problem').textContent())?.includes('not valid JSON') ? true : undefined), 'the JSON error');
    expect(await page.getByTestId('publish-submit').isDisabled()).toBe(true);
    await page.getByLabel('Data (a JSON object)').fill('{"note": "from the console"}');
    await page.getByTestId('publish-submit').click();
    await eventually(async () => {
      const log = await client!.readEventlog(domain, 'form-1');
      return log.length === 1 ? log : undefined;
    }, 'the published event stored');
    await page.getByTestId('outbox-empty').waitFor();
    await screenshot('09-published');
  });

  it('Offline: shows what it cached, marked stale; a publish waits in the outbox, pending, and is stored once the gateway is back', async () => {
    await go('#/d/orders');
    await page.locator('[data-testid="process-row"]').first().waitFor();
    await gateway!.stop();
    await page.locator('[data-testid="connection-state"]:not([data-state="open"])').waitFor();
    await go('#/');
    await page.locator('[data-testid="stale-marker"]').waitFor();
    await page.locator(`[data-testid="domain-row"][data-domain="${domain}"]`).waitFor();
    await screenshot('10-offline-stale');
    await go('#/publish?domain=orders&pid=offline-1');
    await page.getByLabel('Event name').fill('note-added');
    await page.getByLabel('Data (a JSON object)').fill('{"note": "offline"}');
    await page.getByTestId('publish-submit').click();
    await page.locator('[data-testid="outbox-entry"]').waitFor();
    await screenshot('11-offline-pending');
    await gateway!.start();
    await page.locator('[data-testid="connection-state"][data-state="open"]').waitFor();
    await page.getByTestId('outbox-empty').waitFor();
    await client!.ready();
    expect((await client!.readEventlog(domain, 'offline-1')).map((e) => e.name)).toEqual(['note-added']);
  });

  it('?gateway= another server: asks first (nothing is sent there), uses its own gateway if told so, and after a confirmation connects without the stored token', async () => {
    const hellos: Array<Record<string, unknown>> = [];
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    server.on('connection', (socket) => socket.on('message', (data) => hellos.push(JSON.parse(String(data)) as Record<string, unknown>)));
    await new Promise((resolve) => server.once('listening', resolve));
    const other = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const tab = await browser!.newPage({ viewport: { width: 1280, height: 800 } });
    try {
      const own = `ws://${new URL(gateway!.gateway.httpUrl).host}/`;
      // A token this tab keeps for its own gateway: it must never reach the other server.
      await tab.goto(gateway!.gateway.httpUrl, { waitUntil: 'load' });
      await tab.evaluate((key) => sessionStorage.setItem(key, 'secret-token-of-this-gateway'), `eventflow-console:token:${own}`);
      await tab.goto(`${gateway!.gateway.httpUrl}?gateway=${encodeURIComponent(other)}#/`, { waitUntil: 'load' });
      expect(await tab.getByTestId('gateway-target').textContent()).toBe(other);
      await screenshot('22-gateway-confirm', tab);
      // This console's own gateway instead: connected, and the address no longer names the other.
      await tab.getByTestId('gateway-own').click();
      await tab.locator('[data-testid="connection-state"]').waitFor();
      expect(new URL(tab.url()).search).toBe('');
      expect(hellos).toEqual([]);
      // Confirmed: connected there, without the token kept for the other gateway; remembered on reload.
      await tab.goto(`${gateway!.gateway.httpUrl}?gateway=${encodeURIComponent(other)}#/`, { waitUntil: 'load' });
      await tab.getByTestId('gateway-confirm').click();
      await poll(async () => (hellos.length > 0 ? true : undefined), WAIT, 'a hello at the other server');
      expect(hellos[0]).toMatchObject({ type: 'hello' });
      expect(hellos[0]?.token).toBeUndefined();
      expect(await tab.getByTestId('gateway-url').textContent()).toContain(other);
      await tab.reload({ waitUntil: 'load' });
      await tab.getByTestId('gateway-url').waitFor();
      expect(await tab.getByTestId('gateway-confirm').count()).toBe(0);
      // A link whose target is not a WebSocket URL is refused outright.
      await tab.goto(`${gateway!.gateway.httpUrl}?gateway=${encodeURIComponent('javascript:alert(1)')}#/`, { waitUntil: 'load' });
      expect(await tab.getByTestId('gateway-problem').textContent()).toContain('not a ws:// or wss:// URL');
    } finally {
      await tab.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('is readable at 390 px wide', async () => {
    const narrow = await browser!.newPage({ viewport: { width: 390, height: 844 } });
    await narrow.goto(`${gateway!.gateway.httpUrl}#/d/orders/p/parent-1`, { waitUntil: 'load' });
    await narrow.locator('[data-testid="timeline-row"]').first().waitFor();
    const overflow = await narrow.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot('12-narrow-process', narrow);
    await narrow.goto(`${gateway!.gateway.httpUrl}#/d/orders`, { waitUntil: 'load' });
    await narrow.locator('[data-testid="process-row"]').first().waitFor();
    expect(await narrow.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(0);
    await screenshot('13-narrow-processes', narrow);
    await narrow.goto(`${gateway!.gateway.httpUrl}#/work`, { waitUntil: 'load' });
    await narrow.locator('[data-testid="dead-letter-row"]').first().waitFor();
    expect(await narrow.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(0);
    await screenshot('20-narrow-work', narrow);
    await narrow.close();
  });

  it('runs under its Content-Security-Policy and framing headers: every view above, and no violation reported', async () => {
    const response = await page.goto(gateway!.gateway.httpUrl, { waitUntil: 'load' });
    expect(response?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(response?.headers()['x-frame-options']).toBe('DENY');
    await page.locator('[data-testid="connection-state"][data-state="open"]').waitFor();
    expect(pageLog.filter((line) => /content security policy/i.test(line))).toEqual([]);
  });
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the console with EVENTFLOW_AUTH=jwt', () => {
  const SECRET = 'console-e2e-secret-0123456789-abcdefghijklmnop';
  let jwtGateway: TempGateway | undefined;
  let jwtBrowser: Browser | undefined;
  afterAll(async () => {
    await jwtBrowser?.close().catch(() => undefined);
    await jwtGateway?.dispose().catch(() => undefined);
  });

  it('asks for a token, keeps it for the tab, and shows only what it allows', async () => {
    jwtGateway = await startTempGateway({ EVENTFLOW_CONSOLE_DIR: outDir, EVENTFLOW_AUTH: 'jwt', EVENTFLOW_JWT_SECRET: SECRET, EVENTFLOW_CONSUME_MAX_ATTEMPTS: 1 }, 'eventflow-console-jwt-');
    const sign = (claims: Record<string, string[]>): Promise<string> =>
      new SignJWT({ eventflow: claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));
    const admin = createNodeClient(jwtGateway.gateway.url, { token: await sign({ publish: ['*'], consume: ['*'] }), onError: () => undefined });
    // A dead letter in orders (one attempt, retried): for the Work view's rights below.
    await admin.consume('orders', 'mail', (_event, context) => context.retry(0, new Error('smtp down')));
    await admin.publish({ domain: 'orders', name: 'placed', pid: 'o-1', data: {} });
    await admin.publish({ domain: 'orders', name: 'mail', pid: 'o-1', data: {} });
    await admin.publish({ domain: 'billing', name: 'charged', pid: 'b-1', data: {} });
    await eventually(async () => ((await listDeadLetters(admin)).length === 1 ? true : undefined), 'the mail dead letter');
    await admin.close();
    jwtBrowser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs, headless: true, timeout: WAIT });
    const tab = await jwtBrowser.newPage({ viewport: { width: 1280, height: 800 } });
    tab.setDefaultTimeout(WAIT);
    await tab.goto(jwtGateway.gateway.httpUrl, { waitUntil: 'load' });
    await tab.getByTestId('token-input').waitFor();
    await screenshot('14-jwt-sign-in', tab);
    await tab.getByTestId('token-input').fill(await sign({ read: ['orders'], subscribe: ['orders'] }));
    await tab.getByTestId('token-submit').click();
    await tab.locator('[data-testid="domain-row"][data-domain="orders"]').waitFor();
    expect(await tab.locator('[data-testid="domain-row"]').count()).toBe(1);
    expect(await tab.getByTestId('nav-publish').count()).toBe(0);
    expect(await tab.getByTestId('nav-work').count()).toBe(0);
    const own = `ws://${new URL(jwtGateway.gateway.httpUrl).host}/`;
    expect(await tab.evaluate((key) => sessionStorage.getItem(key), `eventflow-console:token:${own}`)).toMatch(/^ey/);
    await screenshot('15-jwt-read-only', tab);

    // Work: a token that may consume but not manage sees the dead letter and no Requeue / Discard.
    const signIn = async (claims: Record<string, string[]>): Promise<void> => {
      await tab.evaluate(() => (window.location.hash = '#/'));
      await tab.getByRole('button', { name: 'Token' }).click();
      await tab.getByTestId('token-input').fill(await sign(claims));
      await tab.getByTestId('token-submit').click();
      await tab.locator('[data-testid="domain-row"][data-domain="orders"]').waitFor();
    };
    await signIn({ read: ['orders'], consume: ['orders'] });
    await tab.getByTestId('nav-work').click();
    await tab.locator('[data-testid="dead-letter-row"][data-pid="o-1"] [data-testid="last-error"]').filter({ hasText: 'smtp down' }).waitFor();
    expect(await tab.locator('[data-testid="dead-letter-row"] button').count()).toBe(0);
    expect(await tab.getByTestId('no-manage').textContent()).toContain('manage');
    await screenshot('21-jwt-work-no-manage', tab);
    // The same with `manage`: the buttons are there.
    await signIn({ read: ['orders'], consume: ['orders'], manage: ['orders'] });
    await tab.evaluate(() => (window.location.hash = '#/work'));
    await tab.locator('[data-testid="dead-letter-row"][data-pid="o-1"] [data-testid="requeue"]').waitFor();
    expect(await tab.getByTestId('no-manage').count()).toBe(0);

    // Sign out: what the console cached for this token (view answers, IndexedDB) is gone, and the
    // next person at this browser sees none of it, offline included.
    await tab.evaluate(() => (window.location.hash = '#/'));
    await tab.locator('[data-testid="domain-row"][data-domain="orders"]').waitFor();
    const stored = (): Promise<{ answers: string[]; databases: string[] }> =>
      tab.evaluate(async () => ({
        answers: Object.keys(localStorage).filter((key) => key.startsWith('eventflow-console:q:')),
        databases: (await indexedDB.databases()).map((db) => db.name ?? '').filter((name) => name.startsWith('eventflow-console ')),
      }));
    const before = await stored();
    expect(before.answers.length).toBeGreaterThan(0);
    expect(before.databases.length).toBeGreaterThan(0);
    // Offline, so that nothing but a cache could show a domain.
    await jwtGateway.stop();
    await tab.locator('[data-testid="connection-state"]:not([data-state="open"])').waitFor();
    await tab.getByRole('button', { name: 'Token' }).click();
    await tab.getByRole('button', { name: 'Sign out' }).click();
    await poll(async () => {
      const after = await stored();
      return after.answers.every((key) => !before.answers.includes(key)) && after.databases.every((name) => !before.databases.includes(name)) ? true : undefined;
    }, WAIT, 'the signed-out caches deleted');
    // The domains view of the signed-out console: its read fails (offline), and nothing cached is shown.
    await tab.locator('main [role="alert"]').waitFor();
    expect(await tab.locator('[data-testid="domain-row"]').count()).toBe(0);
    await screenshot('23-jwt-signed-out', tab);
  });
});
