/**
 * @peculiar/x509 resolves its algorithm providers through tsyringe, which refuses to load unless a
 * Reflect metadata API exists ("tsyringe requires a reflect polyfill"). We do not ship
 * reflect-metadata, so this installs the four functions tsyringe calls, and only when absent (a
 * real polyfill loaded earlier wins). It must be imported before '@peculiar/x509'; the
 * certificate modules do so, so import them (not the library) first.
 */
type Key = unknown;
type Target = object;

const store = new WeakMap<Target, Map<Key, unknown>>();

function own(target: Target, create: boolean): Map<Key, unknown> | undefined {
  let map = store.get(target);
  if (!map && create) {
    map = new Map();
    store.set(target, map);
  }
  return map;
}

const reflect = Reflect as unknown as Record<string, unknown>;

if (typeof reflect.getMetadata !== 'function') {
  const getOwnMetadata = (key: Key, target: Target): unknown => own(target, false)?.get(key);
  const getMetadata = (key: Key, target: Target): unknown => {
    for (let current: Target | null = target; current; current = Object.getPrototypeOf(current) as Target | null) {
      const map = own(current, false);
      if (map?.has(key)) return map.get(key);
    }
    return undefined;
  };
  const defineMetadata = (key: Key, value: unknown, target: Target): void => {
    own(target, true)?.set(key, value);
  };
  reflect.getOwnMetadata = getOwnMetadata;
  reflect.getMetadata = getMetadata;
  reflect.defineMetadata = defineMetadata;
  reflect.hasMetadata = (key: Key, target: Target): boolean => getMetadata(key, target) !== undefined;
  reflect.metadata = (key: Key, value: unknown) => (target: Target) => defineMetadata(key, value, target);
}

export {};
