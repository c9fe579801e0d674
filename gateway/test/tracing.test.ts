/**
 * One trace from a browser click to a worker and back (README › Tracing), on both stores: a page in
 * Debian's Chromium with OpenTelemetry's web SDK registered calls request(); the gateway (the bin,
 * a child process, its SDK registered by OTEL_* variables) stores and routes the event; a Node
 * worker (this process, Node SDK registered) consumes it and publishes the outcome; request()
 * resolves. Every exporter sends OTLP/HTTP (JSON) to a receiver in this test, which decodes what
 * they send. Every span is in the click's trace, with the parents README › Tracing describes.
 * Without an SDK registered (the page's and this process's, before they register one) no event
 * carries a trace context.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { createNodeClient, type EventflowClient, type StoredEvent } from '@eventflow/node';
import { chromiumArgs, chromiumPath } from '@eventflow/test-support/chromium';
import { buildOnce, freePort, killAllChildren, repoRoot, startGatewayProcess, stop, type SpawnedProcess } from '@eventflow/test-support/gateway-process';
import { mysqlUnavailable, useTestDatabases } from '@eventflow/test-support/mysql';
import { eventually } from '@eventflow/test-support/wait';

/** A span as the receiver decoded it (OTLP/JSON: ids in hex). */
interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  start: number;
  end: number;
  attributes: Record<string, unknown>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };
type OtlpSpan = { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; startTimeUnixNano: string; endTimeUnixNano: string; attributes?: KeyValue[] };
type OtlpRequest = { resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: OtlpSpan[] }> }> };

const valueOf = (value: AnyValue): unknown => value.stringValue ?? (value.intValue === undefined ? undefined : Number(value.intValue)) ?? value.boolValue ?? value.doubleValue;
const attributesOf = (list: KeyValue[] = []): Record<string, unknown> => Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));

const spans: ReceivedSpan[] = [];
let pageBundle = '';
let receiver: Server;
let receiverUrl = '';

/** The OTLP/HTTP receiver (POST /v1/traces, JSON as the official exporters send it) and the page (same origin: no CORS). */
function receive(request: IncomingMessage, body: string): { status: number; type?: string; body?: string } {
  if (request.method === 'POST' && request.url === '/v1/traces') {
    const decoded = JSON.parse(body) as OtlpRequest;
    for (const resource of decoded.resourceSpans ?? []) {
      const service = String(attributesOf(resource.resource?.attributes)['service.name']);
      for (const scope of resource.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) {
          spans.push({
            service,
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId ?? '',
            name: span.name,
            kind: span.kind,
            start: Number(BigInt(span.startTimeUnixNano) / 1000n) / 1000,
            end: Number(BigInt(span.endTimeUnixNano) / 1000n) / 1000,
            attributes: attributesOf(span.attributes),
          });
        }
      }
    }
    return { status: 200, type: 'application/json', body: '{}' };
  }
  if (request.url === '/') return { status: 200, type: 'text/html', body: '<!doctype html><script type="module" src="/page.js"></script>' };
  if (request.url === '/page.js') return { status: 200, type: 'text/javascript', body: pageBundle };
  return { status: 404 };
}

/**
 * The page: the browser client with `waiting` and `tracing`, and the web SDK, registered only when
 * the test asks (window.registerSdk), exporting each span as it ends.
 */
const PAGE = `
import { trace } from '@opentelemetry/api';
import { WebTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-web';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { createBrowserClient } from '@eventflow/browser';
import { waiting } from '@eventflow/browser/work';
import { tracing } from '@eventflow/browser/tracing';

window.registerSdk = () => {
  const provider = new WebTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'browser' }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: location.origin + '/v1/traces' }))],
  });
  provider.register();
};
const client = (url) => createBrowserClient(url, { features: [waiting], tracing, cache: false });
window.publishPlain = async (url, pid) => {
  const c = client(url);
  try { return await c.publish({ domain: 'orders', name: 'noted', pid }); } finally { await c.close(); }
};
window.click = async (url, pid) => {
  const c = client(url);
  await c.ready();
  const tracer = trace.getTracer('page');
  return tracer.startActiveSpan('click', async (span) => {
    try {
      const outcome = await c.request({ domain: 'orders', name: 'placed', pid, data: { amount: 3 } });
      return { outcome, traceId: span.spanContext().traceId, click: span.spanContext().spanId };
    } finally {
      span.end();
      await c.close();
    }
  });
};
`;

describe('tracing: a browser click through the gateway to a worker and back, in one trace', () => {
  const databases = useTestDatabases();
  let dir: string;
  let browser: Browser;
  let page: Page;
  let provider: NodeTracerProvider | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'eventflow-tracing-'));
    const bundled = await build({
      stdin: { contents: PAGE, resolveDir: join(repoRoot, 'gateway/test'), loader: 'js' },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      conditions: ['source'],
      write: false,
      logLevel: 'silent',
    });
    pageBundle = bundled.outputFiles[0]?.text ?? '';
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        const answer = receive(request, body);
        response.writeHead(answer.status, answer.type ? { 'content-type': answer.type } : {});
        response.end(answer.body ?? '');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
    page = await browser.newPage();
    await page.goto(`${receiverUrl}/`);
    await page.waitForFunction(() => typeof (window as unknown as { click?: unknown }).click === 'function');
    await buildOnce();
  }, 120_000);

  afterAll(async () => {
    await provider?.shutdown();
    await browser?.close();
    await killAllChildren();
    await new Promise((resolve) => receiver?.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  /** The gateway (the bin) on `store`, its SDK asked for by the standard variables. */
  async function gateway(store: 'sqlite' | 'mysql'): Promise<{ url: string; proc: SpawnedProcess }> {
    const port = await freePort();
    const mysql = store === 'mysql' ? (await databases.fresh()).options : undefined;
    const proc = await startGatewayProcess(port, join(dir, `${store}.db`), {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
      OTEL_SERVICE_NAME: 'eventflow-gateway',
      OTEL_BSP_SCHEDULE_DELAY: 50,
      ...(mysql
        ? { EVENTFLOW_STORE: 'mysql', EVENTFLOW_MYSQL_HOST: mysql.host, EVENTFLOW_MYSQL_PORT: mysql.port, EVENTFLOW_MYSQL_USER: mysql.user, EVENTFLOW_MYSQL_PASSWORD: mysql.password, EVENTFLOW_MYSQL_DATABASE: mysql.database }
        : {}),
    });
    return { url: `ws://127.0.0.1:${port}/`, proc };
  }

  it('without an SDK registered, no event carries a trace context (browser with the tracing option, Node client)', async () => {
    const { url, proc } = await gateway('sqlite');
    const node = createNodeClient(url, { onError: () => undefined });
    try {
      const fromNode = await node.publish({ domain: 'orders', name: 'noted', pid: 'plain-node' });
      const fromBrowser = await page.evaluate(([target, pid]) => (window as unknown as { publishPlain(url: string, pid: string): Promise<string> }).publishPlain(target, pid), [url, 'plain-browser'] as const);
      for (const id of [fromNode, fromBrowser]) {
        const stored = await node.read(id);
        expect(stored.id).toBe(id);
        expect('traceparent' in stored || 'tracestate' in stored).toBe(false);
      }
    } finally {
      await node.close();
      await stop(proc.proc);
    }
    // The gateway's SDK had no parent for them: its own spans only, each a root of a trace of its own.
    expect(spans.filter((span) => span.service !== 'eventflow-gateway')).toEqual([]);
  });

  it.each(['sqlite', ...(mysqlUnavailable === undefined ? ['mysql' as const] : [])] as const)('%s: every span of request() is in the click\'s trace, with the right parents', async (store) => {
    if (!provider) {
      provider = new NodeTracerProvider({
        resource: resourceFromAttributes({ 'service.name': 'worker' }),
        spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `${receiverUrl}/v1/traces` }))],
      });
      provider.register();
      await page.evaluate(() => (window as unknown as { registerSdk(): void }).registerSdk());
    }
    spans.length = 0;
    const { url, proc } = await gateway(store);
    const worker: EventflowClient = createNodeClient(url, { onError: () => undefined });
    try {
      await worker.consume('orders', 'placed', async (event) => {
        await worker.publish({ domain: 'orders', name: 'success', pid: event.pid, rid: event.id, data: { ok: true } });
      });
      const pid = `traced-${store}`;
      const { outcome, traceId, click } = await page.evaluate(
        ([target, p]) => (window as unknown as { click(url: string, pid: string): Promise<{ outcome: StoredEvent; traceId: string; click: string }> }).click(target, p),
        [url, pid] as const,
      );
      expect(outcome).toMatchObject({ domain: 'orders', name: 'success', pid });
      const [request] = await worker.readEventlog('orders', pid);
      const requestSpanId = request?.traceparent?.slice(36, 52);
      // Browser: click, request; gateway: two writes with their steps, a delivery; worker: consume, publish.
      const find = (service: string, name: string, parent?: string): ReceivedSpan[] => spans.filter((span) => span.service === service && span.name === name && (parent === undefined || span.parentSpanId === parent));
      const tree = await eventually(
        () => {
          const requestSpan = find('browser', 'request orders', click)[0];
          const consume = find('worker', 'consume orders', requestSpan?.spanId)[0];
          const outcomePublish = find('worker', 'publish orders', consume?.spanId)[0];
          const writes = [find('eventflow-gateway', 'publish orders', requestSpan?.spanId)[0], find('eventflow-gateway', 'publish orders', outcomePublish?.spanId)[0]];
          const deliver = find('eventflow-gateway', 'deliver orders', requestSpan?.spanId)[0];
          const steps = writes.map((write) => ['validate', 'store', 'route'].map((name) => find('eventflow-gateway', name, write?.spanId)[0]));
          const all = [requestSpan, consume, outcomePublish, ...writes, deliver, ...steps.flat()];
          return all.every(Boolean) ? { requestSpan, consume, outcomePublish, writes, deliver, steps } : undefined;
        },
        15_000,
        'every span exported',
      );
      // The request event carries the browser's request span; the outcome, the worker's publish.
      expect(requestSpanId).toBe(tree.requestSpan?.spanId);
      expect(request?.traceparent?.slice(3, 35)).toBe(traceId);
      const [, outcomeEvent] = await worker.readEventlog('orders', pid);
      expect(outcomeEvent?.traceparent?.slice(36, 52)).toBe(tree.outcomePublish?.spanId);
      // One trace: the click's, every service's spans in it.
      const traced = spans.filter((span) => span.traceId === traceId);
      expect(new Set(traced.map((span) => span.service))).toEqual(new Set(['browser', 'eventflow-gateway', 'worker']));
      for (const span of [tree.requestSpan, tree.consume, tree.outcomePublish, ...tree.writes, tree.deliver, ...tree.steps.flat()]) expect(span?.traceId).toBe(traceId);
      expect(tree.deliver?.attributes).toMatchObject({ 'eventflow.delivery.attempt': 1, 'eventflow.delivery.outcome': 'success', 'messaging.message.id': request?.id });
      expect(tree.consume?.attributes).toMatchObject({ 'eventflow.delivery.attempt': 1, 'messaging.message.id': request?.id });
      // Kinds: CLIENT request, SERVER writes, PRODUCER delivery and worker publish, CONSUMER handler.
      expect([tree.requestSpan?.kind, tree.writes[0]?.kind, tree.deliver?.kind, tree.consume?.kind, tree.outcomePublish?.kind]).toEqual([3, 2, 4, 5, 4]);
      // request()'s span lasts until the outcome: it ends after the worker published it.
      expect(tree.requestSpan?.end).toBeGreaterThanOrEqual(tree.outcomePublish?.start ?? Infinity);
    } finally {
      await worker.close();
      await stop(proc.proc);
    }
  }, 60_000);
});
