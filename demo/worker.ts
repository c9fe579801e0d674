/**
 * The demo worker: places an order (`order-placed`, a new pid) at an interval and, as a competing
 * consumer of `order-placed`, ships it (`order-shipped`) and records the outcome (`success`, or
 * `failed` for every 5th order) with `rid` pointing at the order. Run it with `npm run demo:worker`;
 * tests import `startWorker`.
 *
 * Environment: EVENTFLOW_URL (default ws://127.0.0.1:8080/), DEMO_INTERVAL_MS (default 1000;
 * 0 consumes only), DEMO_DOMAIN (default orders), DEMO_HANDLER_MS (default 0: how long shipping an
 * order takes, to see in the console's Latency view and in traces).
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createNodeClient, routeConsumers, type ClientOptions, type EventflowClient, type RoutedConsumers, type StoredEvent } from '@eventflow/node';

export interface WorkerOptions {
  /** Gateway WebSocket URL. */
  url?: string;
  /** Domain of the orders. */
  domain?: string;
  /** Milliseconds between placed orders; 0 places none (consume only). */
  intervalMs?: number;
  /** Milliseconds the handler works on each order before it publishes the outcome (default 0). */
  handlerMs?: number;
  /** Passed to the client (reconnect backoff, timeouts, onError). */
  client?: ClientOptions;
  /** Progress lines; default: none. */
  log?: (line: string) => void;
}

export interface Worker {
  readonly client: EventflowClient;
  /** Orders placed, shipped and failed by this worker so far. */
  readonly stats: { placed: number; shipped: number; failed: number };
  /** Stops placing orders, lets running handlers finish, and closes the client. */
  stop(): Promise<void>;
}

const items = ['keyboard', 'mouse', 'monitor', 'headphones', 'webcam', 'dock', 'cable', 'lamp'];
const customers = ['ada', 'grace', 'linus', 'margaret', 'ken', 'barbara', 'dennis', 'frances'];
const carriers = ['DHL', 'UPS', 'PostNL', 'FedEx'];

function pick<T>(list: readonly T[], n: number): T {
  return list[n % list.length] as T;
}

/** Consumes `order-placed`: routeConsumers calls onOrderPlaced for each order, once across all workers. */
export class OrderService {
  readonly #client: EventflowClient;
  readonly #stats: Worker['stats'];

  readonly #handlerMs: number;

  constructor(client: EventflowClient, stats: Worker['stats'], handlerMs = 0) {
    this.#client = client;
    this.#stats = stats;
    this.#handlerMs = handlerMs;
  }

  async onOrderPlaced(event: StoredEvent): Promise<void> {
    const data = (typeof event.data === 'object' && event.data !== null && !Array.isArray(event.data) ? event.data : {}) as Record<string, unknown>;
    const sequence = typeof data['sequence'] === 'number' ? data['sequence'] : 0;
    const { domain, pid, id: rid } = event;
    if (this.#handlerMs > 0) await new Promise((resolve) => setTimeout(resolve, this.#handlerMs));
    // Ids derived from the order make a redelivered order (after a lost connection) publish nothing twice.
    // Every 5th order cannot be shipped: its process ends with `failed`.
    if (sequence % 5 === 0) {
      await this.#client.publish({ id: `failed-${rid}`, domain, name: 'failed', pid, rid, data: { status: 'failed', reason: `${String(data['item'] ?? 'item')} out of stock` } });
      this.#stats.failed++;
      return;
    }
    const carrier = pick(carriers, sequence);
    const tracking = `${carrier.toUpperCase()}-${String(sequence).padStart(6, '0')}`;
    await this.#client.publish({ id: `shipped-${rid}`, domain, name: 'order-shipped', pid, rid, data: { shipped: true, status: 'shipped', carrier, tracking } });
    await this.#client.publish({ id: `success-${rid}`, domain, name: 'success', pid, rid, data: { status: 'completed' } });
    this.#stats.shipped++;
  }
}

/** Connects, starts consuming, and places an order every `intervalMs`. */
export async function startWorker(options: WorkerOptions = {}): Promise<Worker> {
  const url = options.url ?? 'ws://127.0.0.1:8080/';
  const domain = options.domain ?? 'orders';
  const intervalMs = options.intervalMs ?? 1000;
  const log = options.log ?? (() => undefined);
  const stats = { placed: 0, shipped: 0, failed: 0 };
  const client = createNodeClient(url, { clientName: 'demo-worker', onError: () => undefined, ...options.client });

  let routed: RoutedConsumers;
  try {
    routed = await routeConsumers(client, domain, new OrderService(client, stats, options.handlerMs), ['order-placed']);
  } catch (error) {
    await client.close();
    throw error;
  }

  let stopping = false;
  let sequence = 0;
  let placing: Promise<void> | undefined;
  const place = async (): Promise<void> => {
    const n = ++sequence;
    const pid = client.generatePid();
    const data = { item: pick(items, n * 7), quantity: 1 + (n % 4), customer: pick(customers, n * 3), sequence: n };
    try {
      await client.publish({ domain, name: 'order-placed', pid, data });
      stats.placed++;
      log(`placed ${domain}/${pid}: ${data.quantity} × ${data.item} for ${data.customer}`);
    } catch (error) {
      // Offline: this order is dropped; a later tick places a new one.
      if (!stopping) log(`could not place an order: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  // One order at a time: while the gateway is away, a pending publish waits (until its request
  // timeout) and ticks meanwhile are skipped instead of piling up.
  const timer =
    intervalMs > 0
      ? setInterval(() => {
          if (placing || stopping) return;
          placing = place().finally(() => (placing = undefined));
        }, intervalMs)
      : undefined;

  let stopped: Promise<void> | undefined;
  return {
    client,
    stats,
    stop: () =>
      (stopped ??= (async () => {
        stopping = true;
        clearInterval(timer);
        await placing;
        await routed.remove().catch(() => undefined);
        await client.close({ drainTimeout: 5_000 });
      })()),
  };
}

async function main(): Promise<void> {
  const url = process.env['EVENTFLOW_URL'] || 'ws://127.0.0.1:8080/';
  const rawInterval = process.env['DEMO_INTERVAL_MS'] || '1000';
  const intervalMs = Number(rawInterval);
  if (!Number.isFinite(intervalMs) || intervalMs < 0) {
    process.stderr.write(`DEMO_INTERVAL_MS: must be a number of milliseconds ≥ 0, got ${JSON.stringify(rawInterval)}\n`);
    process.exit(1);
  }
  const domain = process.env['DEMO_DOMAIN'] || 'orders';
  const handlerMs = Number(process.env['DEMO_HANDLER_MS'] || '0');
  if (!Number.isFinite(handlerMs) || handlerMs < 0) {
    process.stderr.write(`DEMO_HANDLER_MS: must be a number of milliseconds ≥ 0, got ${JSON.stringify(process.env['DEMO_HANDLER_MS'])}\n`);
    process.exit(1);
  }
  process.stdout.write(`demo worker: connecting to ${url} (set EVENTFLOW_URL for another gateway)…\n`);
  const worker = await startWorker({
    url,
    domain,
    intervalMs,
    handlerMs,
    log: (line) => process.stdout.write(`${line}\n`),
    client: {
      onError: (error) => {
        const message = error instanceof Error ? error.message : String(error);
        process.stderr.write(`eventflow: ${message}\n`);
      },
    },
  });
  // onError hears of an outage once, when it starts; its end is the state change to open.
  worker.client.onStateChange((state) => state === 'open' && process.stderr.write(`eventflow: connected to ${url} again\n`));
  process.stdout.write(`demo worker on ${url}: ${intervalMs > 0 ? `an order every ${intervalMs} ms` : 'consuming only'} in domain ${domain}; Ctrl-C stops\n`);

  let stoppingSince: number | undefined;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (stoppingSince !== undefined) {
      // A second signal does not wait for the drain; the same one again within a second is not a
      // second (`npm run demo:worker` execs node: Ctrl-C comes from the terminal and from npm).
      if (performance.now() - stoppingSince >= 1_000) process.exit(1);
      return;
    }
    stoppingSince = performance.now();
    process.stdout.write(`${signal}: stopping (placed ${worker.stats.placed}, shipped ${worker.stats.shipped}, failed ${worker.stats.failed})\n`);
    worker.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`stop failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  main().catch((error: unknown) => {
    const message = error instanceof Error ? `${(error as { code?: string }).code ?? 'error'}: ${error.message}` : String(error);
    process.stderr.write(`demo worker failed to start: ${message}\n`);
    process.exit(1);
  });
}
