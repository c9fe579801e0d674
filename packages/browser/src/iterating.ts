/**
 * The browser's `iterating` feature: core's (events()) plus the async queue that
 * `eventlogStates()` is built on, so that a browser bundle without it carries neither. It has
 * core's name: passed in `features`, core's client makes its part from it as from core's value.
 */
import { createAsyncQueue, iterating as coreIterating, type ClientFeature, type Iterating } from '@eventflow/core';

export const iterating: ClientFeature<'iterating', Iterating> & { readonly queue: typeof createAsyncQueue } =
  // Pure: a bundle that does not use it drops it (and the queue) although it reads core's value.
  /* @__PURE__ */ Object.assign({ queue: createAsyncQueue }, coreIterating);
