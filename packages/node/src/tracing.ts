/**
 * Tracing for Node clients without a line of set-up: once the application has registered an
 * OpenTelemetry SDK (a global tracer provider, which `@opentelemetry/api` keeps under a symbol on
 * globalThis), the client loads the API and traces through it (otelTracing). Until then, and in
 * applications without OpenTelemetry, it loads nothing and adds nothing to an event.
 */
import { createRequire } from 'node:module';
import { otelTracing, type ClientTracing, type OtelApi } from '@eventflow/core';

/** Where `@opentelemetry/api` 1.x keeps what the application registered (its tracer provider under `trace`). */
const OTEL_GLOBAL = Symbol.for('opentelemetry.js.api.1');

let loaded: ClientTracing | undefined | null;

/** The API's tracing once an SDK registered a tracer provider; undefined before (checked again at the next event). */
function current(): ClientTracing | undefined {
  if (loaded !== undefined) return loaded ?? undefined;
  if (!(globalThis as Record<symbol, { trace?: unknown } | undefined>)[OTEL_GLOBAL]?.trace) return undefined;
  try {
    // The application's copy (a peer dependency): CommonJS or ESM, both share the registered globals.
    loaded = otelTracing(createRequire(import.meta.url)('@opentelemetry/api') as OtelApi);
  } catch {
    // Registered through a copy of the API this package cannot resolve: no tracing, and no retry per event.
    loaded = null;
  }
  return loaded ?? undefined;
}

/** ClientTracing that follows the process's OpenTelemetry registration (see above). */
export const nodeTracing: ClientTracing = {
  write: (op, event, send) => current()?.write(op, event, send) ?? send(),
  request: (event, run) => current()?.request(event, run) ?? run(),
  consume: (event, attempt, run) => {
    const tracing = current();
    return tracing ? tracing.consume(event, attempt, run) : run();
  },
};
