export * from '@eventflow/core';
// The browser's (it brings eventlogStates() too), instead of core's.
export { iterating } from './iterating.js';
export { BrowserClient, createBrowserClient, type BrowserClientOptions, type EventlogSnapshot } from './browser-client.js';
export { VERSION as CACHE_VERSION } from './cache.js';
export type { Outbox, OutboxEntry, OutboxPlugin, OutboxPublishOptions, OutboxRejection } from './outbox-types.js';
