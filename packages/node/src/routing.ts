/**
 * Consumer routing: an object's `onEventName` methods consume the matching events of a domain.
 * The name transform is v4's (eventflow-v4.md §8.13) with the same result for every name it
 * could map, but a name it cannot map is refused with a coded error instead of a TypeError, an
 * event without a handler method is marked failed instead of success, and the method cache is
 * keyed by (domain, name) without v4's `domain + "." + name` collisions. v4's `onError` marked an
 * event success whenever it returned, so a hook that only logged (the usual one) turned every
 * failure into a success; here it marks success only when it says so (`return 'success'`).
 */
import {
  EventflowError,
  type ConsumeContext,
  type ConsumeOptions,
  type Consumer,
  type EventflowClient,
  type EventMap,
  type StoredEvent,
} from '@eventflow/core';
import { describeIssues, identifier } from '@eventflow/core/protocol';

type DomainOf<M extends EventMap> = Extract<keyof M, string>;
type NameOf<M extends EventMap, D extends DomainOf<M>> = Extract<keyof M[D], string>;

/** What `onError` returns to mark the event success after all: it handled the failure itself. */
export const HANDLED = 'success';

/** What routeConsumers needs of a service besides its `onEventName` methods. */
export interface RoutableService {
  /**
   * Called when a handler method throws, with an E_EVENTFLOW_CONSUMER_FAILED error whose `cause`
   * is what the method threw. The event stays failed (returning, e.g. after logging, changes
   * nothing), unless onError returns `'success'`: then it counts as handled and is marked success.
   */
  onError?(error: EventflowError, event: StoredEvent): 'success' | void | Promise<'success' | void>;
}

export interface RoutedConsumers {
  readonly domain: string;
  /** The names consumed (`*` for every name of the domain), without duplicates. */
  readonly names: readonly string[];
  /** Removes exactly the consumers this call registered; other consumers of the domain are untouched. */
  remove(): Promise<void>;
}

type Method = (event: StoredEvent, context: ConsumeContext) => unknown;

const WORD = /[A-Za-z0-9_]/;
const NON_WORD_RUNS = /[^A-Za-z0-9_]+/g;
const NON_ASCII = /[^\x00-\x7f]/u;

/** Why a name cannot be mapped, or undefined when it can. */
function unmappableReason(name: string): string | undefined {
  if (name.length === 0) return 'it is empty';
  const nonAscii = NON_ASCII.exec(name);
  if (nonAscii) return `it contains the non-ASCII character ${JSON.stringify(nonAscii[0])} at index ${nonAscii.index}; only ASCII names can be mapped`;
  const first = name[0] as string;
  if (!WORD.test(first)) return `it starts with ${JSON.stringify(first)}, a non-word character, which leaves an empty first piece`;
  const last = name[name.length - 1] as string;
  if (!WORD.test(last)) return `it ends with ${JSON.stringify(last)}, a non-word character, which leaves an empty last piece`;
  return undefined;
}

/**
 * The method that handles events named `name`: lower-case, every run of non-word characters
 * (word: `[A-Za-z0-9_]`) becomes a piece boundary, each piece's first character upper-cased,
 * joined and prefixed with `on` (`order.placed.v2` → `onOrderPlacedV2`, `UserCreated` →
 * `onUsercreated`). Throws E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE for a name that is empty, has a
 * non-ASCII character, or starts or ends with a non-word character.
 */
export function methodNameFor(name: string): string {
  if (typeof name !== 'string') {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `name: must be a string, got ${typeof name}`);
  }
  const reason = unmappableReason(name);
  if (reason !== undefined) {
    throw new EventflowError(
      'E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE',
      `event name ${JSON.stringify(name)} cannot be mapped to an onEventName method: ${reason}. ` +
        'Rename the event to ASCII word characters [A-Za-z0-9_] separated by other characters, or consume it with client.consume(domain, name, handler).',
      { details: { name, reason } },
    );
  }
  const pieces = name.toLowerCase().replace(NON_WORD_RUNS, ' ').split(' ');
  return `on${pieces.map((piece) => piece.charAt(0).toUpperCase() + piece.slice(1)).join('')}`;
}

/**
 * Bound handler methods per service, then per domain, then per name. Nested maps cannot collide
 * the way v4's `domain + "." + name` keys did (domain `a.b` + name `c` vs domain `a` + name `b.c`).
 */
const methodCache = new WeakMap<object, Map<string, Map<string, Method>>>();

/** The bound method of `service` for events (domain, name); throws a coded error when there is none. */
function methodOf(service: object, domain: string, name: string): Method {
  let byDomain = methodCache.get(service);
  if (!byDomain) methodCache.set(service, (byDomain = new Map()));
  let byName = byDomain.get(domain);
  if (!byName) byDomain.set(domain, (byName = new Map()));
  const cached = byName.get(name);
  if (cached) return cached;

  const methodName = methodNameFor(name);
  if (methodName === 'onError') {
    // `onError` is the service's error hook; treating it as a handler would confuse the two.
    throw new EventflowError(
      'E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE',
      `event name ${JSON.stringify(name)} maps to onError, which is reserved for the error hook. Rename the event or consume it with client.consume(domain, name, handler).`,
      { details: { domain, name, method: methodName } },
    );
  }
  // Own and inherited members count (v4's `in` test); missing methods are not cached, so a
  // method added later is found.
  let member: unknown;
  try {
    member = methodName in service ? Reflect.get(service, methodName) : undefined;
  } catch (cause) {
    // A getter (or a Proxy's trap) that throws: its error escaped routeConsumers without a code, and under '*' it failed
    // the event in the getter's own words, which did not say a method lookup was the cause.
    throw new EventflowError(
      'E_EVENTFLOW_CONSUMER_HANDLER_MISSING',
      `no handler for ${domain} › ${name}: reading ${methodName} of the service ${describeService(service)} threw (${messageOf(cause)}). Make ${methodName} a method, or a getter that returns one without throwing.`,
      { cause, details: { domain, name, method: methodName } },
    );
  }
  if (typeof member !== 'function') {
    const found = member === undefined ? 'has no such method' : `has ${methodName} but it is a ${typeof member}, not a function`;
    throw new EventflowError(
      'E_EVENTFLOW_CONSUMER_HANDLER_MISSING',
      `no handler for ${domain} › ${name}: the service ${describeService(service)} ${found}. Add ${methodName}(event, context), or leave ${JSON.stringify(name)} out of the consumed names.`,
      { details: { domain, name, method: methodName } },
    );
  }
  const bound = (member as Method).bind(service);
  byName.set(name, bound);
  return bound;
}

function describeService(service: object): string {
  const name = (service.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' && name !== 'Object' ? name : 'object';
}

/**
 * What a method threw, in words: an Error's or a library's rejection object's `message`, else the value (JSON for a
 * plain object). String() alone made `{ message: 'from a library' }` "[object Object]", and `new Error()` said nothing
 * at all; String() of an object without a prototype, or whose toString throws, throws itself.
 */
function messageOf(error: unknown): string {
  try {
    const message = typeof error === 'object' && error !== null ? (error as { message?: unknown }).message : undefined;
    if (typeof message === 'string' && message !== '') return message;
    if (error instanceof Error) return `${error.name} (thrown with an empty message)`;
    return (typeof error === 'object' && error !== null ? JSON.stringify(error) : undefined) ?? String(error);
  } catch {
    try {
      return Object.prototype.toString.call(error);
    } catch {
      return 'a value that cannot be described';
    }
  }
}

/** Calls the method; a throw goes to the service's onError when it has one. */
async function invoke(service: RoutableService, domain: string, event: StoredEvent, context: ConsumeContext, method: Method): Promise<void> {
  try {
    await method(event, context);
    return;
  } catch (cause) {
    const methodName = methodNameFor(event.name);
    const details = { domain, name: event.name, id: event.id, pid: event.pid, method: methodName };
    const failure = new EventflowError(
      'E_EVENTFLOW_CONSUMER_FAILED',
      `${methodName} failed for event ${event.id} (${domain} › ${event.name}): ${messageOf(cause)}`,
      { cause, details },
    );
    const onError: unknown = service.onError;
    if (typeof onError !== 'function') throw failure;
    let verdict: unknown;
    try {
      verdict = await (onError as NonNullable<RoutableService['onError']>).call(service, failure, event);
    } catch (handlerError) {
      throw new EventflowError(
        'E_EVENTFLOW_CONSUMER_FAILED',
        `${methodName} failed for event ${event.id} (${domain} › ${event.name}), and onError threw too: ${messageOf(handlerError)}`,
        { cause: handlerError, details: { ...details, consumerError: failure } },
      );
    }
    // Only an explicit 'success' forgives: a hook that logs and returns must not hide the failure.
    if (verdict !== HANDLED) throw failure;
  }
}

function validate(value: unknown, field: string): void {
  const parsed = identifier.safeParse(value);
  if (!parsed.success) throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', describeIssues(parsed.error, field));
}

/**
 * Consumes `names` of `domain` so that each event calls `service[methodNameFor(event.name)](event,
 * context)`, bound to the service. Resolving marks the event success; throwing marks it failed,
 * unless the service's `onError(error, event)` returns `'success'`.
 *
 * Explicit names are all checked before anything is registered: an unmappable name
 * (E_EVENTFLOW_CONSUMER_NAME_UNMAPPABLE) or a missing method (E_EVENTFLOW_CONSUMER_HANDLER_MISSING)
 * rejects the call. With `*`, one consumer takes every name of the domain, and an event whose name
 * cannot be mapped or has no method is marked failed with that code. `options` are the consumers'
 * (ConsumeOptions without `signal`): `group` makes them members of that consumer group (default: the
 * default group of each (domain, name)); `concurrency`, `ordered` and `retry` apply to each.
 */
export async function routeConsumers<M extends EventMap, D extends DomainOf<M>, S extends object>(
  client: EventflowClient<M>,
  domain: D,
  service: S & RoutableService,
  names: NameOf<M, D> | '*' | ReadonlyArray<NameOf<M, D> | '*'>,
  options: Omit<ConsumeOptions, 'signal'> = {},
): Promise<RoutedConsumers> {
  if (typeof (client as { consume?: unknown } | null)?.consume !== 'function') {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', 'client: must be an eventflow client (createNodeClient or createClient)');
  }
  validate(domain, 'domain');
  if ((typeof service !== 'object' && typeof service !== 'function') || service === null) {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', `service: must be an object with onEventName methods, got ${service === null ? 'null' : typeof service}`);
  }
  const list: readonly string[] = typeof names === 'string' ? [names] : names;
  if (!Array.isArray(list) || list.length === 0) {
    throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', 'names: must be an event name, "*", or a non-empty array of them');
  }
  list.forEach((name, i) => validate(name, typeof names === 'string' ? 'names' : `names.${i}`));
  if (options.group !== undefined) validate(options.group, 'options.group');
  const unique = [...new Set(list)];
  // Explicit names are checked up front, so a bad one registers nothing.
  for (const name of unique) if (name !== '*') methodOf(service, domain, name);

  const handler = async (event: StoredEvent, context: ConsumeContext): Promise<void> => {
    // Throws the coded error for an unmappable name or a missing method: the event is failed.
    const method = methodOf(service, domain, event.name);
    await invoke(service, domain, event, context, method);
  };
  // The handler takes any stored event of the domain; the generic M only narrows what callers pass.
  const untyped = client as unknown as EventflowClient<EventMap>;
  const results = await Promise.allSettled(unique.map((name) => untyped.consume(domain, name, handler, { ...options })));

  const consumers = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failed = results.findIndex((result) => result.status === 'rejected');
  if (failed >= 0) {
    await Promise.allSettled([
      ...consumers.map((consumer) => consumer.remove()),
      // A consume() that rejected may still be remembered by the client; take it back off too.
      ...unique.map((name, i) => (results[i]?.status === 'rejected' ? untyped.removeConsumer(domain, name, handler) : Promise.resolve())),
    ]);
    throw (results[failed] as PromiseRejectedResult).reason;
  }
  return routed(domain, unique, consumers);
}

function routed(domain: string, names: readonly string[], consumers: readonly Consumer[]): RoutedConsumers {
  let removed: Promise<void> | undefined;
  return {
    domain,
    names,
    remove() {
      removed ??= (async () => {
        const results = await Promise.allSettled(consumers.map((consumer) => consumer.remove()));
        const rejected = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
        if (rejected) throw rejected.reason;
      })();
      return removed;
    },
  };
}
