import type { ServerFrame, StoredEvent } from '@eventflow/core';

/**
 * The event frames encoded for the event handed out last, by their names. A fan-out hands one
 * event to every subscribed connection in a row (delivery/fan-out.ts), so each event is encoded
 * once per distinct `names` instead of once per subscriber. Events are not mutated once stored.
 * Module-wide on purpose: the cache is shared by every connection of the process.
 */
let encodedFor: StoredEvent | undefined;
const encoded = new Map<string, string>();

export function encodeEvent(event: StoredEvent, names: string[]): string {
  if (encodedFor !== event) {
    encodedFor = event;
    encoded.clear();
  }
  // A cache key of the names (not a stream key): 0x1F cannot occur in a name.
  const key = names.length === 1 ? (names[0] as string) : names.join('\u001f');
  let frame = encoded.get(key);
  if (frame === undefined) {
    frame = JSON.stringify({ type: 'event', names, event } satisfies ServerFrame);
    encoded.set(key, frame);
  }
  return frame;
}
