/**
 * The registrations of one connection: its subscriptions (and their replays), pattern
 * subscriptions, consumers and waits. They have one owner: only these methods change them, here and
 * in the dispatcher. The Session makes one on its first registration and delegates to it; its
 * operations reach them through the Session's methods (operation.ts), never directly.
 */
import { EventflowError, streamKey, type OperationName, type StoredEvent } from '@eventflow/core';
import type { PatternFilter } from '../delivery/patterns.js';
import type { Peer } from '../delivery/peer.js';
import type { ConditionLevel } from '../condition-log.js';
import type { LogFields } from '../log.js';
import { allows, type Action, type Authorization } from './auth.js';
import type { SessionContext } from './context.js';
import { PatternSubscriptions } from './pattern-subscriptions.js';
import { Replays, type SubscriptionState } from './replay.js';
import type { Registration } from './request-limits.js';
import { RequestWaits } from './request-waits.js';
import { limitExceeded } from './limits.js';
import type { RetryPolicy } from '../delivery/retry-policy.js';

/** What the registrations need of their connection (the Session). */
export interface RegistrationHost extends Peer {
  readonly context: SessionContext;
  /** The connection is being closed: nothing more is handled or sent. */
  readonly closing: boolean;
  /** Bytes queued on the transport and not yet sent. */
  readonly bufferedAmount: number;
  recheck(op: OperationName, action: Action, domain: string): void;
  /** The outbound rule (Session#mayReceive): whether a push for `action` on `domain` may leave now. */
  receives(action: Action, domain: string): boolean;
  sendFrame(frame: string): void;
  close(code: number, reason: string): void;
  note(condition: string, level: ConditionLevel, message: string, fields?: LogFields): void;
}

/** A consumer of this connection: what its handle consumes. */
interface ConsumerState {
  readonly domain: string;
  readonly name: string;
  readonly group: string;
}

/** A consumer's registration options, with the gateway's defaults applied (operations.ts). */
export interface ConsumeOptions {
  group: string;
  concurrency: number;
  /** Stored with the group when given. */
  ordered: boolean | undefined;
  retry: RetryPolicy | undefined;
}

/** A subscription of this connection: its (domain, name) and its replay state (replay.ts). */
interface Subscription extends SubscriptionState {
  readonly domain: string;
  readonly name: string;
}

export class Registrations {
  readonly #host: RegistrationHost;
  // The registrations and their helpers are made on first use: most connections hold one kind or
  // none, and an empty Map or a helper with its callbacks is a few hundred bytes per connection
  // (bench/idle-memory.mjs). Reads that must not create go through the `…Made` fields.
  /** streamKey(domain, name) → the subscription. */
  #subscriptionsMade: Map<string, Subscription> | undefined;
  /** Consumer handle → what it consumes, so that a handle cannot stand for two consumers. */
  #consumersMade: Map<string, ConsumerState> | undefined;
  /** Handles of the waits registered and not finished yet. */
  #waitsMade: Set<string> | undefined;
  #requestWaitsMade: RequestWaits | undefined;
  /**
   * The consumer groups (domain, name, group) this connection has registered consumers in, over its
   * life (EVENTFLOW_MAX_GROUPS_PER_CONNECTION): groups are durable, so removing the consumer does
   * not give the slot back.
   */
  #groupsJoined: Set<string> | undefined;
  #replaysMade: Replays | undefined;
  /** Handle → pattern subscription (pattern-subscriptions.ts). */
  #patternsMade: PatternSubscriptions | undefined;
  /** Work to start once the current request's result has been sent (e.g. a subscription replay). */
  #afterResult: Array<() => void> | undefined;
  /** 'c:' / 'w:' / 'p:' + handle, or 's:' + stream → the registration or removal of it in progress (#inOrder). */
  #inProgressMade: Map<string, Promise<unknown>> | undefined;

  constructor(host: RegistrationHost) {
    this.#host = host;
  }

  get #context(): SessionContext {
    return this.#host.context;
  }

  get #subscriptions(): Map<string, Subscription> {
    return (this.#subscriptionsMade ??= new Map());
  }

  get #consumers(): Map<string, ConsumerState> {
    return (this.#consumersMade ??= new Map());
  }

  get #waits(): Set<string> {
    return (this.#waitsMade ??= new Set());
  }

  /** request()'s waits and the publishes right behind them (request-waits.ts). */
  get requestWaits(): RequestWaits {
    return (this.#requestWaitsMade ??= new RequestWaits());
  }

  /**
   * The same, for reads that must not create it: every answer asks it how to go out, and a
   * connection that never waits would otherwise hold its five empty collections (~1 kB).
   */
  get requestWaitsMade(): RequestWaits | undefined {
    return this.#requestWaitsMade;
  }

  get #replays(): Replays {
    const host = this.#host;
    return (this.#replaysMade ??= new Replays({
      store: this.#context.store,
      maxBufferedBytes: this.#context.maxBufferedBytes,
      maxParkedBytes: this.#context.maxParkedBytes,
      maxScanRate: this.#context.maxScanRate,
      turns: this.#context.readTurns,
      owner: host,
      bufferedAmount: () => host.bufferedAmount,
      closing: () => host.closing,
      sendFrame: (frame) => host.sendFrame(frame),
      close: (code, reason) => host.close(code, reason),
      note: (condition, level, message, fields) => host.note(condition, level, message, fields),
    }));
  }

  get #patterns(): PatternSubscriptions {
    const host = this.#host;
    return (this.#patternsMade ??= new PatternSubscriptions({
      replays: this.#replays,
      readPublishedSince: (after, limit) => this.#context.store.readPublishedSince(after, limit),
      mayReceive: (domain) => host.receives('subscribe', domain),
      closing: () => host.closing,
      sendFrame: (frame) => host.sendFrame(frame),
    }));
  }

  /** Subscriptions + pattern subscriptions + consumers + waits (EVENTFLOW_MAX_SUBSCRIPTIONS counts them). */
  get count(): number {
    return (this.#subscriptionsMade?.size ?? 0) + (this.#patternsMade?.size ?? 0) + (this.#consumersMade?.size ?? 0) + (this.#waitsMade?.size ?? 0);
  }

  holds(registration: Registration): boolean {
    if (registration.kind === 'subscription') return this.#subscriptionsMade?.has(registration.key) ?? false;
    if (registration.kind === 'pattern') return this.#patternsMade?.has(registration.key) ?? false;
    if (registration.kind === 'consumer') return this.#consumersMade?.has(registration.key) ?? false;
    return this.#waitsMade?.has(registration.key) ?? false;
  }

  /** What to start once the current request's result is sent; cleared. */
  takeAfterResult(): Array<() => void> | undefined {
    const after = this.#afterResult;
    this.#afterResult = undefined;
    return after;
  }

  /**
   * After `authenticate` with narrower rights: registrations they no longer cover are dropped, so
   * that nothing of those domains is matched for this connection any more (the outbound rule
   * already stops it leaving).
   */
  async narrow(auth: Authorization): Promise<void> {
    for (const handle of this.#context.dispatcher.cancelWaitsWhere(this.#host, (domain) => !allows(auth, 'subscribe', domain))) this.#waits.delete(handle);
    for (const { domain, name } of [...(this.#subscriptionsMade?.values() ?? [])]) if (!allows(auth, 'subscribe', domain)) void this.unsubscribe(domain, name);
    for (const [handle, { domain }] of [...(this.#consumersMade ?? [])]) if (!allows(auth, 'consume', domain)) await this.removeConsumer(handle);
    for (const [handle, { pattern }] of this.#patternsMade?.handles() ?? []) if (!allows(auth, 'wildcard', pattern)) void this.unsubscribePattern(handle);
  }

  // ── pushes ──

  /** Whether replays are running, which park live events of their subscriptions. */
  get replaying(): boolean {
    return this.#replaysMade !== undefined && this.#replaysMade.running > 0;
  }

  /** Parks `event` for the names whose subscription is replaying; returns the names to send now. */
  parkReplaying(event: StoredEvent, names: string[]): string[] {
    const now: string[] = [];
    for (const name of names) {
      const subscription = this.#subscriptions.get(streamKey(event.domain, name));
      if (subscription?.parked) this.#replays.park(subscription, event, names);
      else now.push(name);
    }
    return now;
  }

  /** Live events parked by running replays, in bytes (bounded by EVENTFLOW_MAX_PARKED_BYTES). */
  get parkedBytes(): number {
    return this.#replaysMade?.parkedBytes ?? 0;
  }

  sendMatched(event: StoredEvent, handles: string[]): void {
    this.#patterns.send(event, handles);
  }

  /** The wait ended (waited or failed): it no longer counts. */
  waitEnded(wait: string): void {
    this.#waitsMade?.delete(wait);
    this.#requestWaitsMade?.ended(wait);
  }

  // ── registrations: only these methods change them, here and in the dispatcher ──

  /**
   * Subscribes (domain, name); with `after` below the head, the events after it are replayed once the
   * result is sent. Returns the head. `after` still being read (a promise: the "last N"): the
   * stream's later frames wait for this registration (#inOrder).
   */
  subscribe(domain: string, name: string, after: number | undefined | Promise<number | undefined>): Promise<number> {
    // Awaited in #inOrder, perhaps only after an earlier frame of the stream: its refusal is not unhandled meanwhile.
    if (typeof after === 'object') after.catch(noop);
    return this.#inOrder(`s:${streamKey(domain, name)}`, async () => this.#subscribe(domain, name, await after));
  }

  async #subscribe(domain: string, name: string, after: number | undefined): Promise<number> {
    const key = streamKey(domain, name);
    const head = await this.#context.store.head();
    this.#host.recheck('subscribe', 'subscribe', domain);
    if (this.#subscriptions.has(key) || after === undefined || after >= head) {
      if (!this.#subscriptions.has(key)) this.#subscriptions.set(key, { parked: undefined, parkedBytes: 0, overflowed: false, domain, name });
      this.#context.dispatcher.subscribe(this.#host, domain, name);
      return head;
    }
    // Literals of one shape, not spreads: a spread clone may give each connection's object a map of its own.
    const subscription: Subscription = { parked: this.#replays.begin(), parkedBytes: 0, overflowed: false, domain, name };
    this.#subscriptions.set(key, subscription);
    this.#context.dispatcher.subscribe(this.#host, domain, name);
    // Unsubscribed (by the client, by `authenticate` taking the right away, or unsubscribed and
    // subscribed again, which starts its own replay) or closing: the replay stops.
    const gone = (): boolean => this.#host.closing || this.#subscriptions.get(key) !== subscription || !this.#host.receives('subscribe', domain);
    // The result goes out first; the replay follows on the same ordered connection.
    (this.#afterResult ??= []).push(() => void this.#replays.run(domain, name, after, subscription, gone));
    return head;
  }

  /** Unsubscribes (domain, name); after its subscription when that is still being made. */
  unsubscribe(domain: string, name: string): Promise<void> | undefined {
    return this.#afterInProgress(`s:${streamKey(domain, name)}`, () => {
      this.#subscriptions.delete(streamKey(domain, name));
      this.#context.dispatcher.unsubscribe(this.#host, domain, name);
    });
  }

  /**
   * Registers (or replaces) pattern subscription `handle`. Every one replays from `after` (or the
   * head) first, once the result is sent (pattern-subscriptions.ts). Returns the head.
   */
  subscribePattern(handle: string, filter: PatternFilter, after: number | undefined): Promise<number> {
    return this.#inOrder(`p:${handle}`, () => this.#subscribePattern(handle, filter, after));
  }

  async #subscribePattern(handle: string, filter: PatternFilter, after: number | undefined): Promise<number> {
    const head = await this.#context.store.head();
    this.#host.recheck('subscribePattern', 'wildcard', filter.pattern);
    const replay = this.#patterns.add(handle, filter, Math.min(after ?? head, head));
    this.#context.dispatcher.subscribePattern(this.#host, handle, filter, head);
    (this.#afterResult ??= []).push(replay);
    return head;
  }

  /** Removes pattern subscription `handle`; after its registration when that is still being made. */
  unsubscribePattern(handle: string): Promise<void> | undefined {
    return this.#afterInProgress(`p:${handle}`, () => {
      if (this.#patternsMade?.remove(handle)) this.#context.dispatcher.unsubscribePattern(this.#host, handle);
    });
  }

  /**
   * Registers consumer `handle` for (domain, name) as a member of `options.group` with its credit
   * and retry policy. Returns the head. A handle already naming another consumer is refused; the
   * same consumer registered again takes its new options.
   */
  consume(handle: string, domain: string, name: string, options: ConsumeOptions): Promise<number> {
    return this.#inOrder(`c:${handle}`, () => this.#consume(handle, domain, name, options));
  }

  /**
   * Runs the frames naming one handle (or one subscribed stream) one after another, as they were
   * sent: a removal that came while its registration still awaited the store found nothing to
   * remove, and the registration then completed, live and served, and counted against
   * EVENTFLOW_MAX_SUBSCRIPTIONS or not at all. With nothing in progress, `work` starts at once.
   */
  #inOrder<T>(key: string, work: () => Promise<T>): Promise<T> {
    const inProgress = (this.#inProgressMade ??= new Map());
    const previous = inProgress.get(key);
    const run = previous ? previous.then(work) : work();
    const settled = run.then(noop, noop);
    inProgress.set(key, settled);
    void settled.then(() => {
      if (inProgress.get(key) !== settled) return;
      inProgress.delete(key);
      // Dropped when empty: a connection holds it only while a frame of it runs (idle memory per connection).
      if (inProgress.size === 0 && this.#inProgressMade === inProgress) this.#inProgressMade = undefined;
    });
    return run;
  }

  async #consume(handle: string, domain: string, name: string, options: ConsumeOptions): Promise<number> {
    const { group } = options;
    const existing = this.#consumers.get(handle);
    if (existing !== undefined && (existing.domain !== domain || existing.name !== name || existing.group !== group)) {
      throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `params.consumer: handle "${handle}" already names another consumer on this connection; use a new handle`);
    }
    const joined = this.#joinGroup(streamKey(streamKey(domain, name), group));
    this.#consumers.set(handle, { domain, name, group });
    const undo = (): void => {
      if (existing === undefined) this.#consumers.delete(handle);
      if (joined) this.#groupsJoined?.delete(joined);
    };
    const head = await this.#context.store.head();
    try {
      this.#host.recheck('consume', 'consume', domain);
    } catch (error) {
      undo();
      throw error;
    }
    try {
      const spec = { group, concurrency: options.concurrency, retry: options.retry };
      await this.#context.dispatcher.addConsumer(this.#host, handle, domain, name, spec, options.ordered === undefined ? {} : { ordered: options.ordered });
    } catch (error) {
      undo();
      throw error;
    }
    return head;
  }

  /** Resolves once the consumer registrations under way now are done; undefined when none is (Peer.consumersRegistered). */
  consumersRegistered(): Promise<void> | undefined {
    const running = [...(this.#inProgressMade ?? [])].filter(([key]) => key.startsWith('c:')).map(([, done]) => done);
    return running.length === 0 ? undefined : Promise.all(running).then(noop);
  }

  /**
   * Counts a group this connection registers a consumer in; returns its key when it is new here
   * (taken back if the registration fails), undefined when the connection joined it before. Throws
   * E_EVENTFLOW_LIMIT_EXCEEDED past EVENTFLOW_MAX_GROUPS_PER_CONNECTION, before anything is stored.
   */
  #joinGroup(key: string): string | undefined {
    const joined = (this.#groupsJoined ??= new Set());
    if (joined.has(key)) return undefined;
    const { maxGroups } = this.#context.limits;
    if (joined.size >= maxGroups) {
      throw limitExceeded('EVENTFLOW_MAX_GROUPS_PER_CONNECTION', maxGroups, 'consume: this connection has registered consumers in as many consumer groups as allowed; use a connection per worker, or fewer groups');
    }
    joined.add(key);
    return key;
  }

  /** Unregisters consumer `handle`; its open deliveries go to other consumers. */
  removeConsumer(handle: string): Promise<void> {
    return this.#inOrder(`c:${handle}`, async () => {
      this.#consumers.delete(handle);
      await this.#context.dispatcher.removeConsumer(this.#host, handle);
    });
  }

  /**
   * The gateway ended consumer `handle` (its group was deleted on another gateway): removed as by
   * removeConsumer, its open deliveries revoked (the client did not ask, so it is told of each). False
   * when it was not registered here (the client removed it meanwhile): nothing to tell.
   */
  endConsumer(handle: string): boolean {
    const registered = this.#consumersMade?.delete(handle) ?? false;
    // From the dispatcher whatever this map said: a member left there would record the group again.
    void this.#context.dispatcher.removeConsumer(this.#host, handle, true);
    return registered;
  }

  /**
   * Registers wait `handle`; `after` also matches an outcome already stored after that position. Known
   * at once, the wait is registered in this turn (request-waits.ts needs it so); still being read (an
   * `afterId`), the handle's later frames wait for it (#inOrder).
   */
  wait(handle: string, domain: string, pid: string, names: string[], after: number | undefined | Promise<number>, request?: string): Promise<void> {
    const key = `w:${handle}`;
    if (typeof after !== 'object' && !this.#inProgressMade?.has(key)) return this.#registerWait(handle, domain, pid, names, after, request);
    // Awaited below, perhaps only after an earlier frame of the handle: its refusal is not unhandled meanwhile.
    if (typeof after === 'object') after.catch(noop);
    return this.#inOrder(key, async () => this.#registerWait(handle, domain, pid, names, await after, request));
  }

  async #registerWait(handle: string, domain: string, pid: string, names: string[], after: number | undefined, request?: string): Promise<void> {
    this.#host.recheck('wait', 'subscribe', domain);
    // Counted against EVENTFLOW_MAX_SUBSCRIPTIONS until it is waited (sendWaited) or cancelled.
    this.#waits.add(handle);
    await this.#context.dispatcher.addWait(this.#host, handle, domain, pid, names, after, request);
  }

  /** Cancels wait `handle`; after its registration when that is still in progress. */
  cancelWait(handle: string): Promise<void> | undefined {
    return this.#afterInProgress(`w:${handle}`, () => {
      this.#waits.delete(handle);
      this.#context.dispatcher.cancelWait(this.#host, handle);
    });
  }

  /** `remove` now (undefined), or after the frames of `key` in progress (their promise). */
  #afterInProgress(key: string, remove: () => void): Promise<void> | undefined {
    if (this.#inProgressMade?.has(key)) return this.#inOrder(key, async () => remove());
    remove();
    return undefined;
  }
}

const noop = (): void => undefined;
