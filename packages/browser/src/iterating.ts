/**
 * The browser's `iterating` feature: core's (events()) plus `eventlogStates()` on an async queue,
 * so that a browser bundle without it carries neither. It has core's name: passed in `features`,
 * core's client makes its part from it as from core's value.
 */
import { assertSignal, createAsyncQueue, iterating as coreIterating, type ClientFeature, type Iterating } from '@eventflow/core';
import type { BrowserClient, EventlogSnapshot } from './browser-client.js';

/** `client.eventlogStates(domain, pid, options)` (see BrowserClient). */
export type EventlogStates = (client: Pick<BrowserClient, 'watchEventlogState'>, domain: string, pid: string, options?: { signal?: AbortSignal }) => AsyncIterableIterator<EventlogSnapshot>;

const states: EventlogStates = (client, domain, pid, { signal } = {}) => {
  assertSignal(signal, 'options.signal');
  const queue = createAsyncQueue<EventlogSnapshot>(() => stop(), undefined, signal);
  const stop = client.watchEventlogState(domain, pid, (snapshot) => queue.push(snapshot), (error) => queue.fail(error));
  if (signal?.aborted) void queue.return();
  return queue;
};

export const iterating: ClientFeature<'iterating', Iterating> & { readonly states: EventlogStates } =
  // Pure: a bundle that does not use it drops it (and the queue) although it reads core's value.
  /* @__PURE__ */ Object.assign({ states }, coreIterating);
