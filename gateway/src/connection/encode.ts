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

/**
 * A `delivery` frame. With `dataText`, JSON.stringify(event.data) as the store read it (Claimed.dataText),
 * spliced in rather than written again from the parsed data: in a drain, serialising the data of each
 * job's frame cost the gateway's thread more than anything else of ours outside SQLite. The frame is
 * JSON.stringify's byte for byte (event-text test) for events in the SQLite store's key order.
 */
export function encodeDelivery(consumer: string, delivery: string, attempt: number, event: StoredEvent, dataText?: string): string {
  if (dataText === undefined) return JSON.stringify({ type: 'delivery', consumer, delivery, attempt, event } satisfies ServerFrame);
  const { position, id, timestamp, domain, rid, pid, name, traceparent, tracestate } = event;
  let text = `{"type":"delivery","consumer":${JSON.stringify(consumer)},"delivery":${JSON.stringify(delivery)},"attempt":${attempt},"event":{"position":${position},"id":${JSON.stringify(id)},"timestamp":${JSON.stringify(timestamp)},"domain":${JSON.stringify(domain)},"rid":${rid === null ? 'null' : JSON.stringify(rid)},"pid":${JSON.stringify(pid)},"name":${JSON.stringify(name)},"data":${dataText}`;
  if (traceparent !== undefined) text += `,"traceparent":${JSON.stringify(traceparent)}`;
  if (tracestate !== undefined) text += `,"tracestate":${JSON.stringify(tracestate)}`;
  return `${text}}}`;
}
