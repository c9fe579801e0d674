/**
 * The client's tracing seam: what the client asks of a tracer when it writes an event, makes a
 * request() or runs a consume handler. The client itself knows nothing of OpenTelemetry: an
 * implementation comes with ClientOptions.tracing (otel-tracing.ts over `@opentelemetry/api`;
 * @eventflow/node passes one by itself when an OpenTelemetry SDK is registered, browsers import it
 * from `@eventflow/browser/tracing`), so that a bundle without it carries none of this.
 */
import type { EventInput, StoredEvent } from './protocol.js';

/** An event on its way out: the client's own copy, to which a tracer adds `traceparent` and `tracestate`. */
export type OutgoingEvent = EventInput & { id: string };

export interface ClientTracing {
  /** A publish, persist or schedule: `send` sends it, after the tracer has added its trace context to `event`. */
  write<T>(op: 'publish' | 'persist' | 'schedule', event: OutgoingEvent, send: () => Promise<T>): Promise<T>;
  /** request(): `run` registers the wait, publishes `event` and resolves with the outcome. */
  request<T>(event: OutgoingEvent, run: () => Promise<T>): Promise<T>;
  /** A consume handler's run for `event`, in the context of the event's publisher. */
  consume<T>(event: StoredEvent, attempt: number, run: () => T): T;
}

/** Options that give an event's trace context explicitly (PROTOCOL.md › Event input); a tracer then adds none of its own. */
export interface TraceOptions {
  /** A W3C `traceparent` (`00-<trace id>-<span id>-<flags>`). */
  traceparent?: string;
  /** A W3C `tracestate`, with a `traceparent` only. */
  tracestate?: string;
}
