/**
 * Tracing for a browser client, opt-in: `createBrowserClient(url, { tracing })`. Events then carry
 * the W3C trace context of the active span of the application's OpenTelemetry SDK (a `publish`
 * span per write, a `request` span per request()), and consume handlers run in a span whose parent
 * is the publisher's. It imports `@opentelemetry/api`, the application's own (an optional peer
 * dependency), so that a bundle without tracing carries neither it nor this module.
 */
import * as api from '@opentelemetry/api';
import { otelTracing, type ClientTracing } from '@eventflow/core';

export const tracing: ClientTracing = otelTracing(api);
