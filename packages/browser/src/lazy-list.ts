/**
 * A lazy list: a real array (Array.isArray, length, indexing, iteration, every Array method,
 * JSON.stringify, spread) whose items are made by `at(i)` only when first used, so a warm read of
 * a long eventlog parses the cached chunks a view touches instead of all of them. It is a Proxy
 * over a sparse array: reading an index fills it; listing the keys or changing the list fills
 * them all first, after which it is a plain array behind a proxy. structuredClone and postMessage
 * refuse proxies: they need a copy (`[...list]`).
 */

/**
 * Every trap (Reflect has one function per trap): those that list or change the list (ownKeys,
 * set, setPrototypeOf, defineProperty, deleteProperty, preventExtensions) fill it; the others
 * (has, getOwnPropertyDescriptor, …) read one index at most.
 */
const traps = Object.getOwnPropertyNames(Reflect) as Array<keyof typeof Reflect>;
const changes = /^[osdp]/;

/** How each lazy list reads its items (filling them): a list made of another reads it without its proxy. */
const sources = new WeakMap<object, (index: number) => unknown>();

/** `length` items, item `i` made by `at(i)` when first used (items are never undefined). */
export function lazyList<T extends object>(length: number, at: (index: number) => T): T[] {
  const items = new Array<T | undefined>(length);
  let full = false;
  const item = (index: number): T | undefined => (full ? items[index] : (items[index] ??= at(index)));
  const use = (key: PropertyKey): void => {
    const index = typeof key == 'string' ? +key : -1;
    if (index >= 0 && index < length && !(index % 1)) item(index);
  };
  // for…of, spread and Array.from without a trap per step (Array's iterator reads length and each
  // index through the proxy). Until the list is changed (`full`), it has `length` items.
  function* iterate(): Generator<T | undefined> {
    for (let i = 0; i < items.length; i++) yield item(i);
  }
  const handler: Record<string, (target: typeof items, key: PropertyKey, ...rest: unknown[]) => unknown> = {};
  for (const trap of traps) {
    const fills = changes.test(trap);
    handler[trap] = (target, key, ...rest) => {
      if (!fills) use(key);
      else if (!full) {
        for (let i = 0; i < length; i++) item(i);
        full = true;
      }
      return (Reflect[trap] as (...args: unknown[]) => unknown)(target, key, ...rest);
    };
  }
  handler.get = (target, key) => (key === Symbol.iterator ? iterate : (use(key), target[key as never]));
  const list = new Proxy(items, handler as ProxyHandler<typeof items>) as T[];
  sources.set(list, item);
  return list;
}

/** `a` then `b` (or the first `size` of those items) as a lazy list, read from them when first used. */
export function concat<T extends object>(a: readonly T[], b: readonly T[], size = a.length + b.length): T[] {
  const n = a.length;
  const first = (sources.get(a) ?? ((i: number) => a[i])) as (index: number) => T;
  return lazyList(size, (i) => (i < n ? first(i) : b[i - n]!));
}
