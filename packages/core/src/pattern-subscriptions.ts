/**
 * The client's pattern subscriptions (subscribePattern): per (pattern, names, pid) a gateway handle,
 * its listeners and its position, registered again on every connection from that position. Made
 * by the first pattern value subscribed (namespace-pattern.ts), so that a bundle that never calls
 * `namespacePattern` leaves this module out. Mount/unmount/mount is serialised per key, as for
 * subscriptions (registrations.ts).
 */
import { notify } from './connection.js';
import type { FeaturePart } from './features.js';
import type { Params, ServerFrame } from './protocol.js';
import { handles, registration, type AnyListener, type RegistrationHost } from './registrations.js';
import { assertIdentifier, assertNames } from './validate.js';

/** A pattern subscription's filter, as sent in subscribePattern. */
export type PatternParams = Omit<Params<'subscribePattern'>, 'subscription' | 'after'>;

/** The checked filter of a pattern subscription: `names` a name, a list or `*`, `pid` a pid pattern. */
export function patternParams(pattern: string, names: string | readonly string[], pid: string | undefined): PatternParams {
  const list = typeof names === 'string' ? [names] : [...names];
  assertNames(list);
  if (pid !== undefined) assertIdentifier(pid, 'options.pid');
  return { pattern, ...(list.includes('*') ? {} : { names: list }), ...(pid === undefined ? {} : { pid }) };
}

/** One pattern subscription; it stays until the gateway has dropped it. */
interface Entry {
  readonly handle: string;
  readonly params: PatternParams;
  readonly listeners: Set<AnyListener>;
  position?: number;
}

/** 0x1F occurs in no identifier or pattern. */
const keyOf = ({ pattern, names, pid }: PatternParams): string => ['pattern', pattern, names?.join('\u001f') ?? '*', pid ?? ''].join('\u001f\u001f');

export class PatternSubscriptions implements FeaturePart {
  readonly #host: RegistrationHost;
  readonly #byKey = new Map<string, Entry>();
  readonly #byHandle = new Map<string, Entry>();

  readonly #handle = handles('p');

  constructor(host: RegistrationHost) {
    this.#host = host;
  }

  opened(): void {
    for (const key of this.#byKey.keys()) void this.#host.chain(key, () => this.#reconcile(key));
  }

  async subscribe(params: PatternParams, listener: AnyListener, signal: AbortSignal | undefined): Promise<void> {
    const host = this.#host;
    const key = keyOf(params);
    let entry = this.#byKey.get(key);
    if (!entry) {
      entry = { handle: this.#handle(), params, listeners: new Set() };
      this.#byKey.set(key, entry);
      this.#byHandle.set(entry.handle, entry);
    }
    entry.listeners.add(listener);
    const done = host.registered.has(key) && !host.chains.has(key) ? undefined : host.waiters.wait(key, 'subscribe', signal);
    void host.chain(key, () => this.#reconcile(key));
    await registration(done, () => this.unsubscribe(params, listener));
  }

  async unsubscribe(params: PatternParams, listener: AnyListener): Promise<void> {
    const key = keyOf(params);
    if (this.#byKey.get(key)?.listeners.delete(listener)) await this.#host.chain(key, () => this.#reconcile(key));
  }

  /** A part of its client, as a feature's (features.ts): it owns the `matched` frames. */
  frame(frame: ServerFrame): void {
    if (frame.type !== 'matched') return;
    const { event, subscriptions } = frame;
    for (const handle of subscriptions) {
      const entry = this.#byHandle.get(handle);
      // Resumed subscriptions may overlap with what was already delivered: skip by position.
      if (!entry || event.position <= (entry.position ?? -1)) continue;
      entry.position = event.position;
      notify(entry.listeners, event, this.#host.onError);
    }
  }

  async #reconcile(key: string): Promise<void> {
    const host = this.#host;
    const entry = this.#byKey.get(key);
    if (!entry || !host.isOpen()) return;
    const forget = (): void => {
      this.#byKey.delete(key);
      this.#byHandle.delete(entry.handle);
    };
    try {
      if (entry.listeners.size > 0 && !host.registered.has(key)) {
        const result = await host.send('subscribePattern', { ...entry.params, subscription: entry.handle, after: entry.position });
        if (!result) return;
        entry.position ??= result.head;
        host.registered.add(key);
        host.waiters.settle(key);
        // Its listeners may all have left while the request was in flight.
        if (entry.listeners.size === 0) await this.#reconcile(key);
      } else if (entry.listeners.size > 0) host.waiters.settle(key);
      else if (!host.registered.has(key)) forget();
      else if (await host.send('unsubscribePattern', { subscription: entry.handle })) {
        host.registered.delete(key);
        if (entry.listeners.size === 0) forget();
        else await this.#reconcile(key);
      }
    } catch (error) {
      host.refused(key, error, () => void this.#reconcile(key));
    }
  }
}
