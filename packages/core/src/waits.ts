/**
 * The `waiting` feature (features.ts): waits for a process's outcome, by handle ('w…'),
 * registered again on every connection (then asking for outcomes stored since the first
 * registration), and `request`, which publishes an event and waits for its outcome. Only
 * applications that pass `waiting` bundle it.
 */
import { assertKeys, assertNumber, assertSignal } from './arguments.js';
import type { RequestEventOptions, WaitOptions } from './client-types.js';
import { backoffDelay } from './backoff.js';
import { DEFAULT_RETRY_MAX_DELAY, DEFAULT_RETRY_MIN_DELAY, DEFAULT_WAIT_TIMEOUT } from './defaults.js';
import { EventflowError } from './errors.js';
import { heldBy } from './held-requests.js';
import type { ClientFeature, FeatureHost, FeaturePart } from './features.js';
import type { EventInput, Params, ServerFrame, StoredEvent, WelcomeFrame } from './protocol.js';
import { connectionLost, pending, type Settle } from './requests.js';
import { handles } from './registrations.js';
import { assertIdentifier, assertNames, assertRegistrable, invalid, withId } from './validate.js';

interface Entry {
  /** Registers it on the current connection (again after each reconnect). */
  readonly register: () => Promise<void>;
  /** Resolves it with an event, or fails it with an error. */
  readonly settle: Settle<StoredEvent>;
}

export class Waits implements FeaturePart {
  readonly #host: FeatureHost;
  readonly #entries = new Map<string, Entry>();
  /** The gateway takes a request()'s publish right behind its wait (welcome.waitsInOrder). */
  #inOrder = false;

  readonly #handle = handles('w');

  constructor(host: FeatureHost) {
    this.#host = host;
  }

  opened(welcome: WelcomeFrame): void {
    this.#inOrder = welcome.waitsInOrder === true;
    for (const entry of this.#entries.values()) void entry.register();
  }

  frame(frame: ServerFrame): void {
    if (frame.type === 'waited') this.#entries.get(frame.wait)?.settle(undefined, frame.event);
    // The wait's request event failed to be consumed: request() rejects with E_EVENTFLOW_CONSUMER_FAILED.
    else if (frame.type === 'waitFailed') this.#entries.get(frame.wait)?.settle(new EventflowError('E_EVENTFLOW_CONSUMER_FAILED', frame.message, { details: frame.details }));
  }

  close(error: unknown): void {
    for (const entry of this.#entries.values()) entry.settle(error);
  }

  /** client.wait. */
  async wait(domain: string, pid: string, outcomes?: string | string[], timeout?: number, options: WaitOptions = {}): Promise<StoredEvent> {
    assertKeys(options, 'options', ['after', 'signal']);
    return this.#wait(domain, pid, outcomes, timeout, options);
  }

  /**
   * `onRegistered`, `request` (the id of the event it waits on) and `ender` are request()'s: `ender.end`
   * is set to end the wait with an error (its publish failed), `ender.since` to have it answered by
   * an outcome stored after a position (its event's) too.
   */
  async #wait(
    domain: string,
    pid: string,
    outcomes: string | string[] = ['success', 'failed'],
    timeout = DEFAULT_WAIT_TIMEOUT,
    { after, signal }: WaitOptions,
    onRegistered?: (registered?: unknown) => void,
    request?: string,
    ender?: Ender,
  ): Promise<StoredEvent> {
    const host = this.#host;
    assertRegistrable(host.closed(), domain, pid, 'pid');
    const names = outcomeNames(outcomes, timeout);
    if (after !== undefined) assertIdentifier(after, 'after');
    assertSignal(signal);
    const params: Params<'wait'> = { wait: this.#handle(), domain, pid, names, afterId: after, ...(request ? { request } : {}) };
    const { wait } = params;
    return pending<StoredEvent>('wait', signal, (settle) => {
      if (ender) ender.end = settle;
      let timer: ReturnType<typeof setTimeout> | undefined;
      let registered = false;
      let storeFailures = 0;
      // The clock starts at the first registration, the first the gateway's store refused, or the first made while the
      // client is not connected (a gateway never reached held such a wait for good, whatever its timeout).
      const startClock = (): void => {
        timer ??= setTimeout(
          () => settle(new EventflowError('E_EVENTFLOW_WAIT_TIMEOUT', `wait timed out (${timeout}) for ${domain} › ${pid} › ${names.join(' | ')}`, { details: { domain, pid, names, timeout } })),
          timeout,
        );
      };
      const register = async (): Promise<void> => {
        try {
          const result = await host.send('wait', params);
          if (!result) return void (host.isOpen() || startClock());
          storeFailures = 0;
          // Re-registering after a reconnect asks for outcomes stored since the first registration.
          params.afterPosition ??= result.head;
          params.afterId = undefined;
          if (registered || !this.#entries.has(wait)) return;
          registered = true;
          startClock();
          onRegistered?.();
        } catch (error) {
          if (error === connectionLost) return;
          // The gateway's store could not register it (a moment's outage): sent again until the wait's timeout, as a
          // publish is (a request()'s publish refused with it goes again by itself), instead of failing at once.
          if ((error as EventflowError | undefined)?.details?.retryable === true && this.#entries.has(wait)) {
            startClock();
            const again = (): void => void (this.#entries.has(wait) && host.isOpen() && register());
            return void setTimeout(again, backoffDelay(storeFailures++, { minDelay: DEFAULT_RETRY_MIN_DELAY, maxDelay: DEFAULT_RETRY_MAX_DELAY }));
          }
          settle(error);
        }
      };
      if (ender) {
        ender.since = (position) => {
          // Registered after the event was stored (a same-id retry, a registration made again after a reconnect): an outcome may be stored already.
          if (!(params.afterPosition! >= position) || !this.#entries.has(wait)) return;
          params.afterPosition = position;
          void register();
        };
      }
      this.#entries.set(wait, { register, settle });
      void register();
      return (error) => {
        clearTimeout(timer);
        this.#entries.delete(wait);
        if (error && host.isOpen()) void host.request('cancelWait', { wait }).catch(() => undefined);
      };
    });
  }

  /** client.request: the wait exists before the event does, so a fast outcome cannot be missed. */
  async request(event: Partial<EventInput>, options: RequestEventOptions = {}): Promise<StoredEvent> {
    assertKeys(options, 'options', requestKeys);
    const input = withId(event, options);
    assertSignal(options.signal);
    // Checked before anything is sent: the publish goes out beside the wait's registration, which would fail too late.
    outcomeNames(options.outcomes, options.timeout);
    // Anything but false used to mean true: `requireConsumer: 'no'` published into a wait nobody answers.
    if (options.requireConsumer !== undefined && typeof options.requireConsumer !== 'boolean') throw invalid('options.requireConsumer: must be a boolean');
    const { tracing } = this.#host;
    return tracing ? tracing.request(input, () => this.#request(input, options)) : this.#request(input, options);
  }

  async #request(input: EventInput & { id: string }, options: RequestEventOptions): Promise<StoredEvent> {
    let outcome!: Promise<StoredEvent>;
    // Takes the wait back when the publish fails (E_EVENTFLOW_NO_CONSUMER, say): a function, not an
    // AbortController and its listeners, which were a tenth of a request's time in the client.
    const ender: Ender = {};
    // Goes on once the wait is registered (or fails with it), or at once when the gateway takes the
    // publish right behind the wait (and refuses it with the wait). The handlers also keep a
    // rejection of the outcome from going unhandled when publish fails first.
    const registered = new Promise((resolve, reject) => {
      (outcome = this.#wait(input.domain, input.pid, options.outcomes, options.timeout, { signal: options.signal }, resolve, input.id, ender)).then(resolve, reject);
    });
    // Not connected: the wait registers only once a connection opens, and awaited it held request() past its timeout (for
    // good while the gateway was never reached, where the publish fails at once); the wait registered after the event
    // was stored is answered by an outcome stored after it (ender.since).
    if (this.#inOrder || !this.#host.isOpen()) registered.catch(() => undefined);
    else await registered;
    try {
      // The request's time, not the client's requestTimeout: an outage the caller gave it time to ride out must not fail its publish first.
      const timeout = options.timeout ?? DEFAULT_WAIT_TIMEOUT;
      const { position } = await this.#host.client.call('publish', { event: input, ...(options.requireConsumer === false ? {} : { requireConsumer: true }) }, { signal: options.signal, timeout });
      void registered.then(() => ender.since?.(position), () => undefined);
    } catch (error) {
      ender.end?.(error);
      throw error;
    }
    // Stored from here on: a wait that ends with no outcome says so, lest the event be published again under a new id.
    return outcome.catch((error: unknown) => {
      const code = (error as { code?: unknown } | null)?.code;
      // A handler that awaits request() of an event its own consumer takes waits for itself: say so, not only "timed out".
      const held = code === 'E_EVENTFLOW_WAIT_TIMEOUT' ? heldBy(this.#host, input.domain, input.name, input.pid) : undefined;
      const why = held
        ? `; this client's consumer of ${held.domain} › ${held.name} had no room for it (${held.ordered ? `ordered, a handler of pid ${input.pid} running, or ` : ''}all ${held.concurrency} of its concurrency running), so the gateway sends it nothing: a handler that awaits request() of an event its own consumer takes waits for itself. Raise concurrency, consume that event in another consumer or worker, or publish it and return without awaiting its outcome`
        : '';
      throw code === 'E_EVENTFLOW_ABORTED' || code === 'E_EVENTFLOW_WAIT_TIMEOUT'
        ? new EventflowError(code, `${(error as Error).message}; its event ${input.id} is published${why}`, {
            details: { ...(error as EventflowError).details, published: input.id, ...(held ? { heldBy: { domain: held.domain, name: held.name, concurrency: held.concurrency, ordered: held.ordered } } : {}) },
          })
        : error;
    });
  }
}

/** How request() steers its wait (Waits.#wait). */
interface Ender {
  end?: (error: unknown) => void;
  since?: (position: number) => void;
}

/** A wait's outcome names (checked), after checking its timeout. */
function outcomeNames(outcomes: string | string[] = ['success', 'failed'], timeout?: number): string[] {
  const names = [outcomes].flat();
  assertNames(names);
  assertNumber(timeout, 'timeout');
  return names;
}

const requestKeys = ['outcomes', 'timeout', 'signal', 'requireConsumer', 'traceparent', 'tracestate'];

/** Waits and request for a client: `createBrowserClient(url, { features: [waiting] })` (createClient and createNodeClient have it). */
export const waiting: ClientFeature<'waiting', Waits> = { name: 'waiting', create: (host) => new Waits(host) };
