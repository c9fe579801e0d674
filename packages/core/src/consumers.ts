/**
 * The `consuming` feature (features.ts): the client's consumers, by handle ('c…'), registered
 * again on every connection from the position they reached, and their deliveries (deliveries.ts:
 * handlers, leases, settles). Only applications that pass `consuming` bundle it.
 */
import { assertFunction, assertKeys, assertSignal } from './arguments.js';
import type { ClientTracing } from './client-tracing.js';
import type { Consumer, ConsumeOptions, ConsumeRetry } from './client-types.js';
import { DEFAULT_CONSUME_CONCURRENCY, MAX_CONSUME_ATTEMPTS, MAX_CONSUME_CONCURRENCY } from './defaults.js';
import { Deliveries, type DeliveryHandler } from './deliveries.js';
import { EventflowError, isEventflowError } from './errors.js';
import type { ClientFeature, FeatureHost, FeaturePart } from './features.js';
import { HandlerSlots } from './handler-slots.js';
import { enterSlots } from './held-requests.js';
import type { ConsumerEndedFrame, ServerFrame, WelcomeFrame } from './protocol.js';
import { handles, registration } from './registrations.js';
import { connectionLost, errorFromFrame } from './requests.js';
import { assertIdentifier, assertRegistrable } from './validate.js';

interface Entry {
  readonly domain: string;
  readonly name: string;
  readonly handler: DeliveryHandler;
  /** Its running handlers, which its credit at the gateway leaves room for. */
  readonly slots: HandlerSlots;
  /** Registers it on the current connection (again after each reconnect); `paused`: with no credit (the client is closing). */
  readonly register: (paused?: boolean) => Promise<void>;
  readonly remove: () => Promise<void>;
  /** Takes it out of held-requests.ts (request()'s view of the client's consumers). */
  readonly leave: () => void;
  /** The consumer's position: it catches up on unclaimed events after it when it registers again. */
  after?: number;
  /** The gateway had it registered once: a registration again (a new connection) that the store fails is tried again. */
  registered?: boolean;
  /** remove() waits for its running handlers: registered with no credit, and new deliveries are handed back. */
  removing?: boolean;
}

/** How soon a registration again that the gateway's store failed is tried again, at first; doubled up to STORE_RETRY_MAX_MS. */
const STORE_RETRY_MS = 250;
const STORE_RETRY_MAX_MS = 4_000;

/** The handler run in the tracer's consume span (client-tracing.ts), when the client has a tracer. */
function traced(tracing: ClientTracing | undefined, handler: DeliveryHandler | undefined): DeliveryHandler | undefined {
  return tracing && handler ? (event, context) => tracing.consume(event, context.attempt, () => handler(event, context)) : handler;
}

export class Consumers implements FeaturePart {
  readonly #host: FeatureHost;
  readonly #deliveries: Deliveries;
  readonly #entries = new Map<string, Entry>();

  readonly #handle = handles('c');

  constructor(host: FeatureHost) {
    this.#host = host;
    // A consumer removed or ended meanwhile is not registered again: its settles go out as they are.
    this.#deliveries = new Deliveries(host.request, host.onError, (consumer) => !this.#entries.has(consumer) || host.registered.has(consumer));
  }

  opened(welcome: WelcomeFrame): void {
    this.#deliveries.opened(welcome);
    for (const entry of this.#entries.values()) void entry.register(this.#host.closed() || entry.removing);
  }

  lost(): void {
    this.#deliveries.lost();
  }

  close(error: unknown): void {
    this.#deliveries.closed(error);
  }

  frame(frame: ServerFrame): void {
    // A closing client takes no new deliveries: they are released at once.
    if (frame.type === 'delivery') {
      const entry = this.#entries.get(frame.consumer);
      this.#deliveries.run(frame, this.#host.closed() ? undefined : traced(this.#host.tracing, this.#handlerFor(frame.consumer, frame.event.position)), entry?.slots);
    }
    else if (frame.type === 'revoked') this.#deliveries.revoked(frame.delivery);
    else if (frame.type === 'consumerEnded') this.#ended(frame);
  }

  /**
   * The gateway ended a consumer (its group was deleted on another gateway): it is not registered
   * again on a later connection, which would record the group anew without the application knowing,
   * and onError says why, as for a registration the gateway refused. Its `remove` then does nothing.
   */
  #ended(frame: ConsumerEndedFrame): void {
    const entry = this.#entries.get(frame.consumer);
    if (!entry || !this.#entries.delete(frame.consumer)) return;
    entry.leave();
    this.#host.registered.delete(frame.consumer);
    this.#host.refused(frame.consumer, errorFromFrame(frame));
  }

  /**
   * Closing: every consumer is registered again with no credit (concurrency 0), so that the gateway
   * sends no more deliveries and those open may still settle; then the running handlers finish.
   */
  async drain(timeout: number): Promise<void> {
    const deadline = Date.now() + timeout;
    if (this.#host.isOpen()) {
      // Within the drainTimeout: a gateway that does not answer (a stopped process, a silent link) held close() for the
      // pause's requestTimeout first, past a process manager's grace period sized by drainTimeout.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const paused = Promise.all([...this.#entries.values()].map((entry) => entry.register(true)));
      await Promise.race([paused, new Promise((resolve) => (timer = setTimeout(resolve, timeout)))]);
      clearTimeout(timer);
    }
    return this.#deliveries.drain(Math.max(0, deadline - Date.now()));
  }

  /** Registers a consumer; resolves with its `remove` once the gateway has it. */
  async consume(domain: string, name: string, handler: DeliveryHandler, options: ConsumeOptions = {}): Promise<Consumer> {
    const host = this.#host;
    assertRegistrable(host.closed(), domain, name, 'name');
    assertFunction(handler, 'handler');
    assertKeys(options, 'options', consumeKeys);
    const { signal, group, concurrency, ordered, retry } = options;
    assertSignal(signal, 'options.signal');
    // '' is the default group, as the gateway, listGroups and deleteGroup name it.
    if (group !== undefined && group !== '') assertIdentifier(group, 'options.group');
    if (concurrency !== undefined) assertInteger(concurrency, 'options.concurrency', 1, MAX_CONSUME_CONCURRENCY);
    if (ordered !== undefined && typeof ordered !== 'boolean') throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', 'options.ordered must be a boolean');
    if (retry !== undefined) assertRetry(retry);
    // Only what the application said: a gateway applies its defaults, and an older one refuses nothing it does not know.
    const settings = { ...(group ? { group } : {}), ...(concurrency === undefined ? {} : { concurrency }), ...(ordered === undefined ? {} : { ordered }), ...(retry ? { retry } : {}) };
    const consumer = this.#handle();
    const slots = new HandlerSlots(concurrency ?? DEFAULT_CONSUME_CONCURRENCY, ordered === true);
    let removed: Promise<void> | undefined;
    const remove = (): Promise<void> => (removed ??= removeNow());
    const removeNow = async (): Promise<void> => {
      const entry = this.#entries.get(consumer);
      if (!entry) return;
      host.waiters.settle(consumer, new EventflowError('E_EVENTFLOW_ABORTED', 'consumer removed before it was registered'));
      if (host.registered.has(consumer) && host.isOpen()) {
        // Its running handlers finish and settle first, with no credit meanwhile: removeConsumer hands the open deliveries
        // to other consumers at once, which ran each event again beside a handler never told (its signal not aborted),
        // whose outcome the gateway then refused. A handler that outlives its lease is revoked, which ends the wait, as
        // does the client closed under it (its connection gone, nothing revokes: the wait kept the process alive).
        entry.removing = true;
        await entry.register(true);
        await this.#deliveries.drain(Infinity, consumer, () => host.closed() && !host.isOpen());
      }
      // Ended by the gateway meanwhile (its group deleted): nothing left to remove.
      leave();
      if (!this.#entries.delete(consumer) || !host.registered.delete(consumer) || !host.isOpen()) return;
      await host.request('removeConsumer', { consumer }).catch((error: unknown) => {
        if (error !== connectionLost) throw error;
      });
    };
    let storeFailures = 0;
    const register = async (paused = false): Promise<void> => {
      const entry = this.#entries.get(consumer);
      try {
        // Handlers still running for deliveries the gateway no longer counts take their share of the credit.
        const credit = paused ? 0 : slots.credit;
        const limit = paused || credit < (concurrency ?? DEFAULT_CONSUME_CONCURRENCY) ? { concurrency: credit } : {};
        const result = await host.send('consume', { consumer, domain, name, after: entry?.after, ...settings, ...limit });
        if (!result) return;
        storeFailures = 0;
        if (entry) {
          entry.after ??= result.head;
          entry.registered = true;
        }
        // Removed while registering: take it back off the gateway.
        if (!this.#entries.has(consumer)) return void (await host.request('removeConsumer', { consumer }));
        host.registered.add(consumer);
        this.#deliveries.registered();
        host.waiters.settle(consumer);
        // Handlers returned (or were lost) while it was on its way, unseen by onCredit: the gateway has a stale credit.
        if (!paused && credit !== slots.credit) slots.onCredit();
      } catch (error) {
        // The pause of a closing client: the connection closes next, which hands back all it holds.
        if (paused && (host.closed() || entry?.removing)) return;
        // On a new connection, the gateway's store failing (a full disk: the group's record could not be
        // written) is sat out, as a settle's is: refused once, the consumer stayed off until the next
        // connection, and its events went to nobody here. onError hears of the first failure of a run.
        if (entry?.registered && isEventflowError(error, 'E_EVENTFLOW_STORE_FAILED')) {
          if (storeFailures++ === 0) host.onError(error);
          const retry = (): void => void (this.#entries.get(consumer) === entry && !host.registered.has(consumer) && host.isOpen() && register(paused));
          setTimeout(retry, Math.min(STORE_RETRY_MAX_MS, STORE_RETRY_MS * 2 ** Math.min(storeFailures - 1, 8)));
          return;
        }
        host.refused(consumer, error);
      }
    };
    // Registered again when its credit changes, unless closing (registered without credit then) or gone.
    slots.onCredit = () => void (this.#entries.has(consumer) && !this.#entries.get(consumer)?.removing && host.registered.has(consumer) && !host.closed() && register());
    const size = concurrency ?? DEFAULT_CONSUME_CONCURRENCY;
    const leave = enterSlots(host, { domain, name, concurrency: size, ordered: ordered === true, holds: (pid) => slots.holds(pid) });
    this.#entries.set(consumer, { domain, name, handler, slots, register, remove, leave });
    const done = host.waiters.wait(consumer, 'consume', signal);
    void register();
    await registration(done, remove);
    return { remove };
  }

  /** Removes the consumer of exactly this handler on (domain, name). */
  async removeConsumer(domain: string, name: string, handler: DeliveryHandler): Promise<void> {
    assertFunction(handler, 'handler');
    for (const entry of this.#entries.values()) if (entry.handler === handler && entry.domain === domain && entry.name === name) return entry.remove();
  }

  /** The handler of a consumer handle, which also moves the consumer's position past `position`. */
  #handlerFor(consumer: string, position: number): DeliveryHandler | undefined {
    const entry = this.#entries.get(consumer);
    if (entry) entry.after = Math.max(entry.after ?? 0, position);
    return entry?.removing ? undefined : entry?.handler;
  }
}

function assertInteger(value: unknown, what: string, min: number, max: number): void {
  if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) return;
  const got = value === undefined ? 'it is missing' : `got ${typeof value === 'number' ? value : typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : value === null ? 'null' : typeof value}`;
  throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `${what} must be an integer from ${min} to ${max}; ${got}`);
}

const consumeKeys = ['signal', 'group', 'concurrency', 'ordered', 'retry'];
const retryKeys = ['attempts', 'backoff', 'delayMs', 'maxDelayMs'];

function assertRetry(retry: ConsumeRetry): void {
  assertKeys(retry, 'options.retry', retryKeys);
  assertInteger(retry.attempts, 'options.retry.attempts', 1, MAX_CONSUME_ATTEMPTS);
  if (retry.backoff !== undefined && retry.backoff !== 'exponential' && retry.backoff !== 'fixed') throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', "options.retry.backoff must be 'exponential' or 'fixed'");
  if (retry.delayMs !== undefined) assertInteger(retry.delayMs, 'options.retry.delayMs', 0, 86_400_000);
  if (retry.maxDelayMs !== undefined) assertInteger(retry.maxDelayMs, 'options.retry.maxDelayMs', 0, 86_400_000);
  // The gateway would raise the cap to delayMs without a word: the two given are a contradiction to fix.
  if (retry.delayMs !== undefined && retry.maxDelayMs !== undefined && retry.maxDelayMs < retry.delayMs) {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `options.retry.maxDelayMs (${retry.maxDelayMs}) must not be below options.retry.delayMs (${retry.delayMs})`);
  }
}

/** Consumers for a client: `createBrowserClient(url, { features: [consuming] })` (createClient and createNodeClient have it). */
export const consuming: ClientFeature<'consuming', Consumers> = { name: 'consuming', create: (host) => new Consumers(host) };
