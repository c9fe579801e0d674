/**
 * The consume side of the client: runs a handler per delivery, knows each delivery's lease, and
 * settles it. A settle is never dropped: one refused for the client's own pace waits in the send
 * window (requests.ts), and one cut off by a dropped connection is sent again on the next
 * connection to the same gateway, for as long as the lease holds. It ends when the gateway
 * answers, also with E_EVENTFLOW_UNKNOWN_DELIVERY (the delivery was revoked and the event went
 * to a consumer again), or when the lease has run out. Across a gateway restart, or to another
 * gateway on the same store, it is sent all the same: the lease is in the store. That holds for a
 * gateway that died; one stopped cleanly waits EVENTFLOW_DRAIN_TIMEOUT_MS for its handlers' settles,
 * then revokes and releases the leases left, so their events go out again at once (gateway README).
 */
import { GATEWAY_LEASE_MS } from './defaults.js';
import { closedError, EventflowError, isEventflowError, type ErrorCode } from './errors.js';
import type { HandlerSlots } from './handler-slots.js';
import type { DeliveryFrame, OperationName, Params, Result, StoredEvent, WelcomeFrame } from './protocol.js';
import { connectionLost, type RequestOptions } from './requests.js';
import { wellFormedText } from './unicode-text.js';

/** The client's ConsumeContext, as handlers see it (client.ts documents it). */
export interface DeliveryContext {
  attempt: number;
  signal: AbortSignal;
  extend(ms?: number): Promise<{ ms: number }>;
  retry(ms?: number, reason?: unknown): void;
}
export type DeliveryHandler = (event: StoredEvent, context: DeliveryContext) => unknown;

type Send = <O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions) => Promise<Result<O>>;
type Failure = { message: string; code?: string | undefined };

/**
 * A delivery being handled. Its handler's AbortSignal is made only if the handler reads it (most
 * never do: a controller per delivery was a measurable share of a worker's time).
 */
class Lease {
  #controller: AbortController | undefined;
  #reason: unknown;
  #lost = false;
  /** Gone for good (revoked): no settle then. */
  gone = false;
  /** When the gateway revokes it unless extended (as far as the client knows). */
  deadline: number;
  /** The running handler, then its settle. */
  run?: Promise<void>;
  /** Its consumer's slots (handler-slots.ts), told when the delivery is lost while its handler runs. */
  slots: HandlerSlots | undefined;
  /** Its handler runs in a slot of `slots`. */
  handling = false;
  /** It was lost while its handler ran: the slot was no longer credit. */
  lingered = false;
  /** It waits for a slot of `slots` (its handler has not started). */
  queued = false;
  /** Its handler returned: its outcome is reported, and the lease ends with it. */
  returned = false;
  /** Its consumer's handle. */
  readonly consumer: string;

  constructor(deadline: number, consumer: string) {
    this.deadline = deadline;
    this.consumer = consumer;
  }

  /** The handler's signal: aborted when the delivery is lost (connection dropped, or revoked). */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#lost) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get lost(): boolean {
    return this.#lost;
  }

  /** Why it was lost. */
  get reason(): unknown {
    return this.#reason;
  }

  lose(reason?: unknown): void {
    if (this.#lost) return;
    this.#lost = true;
    this.#reason = reason;
    if (this.handling) {
      this.lingered = true;
      this.slots!.linger();
    }
    this.#controller?.abort(reason);
  }
}

/** A settle waiting to be sent, or sent again. */
interface QueuedSettle {
  readonly params: SettleParams;
  readonly lease: Lease;
  /** Not before (a store failure's retry). */
  readonly after?: number;
  /** The settle is over: recorded, refused, or given up. */
  done(): void;
}

type SettleParams = Params<'settle'>;

/** After the store failed a settle, it is sent again this much later (within the lease). */
const STORE_RETRY_MS = 200;

/** Runs `task` in a later macrotask: setImmediate where there is one (Node), else a 0 ms timer. */
const immediate = (globalThis as { setImmediate?: (task: () => void) => unknown }).setImmediate;
const later = (task: () => void): void => void (immediate ? immediate(task) : setTimeout(task, 0));

export class Deliveries {
  readonly #send: Send;
  readonly #onError: (error: unknown) => void;
  readonly #ready: (consumer: string) => boolean;
  /** Deliveries whose handler or settle is running, by id. */
  readonly #leases = new Map<string, Lease>();
  #leaseMs = GATEWAY_LEASE_MS;
  /** settleMany's limit as the gateway announced it; 0: one settle per request (an older gateway). */
  #maxBatch = 0;
  /** The gateway's frame limit (welcome.limits.maxFrameBytes): a frame over it closes the connection (1009). */
  #maxFrameBytes = Number.POSITIVE_INFINITY;
  #queue: QueuedSettle[] = [];
  #scheduled = false;

  /**
   * `ready(consumer)`: the consumer is registered on the current connection. The gateway decides a
   * settle other than `success` by the retry policy of the consumer registered on the connection it
   * comes from: one sent on a new connection before the consumer's registration there was decided
   * without it (`failed` where the policy retried, a `retry()` counted against the gateway's
   * attempts), so it waits for that. A `success` needs no policy: it goes out at once, also for a
   * consumer the gateway refused to register again.
   */
  constructor(send: Send, onError: (error: unknown) => void, ready: (consumer: string) => boolean = () => true) {
    this.#send = send;
    this.#onError = onError;
    this.#ready = ready;
  }

  /** A consumer is registered on the current connection: its settles that waited for that go out. */
  registered(): void {
    this.#schedule();
  }

  /**
   * A connection is open. Settles still pending go out on it, also to a restarted or another
   * gateway: delivery ids are unique across gateways and restarts, and the gateway records a settle
   * if it is still the event's current delivery in the store (else E_EVENTFLOW_UNKNOWN_DELIVERY).
   */
  opened({ limits }: WelcomeFrame): void {
    this.#leaseMs = limits.leaseMs ?? GATEWAY_LEASE_MS;
    this.#maxBatch = limits.maxSettleBatch ?? 0;
    this.#maxFrameBytes = limits.maxFrameBytes;
  }

  /** The connection dropped: the gateway hands its open deliveries to other consumers. */
  lost(): void {
    const lost = new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', 'connection lost; the event will be redelivered');
    for (const lease of this.#leases.values()) lease.lose(lost);
  }

  /**
   * close() gave up on the handlers still running (its drainTimeout ran out): the connection closes next and the
   * gateway hands their events to other members, so their signals say so, as a dropped connection's do.
   */
  closed(error: unknown): void {
    for (const lease of this.#leases.values()) if (!lease.lost) lease.lose(error);
  }

  /** The gateway took the delivery back (its lease expired). */
  revoked(delivery: string): void {
    const lease = this.#leases.get(delivery);
    if (!lease) return;
    lease.lose(new DOMException('This operation was aborted', 'AbortError'));
    lease.gone = true;
  }

  /**
   * Runs `handler` for a delivery, once `slots` (its consumer's) has room for it; without a handler
   * (consumer removed, client closing) the event is released at once.
   */
  run({ consumer, delivery, event, attempt }: DeliveryFrame, handler: DeliveryHandler | undefined, slots?: HandlerSlots): void {
    const lease = new Lease(Date.now() + this.#leaseMs, consumer);
    const extend = async (ms?: number): Promise<{ ms: number }> => {
      // NaN and Infinity would reach the gateway as null, which it words as "expected number, received null".
      if (ms !== undefined && !(Number.isSafeInteger(ms) && ms > 0)) throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `extend(ms): ms must be a positive integer (the gateway grants at most ten leases), got ${typeof ms === 'number' ? ms : typeof ms}`);
      // Told to a handler: what became of its delivery, and what to do (the request layer's marker for a dropped connection is the client's own).
      const lostWith = (): EventflowError => new EventflowError('E_EVENTFLOW_CONNECTION_FAILED', `extend(): the connection to the gateway was lost, and with it delivery "${delivery}" (context.signal is aborted): the event will be redelivered, so stop working on it`, { details: { delivery } });
      const notOurs = (cause?: EventflowError): EventflowError => new EventflowError('E_EVENTFLOW_UNKNOWN_DELIVERY', `extend(): delivery "${delivery}" is no longer this handler's (its lease ran out, or it was settled or handed back): the event goes to a consumer again, so stop working on it`, { details: cause?.details ?? { delivery }, cause });
      // As retry(): sent in the moment before the outcome was recorded, it extended a lease that the outcome ended anyway.
      if (lease.returned) throw new EventflowError('E_EVENTFLOW_UNKNOWN_DELIVERY', `extend() was called after the handler of delivery "${delivery}" returned, so its outcome was reported already and its lease ends with it; call it before the handler resolves`, { details: { delivery } });
      // Lost already: sent, it waited for a connection (the gateway away: E_EVENTFLOW_OFFLINE after requestTimeout) to be refused there.
      if (lease.lost) throw lease.gone ? notOurs() : isEventflowError(lease.reason, 'E_EVENTFLOW_CLIENT_CLOSED') ? lease.reason : lostWith();
      const granted = await this.#send('extend', { delivery, ms }).catch((cause: unknown) => {
        if (cause === connectionLost) throw lostWith();
        if (isEventflowError(cause, 'E_EVENTFLOW_UNKNOWN_DELIVERY')) throw notOurs(cause);
        throw cause;
      });
      lease.deadline = Date.now() + granted.ms;
      return granted;
    };
    this.#leases.set(delivery, lease);
    const held = handler && slots?.enter(event);
    lease.run = (async () => {
      if (!handler) return this.#settle(delivery, lease, 'release');
      if (held) {
        lease.queued = true;
        await held;
        lease.queued = false;
      }
      // Lost while it waited for a slot: the gateway hands the event to a consumer again.
      if (slots) {
        if (lease.lost) return slots.leave(event, false);
        lease.slots = slots;
        lease.handling = true;
      }
      let error: Failure | undefined;
      let retryMs: number | undefined;
      let retryReason: Failure | undefined;
      let ended = false;
      const retry = (ms = 0, reason?: unknown): void => {
        // Later, the outcome has been reported already: a retry() from a callback the handler did not await would be lost.
        if (ended) throw new EventflowError('E_EVENTFLOW_UNKNOWN_DELIVERY', `retry() was called after the handler of delivery "${delivery}" returned, so its outcome was reported already; call it before the handler resolves`, { details: { delivery } });
        retryReason = reason === undefined ? undefined : describeFailure(reason);
        if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_RETRY_MS) {
          throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `retry(ms): ms must be an integer from 0 to ${MAX_RETRY_MS}, got ${typeof ms === 'number' ? ms : typeof ms}`);
        }
        retryMs = ms;
      };
      try {
        await handler(event, {
          attempt,
          get signal() {
            return lease.signal;
          },
          extend,
          retry,
        });
      } catch (cause) {
        error = describeFailure(cause);
      }
      ended = lease.returned = true;
      if (slots) {
        lease.handling = false;
        slots.leave(event, lease.lingered);
      }
      // A handler that gave up because its delivery was lost has no outcome to report.
      if (error && lease.lost) return;
      if (!error && retryMs !== undefined) await this.#settle(delivery, lease, 'retry', retryReason, retryMs);
      else await this.#settle(delivery, lease, error ? 'failed' : 'success', error);
    })().finally(() => this.#leases.get(delivery) === lease && this.#leases.delete(delivery));
  }

  /**
   * Reports a delivery's outcome, until the gateway has it or the lease is over. With a gateway that
   * takes settleMany, the settles of the handlers that finished in one turn go in one request.
   */
  #settle(delivery: string, lease: Lease, outcome: 'success' | 'failed' | 'release' | 'retry', error?: Failure, delayMs?: number): Promise<void> {
    const params: SettleParams = error === undefined && delayMs === undefined ? { delivery, outcome } : { delivery, outcome, error, delayMs };
    return new Promise((done) => {
      this.#queue.push({ params, lease, done });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#queue.length === 0) return;
    this.#scheduled = true;
    // A macrotask later: every delivery frame read in this turn has had its handler run by then.
    later(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    const now = Date.now();
    const due: QueuedSettle[] = [];
    const waiting: QueuedSettle[] = [];
    for (const item of this.#queue) {
      // Revoked or past its lease meanwhile: the gateway decides the event's fate, nothing is sent.
      if (item.lease.gone || item.lease.deadline <= now) item.done();
      else (item.params.outcome === 'success' || this.#ready(item.lease.consumer) ? due : waiting).push(item);
    }
    this.#queue = waiting;
    const budget = this.#maxFrameBytes - FRAME_ENVELOPE;
    const sized = due.map((item) => fitted(item, budget));
    if (this.#maxBatch === 0) {
      await Promise.all(sized.map(({ item }) => this.#send('settle', item.params, { timeout: item.lease.deadline - now }).then(() => [], (cause: unknown) => this.#failed([item], cause)).then((again) => this.#answered([item], again))));
      return;
    }
    for (const batch of batches(sized, this.#maxBatch, budget)) {
      const timeout = Math.min(...batch.map((item) => item.lease.deadline - now));
      void this.#send('settleMany', { settles: batch.map((item) => item.params) }, { timeout }).then(
        ({ refused }) => {
          const again: QueuedSettle[] = [];
          const byIndex = new Map(refused.map((refusal) => [refusal.index, refusal]));
          batch.forEach((item, index) => {
            const refusal = byIndex.get(index);
            if (refusal) again.push(...this.#failed([item], new EventflowError(refusal.code as ErrorCode, refusal.message)));
          });
          this.#answered(batch, again);
        },
        (cause: unknown) => this.#answered(batch, this.#failed(batch, cause)),
      );
    }
  }

  /** What a failed settle leads to: sent again (lost with its connection, or the store failed: within the lease), or reported. Returns those to send again. */
  #failed(items: QueuedSettle[], cause: unknown): QueuedSettle[] {
    if (cause === connectionLost) return items;
    if (isEventflowError(cause, 'E_EVENTFLOW_STORE_FAILED')) return items.map((item) => ({ ...item, after: Date.now() + STORE_RETRY_MS }));
    // Gone (unknown delivery, lease over, client closed): the gateway decides the event's fate.
    if (!isEventflowError(cause) || !settleEnds.test(cause.code)) this.#onError(cause);
    return [];
  }

  /** The batch was answered: each item done, except those to send again (a store failure waits a little first). */
  #answered(batch: QueuedSettle[], again: QueuedSettle[]): void {
    for (const item of batch) if (!again.some((retry) => retry.params === item.params)) item.done();
    for (const item of again) {
      const wait = (item.after ?? 0) - Date.now();
      if (wait > 0) setTimeout(() => (this.#queue.push(item), this.#schedule()), wait);
      else this.#queue.push(item);
    }
    this.#schedule();
  }

  /**
   * Waits up to `timeout` ms for handlers (of `consumer`, or all) whose delivery is still ours, or until `over()`; lost
   * ones are redelivered elsewhere anyway.
   */
  async drain(timeout: number, consumer?: string, over: () => boolean = () => false): Promise<void> {
    const deadline = Date.now() + timeout;
    const mine = (lease: Lease): boolean => consumer === undefined || lease.consumer === consumer;
    // Deliveries still waiting for a slot are handed back now: started as the running handlers ended, they ran after
    // close() began (and held it up), behind a handler that ignored its signal for as long as it ran.
    for (const [delivery, lease] of this.#leases) {
      if (!lease.queued || lease.lost || !mine(lease)) continue;
      lease.lose(closedError());
      void this.#settle(delivery, lease, 'release');
    }
    for (;;) {
      const live = [...this.#leases.values()].filter((lease) => !lease.lost && mine(lease)).map(({ run }) => run);
      const left = deadline - Date.now();
      if (!live.length || left <= 0 || over()) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([Promise.allSettled(live), new Promise((resolve) => (timer = setTimeout(resolve, Math.min(left, 100))))]);
      clearTimeout(timer);
    }
  }
}

/** Bytes of a request frame around settleMany's list (`{"type":"request","id":…,"op":"settleMany","params":{"settles":[…]}}`), with room. */
const FRAME_ENVELOPE = 128;
/** Bytes of a settle without an error at most (a delivery id of 64, an outcome, a delay). */
const PLAIN_SETTLE_BYTES = 128;

/**
 * A settle with the bytes it takes in a frame. One whose error alone would not fit a frame has its message cut until it
 * does (the gateway closes a connection that sends a frame over its limit, 1009, and the client sent it again on the
 * next connection: the settle never arrived, and the connection never stayed up).
 */
function fitted(item: QueuedSettle, budget: number): { item: QueuedSettle; bytes: number } {
  if (item.params.error === undefined) return { item, bytes: PLAIN_SETTLE_BYTES };
  let { params } = item;
  let bytes = jsonBytes(params);
  while (bytes > budget && params.error !== undefined && params.error.message.length > 0) {
    params = { ...params, error: { ...params.error, message: wellFormedText(params.error.message, Math.floor(params.error.message.length / 2)) } };
    bytes = jsonBytes(params);
  }
  return { item: params === item.params ? item : { ...item, params }, bytes };
}

/**
 * The due settles as settleMany requests: at most `maxBatch` each, and each frame within the gateway's frame limit.
 * Cut by count only, 256 handlers that threw at once with long (or non-ASCII) messages made a frame over 1 MiB: the
 * gateway closed the connection (1009), every delivery of it went out again, and the client sent the same frame on
 * each new connection until the leases ran out.
 */
function batches(sized: ReadonlyArray<{ item: QueuedSettle; bytes: number }>, maxBatch: number, budget: number): QueuedSettle[][] {
  const cut: QueuedSettle[][] = [];
  let batch: QueuedSettle[] = [];
  let bytes = 0;
  for (const { item, bytes: size } of sized) {
    if (batch.length > 0 && (batch.length >= maxBatch || bytes + size + 1 > budget)) {
      cut.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(item);
    bytes += size + 1;
  }
  if (batch.length > 0) cut.push(batch);
  return cut;
}

/** Bytes of `value` as JSON in UTF-8 (a Blob counts them as the WebSocket sends them: a lone surrogate as U+FFFD's 3). */
const jsonBytes = (value: unknown): number => new Blob([JSON.stringify(value)]).size;

/** The longest retry delay the gateway takes (a day). */
const MAX_RETRY_MS = 86_400_000;

/** Answers that end a settle's retries without anything to report. */
const settleEnds = /_(UNKNOWN_DELIVERY|REQUEST_TIMEOUT|OFFLINE|ABORTED|CLIENT_CLOSED)$/;

/**
 * What a handler threw (or gave retry() as its reason), as the settle reports it. Anything can be
 * thrown: String() of an object without a prototype, or whose toString throws, throws itself, and
 * the settle was never sent (an unhandled rejection, which ends a Node process, and the event only
 * redelivered when its lease ran out). Objects that are not Errors but carry a `message` (as many
 * libraries reject with) report it.
 */
function describeFailure(cause: unknown): Failure {
  let message: unknown;
  let code: unknown;
  try {
    ({ message, code } = (typeof cause === 'object' && cause !== null ? cause : {}) as { message?: unknown; code?: unknown });
  } catch {
    // A getter that throws (a Proxy, say): described as a value below.
  }
  // `new Error()` reported "": a dead letter's last error, and request()'s rejection, said nothing of what was thrown.
  const text = typeof message !== 'string' ? describeValue(cause) : message === '' ? `${describeValue(cause)} (thrown with an empty message)` : message;
  return { message: wellFormedText(text, 4096), code: typeof code === 'string' ? wellFormedText(code, 128) : undefined };
}

function describeValue(value: unknown): string {
  try {
    return typeof value === 'object' && value !== null && !(value instanceof Error) ? (JSON.stringify(value) ?? String(value)) : String(value);
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      return 'a value that cannot be described';
    }
  }
}
