import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventually, sleep } from '@eventflow/test-support/wait';
import { startHarness, type Harness } from '@eventflow/test-support/harness';
import { createNodeClient, EventflowError, routeConsumers, type ConsumeContext, type EventflowClient, type EventMap, type StoredEvent } from '../src/index.js';
import { PublishedView } from './helpers.js';

let h: Harness;
let view: PublishedView;
const clients: Array<EventflowClient<EventMap>> = [];

function client<M extends EventMap = EventMap>(): EventflowClient<M> {
  const created = createNodeClient<M>(h.gateway.url, { reconnect: { minDelay: 20, maxDelay: 200 }, onError: () => undefined });
  clients.push(created as unknown as EventflowClient<EventMap>);
  return created;
}

beforeEach(async () => {
  h = await startHarness();
  view = new PublishedView(h.dbPath);
});
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  view.close();
  await h.stop();
});

async function rejection(promise: Promise<unknown>): Promise<EventflowError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(EventflowError);
  return error as EventflowError;
}

class Orders {
  readonly calls: Array<{ method: string; event: StoredEvent; attempt: number }> = [];
  async onOrderPlaced(event: StoredEvent, context: ConsumeContext): Promise<void> {
    this.calls.push({ method: 'onOrderPlaced', event, attempt: context.attempt });
  }
  async onOrderShippedV2(event: StoredEvent, context: ConsumeContext): Promise<void> {
    this.calls.push({ method: 'onOrderShippedV2', event, attempt: context.attempt });
  }
  onBoom(): void {
    throw new Error('boom');
  }
}

describe('routeConsumers with explicit names', () => {
  it('calls the method of each event with the event and marks it success', async () => {
    const worker = client();
    const service = new Orders();
    const routed = await routeConsumers(worker, 'orders', service, ['order-placed', 'order.shipped.v2']);
    expect(routed.names).toEqual(['order-placed', 'order.shipped.v2']);

    const publisher = client();
    const placed = await publisher.publish({ domain: 'orders', name: 'order-placed', pid: 'o1', data: { amount: 3, items: ['a'] } });
    const shipped = await publisher.publish({ domain: 'orders', name: 'order.shipped.v2', pid: 'o1', data: { carrier: 'x' } });

    expect(await view.outcome(placed)).toBe('success');
    expect(await view.outcome(shipped)).toBe('success');
    expect(service.calls.map(({ method, event }) => [method, event.id, event.data])).toEqual(
      expect.arrayContaining([
        ['onOrderPlaced', placed, { amount: 3, items: ['a'] }],
        ['onOrderShippedV2', shipped, { carrier: 'x' }],
      ]),
    );
    expect(service.calls).toHaveLength(2);
    const call = service.calls.find((c) => c.event.id === placed);
    expect(call?.event).toMatchObject({ domain: 'orders', name: 'order-placed', pid: 'o1' });
    expect(call?.attempt).toBe(1);
    // The store has the events as published.
    expect(await h.gateway.store.read(placed)).toMatchObject({ id: placed, name: 'order-placed', data: { amount: 3, items: ['a'] } });
  });

  it('accepts a single name and binds inherited methods to the service', async () => {
    class Base {
      readonly seen: string[] = [];
      onPing(event: StoredEvent): void {
        this.seen.push(event.id); // `this` must be the service
      }
    }
    class Derived extends Base {}
    const service = new Derived();
    await routeConsumers(client(), 'health', service, 'ping');
    const id = await client().publish({ domain: 'health', name: 'ping', pid: 'p' });
    expect(await view.outcome(id)).toBe('success');
    expect(service.seen).toEqual([id]);
  });

  it('marks a throwing method failed', async () => {
    await routeConsumers(client(), 'orders', new Orders(), ['boom']);
    const id = await client().publish({ domain: 'orders', name: 'boom', pid: 'o1' });
    expect(await view.outcome(id)).toBe('failed');
  });

  it('keeps it failed when onError only logs and returns (v4 marked it success), and passes onError a coded error with the cause', async () => {
    const seen: Array<{ error: EventflowError; event: StoredEvent }> = [];
    class Logging extends Orders {
      // The README's hook, as people copy it: logs, returns nothing.
      async onError(error: EventflowError, event: StoredEvent): Promise<void> {
        await sleep(10); // an asynchronous onError: settling waits for it
        seen.push({ error, event });
      }
    }
    await routeConsumers(client(), 'orders', new Logging(), ['boom']);
    const id = await client().publish({ domain: 'orders', name: 'boom', pid: 'o1' });
    expect(await view.outcome(id)).toBe('failed');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.event.id).toBe(id);
    expect(seen[0]?.error.code).toBe('E_EVENTFLOW_CONSUMER_FAILED');
    expect((seen[0]?.error.cause as Error).message).toBe('boom');
    expect(seen[0]?.error.message).toContain('onBoom');
  });

  it("marks it success when onError returns 'success' (it handled the failure)", async () => {
    class Forgiving extends Orders {
      async onError(error: EventflowError): Promise<'success' | void> {
        if ((error.cause as Error).message === 'boom') return 'success';
      }
    }
    await routeConsumers(client(), 'orders', new Forgiving(), ['boom']);
    const id = await client().publish({ domain: 'orders', name: 'boom', pid: 'o1' });
    expect(await view.outcome(id)).toBe('success');
  });

  it('marks it failed when onError throws', async () => {
    class Strict extends Orders {
      onError(): never {
        throw new Error('onError gave up');
      }
    }
    await routeConsumers(client(), 'orders', new Strict(), ['boom']);
    const id = await client().publish({ domain: 'orders', name: 'boom', pid: 'o1' });
    expect(await view.outcome(id)).toBe('failed');
  });

  it('refuses an unmappable name before registering anything', async () => {
    const worker = client();
    const service = new Orders();
    const error = await rejection(routeConsumers(worker, 'orders', service, ['order-placed', '-x']));
    expect(error.code).toBe('E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE');
    expect(error.message).toContain('"-x"');
    expect(h.gateway.dispatcher.stats.consumers).toBe(0);

    await worker.ready();
    const id = await client().publish({ domain: 'orders', name: 'order-placed', pid: 'o1' });
    const row = await view.orphaned(id);
    expect(row).toMatchObject({ success: null, failed: null, consumed_spoke: null });
    expect(service.calls).toEqual([]);
  });

  it('refuses a missing or non-function method before registering anything', async () => {
    const worker = client();
    const service = new Orders();
    const missing = await rejection(routeConsumers(worker, 'orders', service, ['order-placed', 'order-cancelled']));
    expect(missing.code).toBe('E_EVENTFLOW_CONSUMER_HANDLER_MISSING');
    expect(missing.message).toContain('onOrderCancelled');
    expect(missing.message).toContain('Orders');

    const notAFunction = await rejection(routeConsumers(worker, 'orders', { onOrderPlaced: 42 }, ['order-placed']));
    expect(notAFunction.code).toBe('E_EVENTFLOW_CONSUMER_HANDLER_MISSING');
    expect(notAFunction.message).toContain('number');

    expect(h.gateway.dispatcher.stats.consumers).toBe(0);
    await worker.ready();
    const id = await client().publish({ domain: 'orders', name: 'order-placed', pid: 'o1' });
    await view.orphaned(id);
    expect(service.calls).toEqual([]);
  });

  it('refuses invalid input with E_EVENTFLOW_INVALID_INPUT', async () => {
    const worker = client();
    expect((await rejection(routeConsumers(worker, 'orders', new Orders(), []))).code).toBe('E_EVENTFLOW_INVALID_INPUT');
    expect((await rejection(routeConsumers(worker, '', new Orders(), ['order-placed']))).code).toBe('E_EVENTFLOW_INVALID_INPUT');
    const tooLong = await rejection(routeConsumers(worker, 'orders', new Orders(), ['order-placed', 'x'.repeat(65)]));
    expect(tooLong.code).toBe('E_EVENTFLOW_INVALID_INPUT');
    expect(tooLong.message).toContain('names.1');
    expect(h.gateway.dispatcher.stats.consumers).toBe(0);
  });
});

describe("routeConsumers with '*'", () => {
  it('routes every name of the domain, and fails (never succeeds) events without a method or with an unmappable name', async () => {
    const service = new Orders();
    const routed = await routeConsumers(client(), 'orders', service, '*');
    expect(routed.names).toEqual(['*']);
    const publisher = client();
    const placed = await publisher.publish({ domain: 'orders', name: 'order-placed', pid: 'o1', data: { n: 1 } });
    const unknown = await publisher.publish({ domain: 'orders', name: 'order-lost', pid: 'o1' });
    const unmappable = await publisher.publish({ domain: 'orders', name: '-x', pid: 'o1' });
    const notMine = await publisher.publish({ domain: 'billing', name: 'order-placed', pid: 'o1' });

    expect(await view.outcome(placed)).toBe('success');
    expect(await view.outcome(unknown)).toBe('failed');
    expect(await view.outcome(unmappable)).toBe('failed');
    await view.orphaned(notMine);
    expect(service.calls.map((c) => c.event.id)).toEqual([placed]);
    expect(view.row(unknown)?.success).toBeNull();
    expect(view.row(unmappable)?.success).toBeNull();
  });

  it('does not let onError turn a missing method into success', async () => {
    class Forgiving extends Orders {
      onError(): 'success' {
        return 'success';
      }
    }
    await routeConsumers(client(), 'orders', new Forgiving(), '*');
    const id = await client().publish({ domain: 'orders', name: 'order-lost', pid: 'o1' });
    expect(await view.outcome(id)).toBe('failed');
  });

  it('keys cached methods by (domain, name) without collisions', async () => {
    // v4 cached under domain + "." + name: ("a.b", "c") and ("a", "b.c") shared the key "a.b.c".
    const first = { seen: [] as string[], onC(event: StoredEvent) { this.seen.push(event.id); } };
    const second = { seen: [] as string[], onBC(event: StoredEvent) { this.seen.push(event.id); } };
    const shared = Object.assign(Object.create(null) as object, { onC: first.onC, onBC: second.onBC, seen: [] as string[] });
    const worker = client();
    await routeConsumers(worker, 'a.b', shared, '*');
    await routeConsumers(worker, 'a', shared, '*');
    const publisher = client();
    const one = await publisher.publish({ domain: 'a.b', name: 'c', pid: 'p' });
    const two = await publisher.publish({ domain: 'a', name: 'b.c', pid: 'p' });
    expect(await view.outcome(one)).toBe('success');
    expect(await view.outcome(two)).toBe('success');
    // Each went to its own method: onC once and onBC once (both push into shared.seen).
    expect((shared as { seen: string[] }).seen.sort()).toEqual([one, two].sort());
  });
});

describe('RoutedConsumers.remove', () => {
  it('stops delivery to exactly its consumers; another routing of the domain keeps working', async () => {
    const worker = client();
    const orders = new Orders();
    const others = { shipped: [] as string[], onShipped(event: StoredEvent) { this.shipped.push(event.id); } };
    const first = await routeConsumers(worker, 'orders', orders, ['order-placed', 'order.shipped.v2']);
    const second = await routeConsumers(worker, 'orders', others, ['shipped']);
    expect(h.gateway.dispatcher.stats.consumers).toBe(3);

    await first.remove();
    await first.remove(); // idempotent
    await eventually(() => h.gateway.dispatcher.stats.consumers === 1, 2_000, 'the removal to reach the gateway');

    const publisher = client();
    const placed = await publisher.publish({ domain: 'orders', name: 'order-placed', pid: 'o1' });
    const shipped = await publisher.publish({ domain: 'orders', name: 'shipped', pid: 'o1' });
    expect(await view.outcome(shipped)).toBe('success');
    await view.orphaned(placed);
    expect(orders.calls).toEqual([]);
    expect(others.shipped).toEqual([shipped]);

    await second.remove();
    await eventually(() => h.gateway.dispatcher.stats.consumers === 0, 2_000, 'the second removal');
  });
});

describe('typing', () => {
  it('checks names against the EventMap and onError against its signature', async () => {
    type Events = { orders: { 'order-placed': { amount: number }; 'order.shipped.v2': { carrier: string } } };
    const typed = client<Events>();
    await routeConsumers(typed, 'orders', new Orders(), ['order-placed']).then((r) => r.remove());
    // @ts-expect-error: not an event of the domain
    await rejection(routeConsumers(typed, 'orders', new Orders(), ['order-lost']));
    // @ts-expect-error: onError must accept (error, event)
    await routeConsumers(typed, 'orders', { onOrderPlaced() {}, onError: (error: number) => error }, '*').then((r) => r.remove());
    // @ts-expect-error: onError marks success only with 'success'; another value is no verdict
    await routeConsumers(typed, 'orders', { onOrderPlaced() {}, onError: () => true }, '*').then((r) => r.remove());
    await routeConsumers(typed, 'orders', { onOrderPlaced() {}, onError: () => 'success' as const }, '*').then((r) => r.remove());
  });
});

describe('reserved method names', () => {
  it('refuses an event name that maps to the onError hook', async () => {
    const service = { onError: async () => undefined };
    await expect(routeConsumers(h.client(), 'orders', service, ['error'])).rejects.toMatchObject({ code: 'E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE' });
  });
});

describe('routeConsumers arguments', () => {
  it('refuses something that is not a client with a coded error, before anything else', async () => {
    await expect(routeConsumers({} as never, 'orders', {}, '*')).rejects.toMatchObject({ code: 'E_EVENTFLOW_INVALID_INPUT', message: expect.stringContaining('client: must be an eventflow client') });
  });
});
