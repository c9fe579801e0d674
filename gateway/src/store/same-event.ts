/** The idempotency rule both stores apply to a retried append. */
import type { JsonValue, StoredEvent } from '@eventflow/core';
import type { NewEvent } from './store.js';

/**
 * Whether `stored` is `incoming` appended before: same domain, name, pid, rid and data. Data is
 * compared as JSON with sorted keys, so a retry whose keys arrive in another order still matches.
 */
export function isSameEvent(stored: StoredEvent, incoming: NewEvent): boolean {
  return (
    stored.domain === incoming.domain &&
    stored.name === incoming.name &&
    stored.pid === incoming.pid &&
    stored.rid === (incoming.rid ?? null) &&
    canonicalJson(stored.data) === canonicalJson(incoming.data)
  );
}

function canonicalJson(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key] as JsonValue)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
