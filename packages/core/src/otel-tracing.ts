/**
 * ClientTracing (client-tracing.ts) over OpenTelemetry's API, which the application passes in (its
 * own `@opentelemetry/api`: core imports no OpenTelemetry package, so that the SDK the application
 * registered is the one used, and applications without it load nothing).
 *
 * Spans, named and attributed after OpenTelemetry's messaging conventions:
 * - `publish <domain>` (`persist`, `schedule`; PRODUCER) from the call to the gateway's answer, a
 *   child of the caller's active span; the event carries its context.
 * - `request <domain>` (CLIENT) from request() to its outcome; the request event carries its context.
 * - `consume <domain>` (CONSUMER) around a consume handler, a child of the event's traceparent (the
 *   publisher's span) and the active span while it runs, so that what the handler publishes (its
 *   outcome) continues the trace.
 * Without an SDK the API hands out spans with an invalid context: nothing is added to the event.
 */
import type { ClientTracing, OutgoingEvent } from './client-tracing.js';
import type { StoredEvent } from './protocol.js';
import { formatTraceparent, parseTraceparent } from './trace-context.js';

/** What this module uses of `@opentelemetry/api` (structurally, so that core needs none of its types). */
export interface OtelContext {
  getValue(key: symbol): unknown;
}
export interface OtelSpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: { serialize(): string };
}
type Attributes = Record<string, string | number | boolean>;
export interface OtelSpan {
  spanContext(): OtelSpanContext;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: Error | string): void;
  end(): void;
}
export interface OtelApi {
  trace: {
    getTracer(name: string, version?: string): { startSpan(name: string, options?: { kind?: number; attributes?: Attributes }, context?: OtelContext): OtelSpan };
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
    setSpanContext(context: OtelContext, spanContext: OtelSpanContext): OtelContext;
  };
  context: { active(): OtelContext; with<F extends () => ReturnType<F>>(context: OtelContext, fn: F): ReturnType<F> };
  createTraceState(raw?: string): { serialize(): string };
  ROOT_CONTEXT: OtelContext;
}

/** OpenTelemetry's SpanKind and SpanStatusCode values. */
const CLIENT = 2;
const PRODUCER = 3;
const CONSUMER = 4;
const ERROR = 2;

/** The event's attributes (OpenTelemetry messaging conventions, and ours). */
const attributes = (event: OutgoingEvent | StoredEvent, operation: string): Attributes => ({
  'messaging.system': 'eventflow',
  'messaging.operation.name': operation,
  'messaging.destination.name': event.domain,
  'messaging.message.id': event.id ?? '',
  'eventflow.event.name': event.name,
  'eventflow.pid': event.pid,
});

/** A ClientTracing over the application's `@opentelemetry/api` (`import * as api from '@opentelemetry/api'`). */
export function otelTracing(api: OtelApi): ClientTracing {
  const tracer = api.trace.getTracer('@eventflow/core');

  /** Adds the span's context to the event (nothing when it is invalid: no SDK registered). */
  const stamp = (event: OutgoingEvent, span: OtelSpan): void => {
    const { traceId, spanId, traceFlags, traceState } = span.spanContext();
    const traceparent = formatTraceparent(traceId, spanId, traceFlags);
    if (!parseTraceparent(traceparent)) return;
    event.traceparent = traceparent;
    const state = traceState?.serialize();
    if (state) event.tracestate = state;
  };

  const spanOf = (event: OutgoingEvent, op: string, kind: number): OtelSpan =>
    tracer.startSpan(`${op} ${event.domain}`, { kind, attributes: attributes(event, op) }, api.context.active());

  return {
    write(op, event, send) {
      // Given explicitly: the application's own context, sent as it is.
      if (event.traceparent !== undefined) return send();
      const span = spanOf(event, op, PRODUCER);
      stamp(event, span);
      return ended(span, send());
    },
    request(event, run) {
      if (event.traceparent !== undefined) return run();
      const span = spanOf(event, 'request', CLIENT);
      stamp(event, span);
      return ended(span, run());
    },
    consume(event, attempt, run) {
      const parent = remoteParent(api, event);
      const span = tracer.startSpan(`consume ${event.domain}`, { kind: CONSUMER, attributes: { ...attributes(event, 'process'), 'eventflow.delivery.attempt': attempt } }, parent);
      let result: ReturnType<typeof run>;
      try {
        result = api.context.with(api.trace.setSpan(parent, span), run);
      } catch (error) {
        failed(span, error);
        span.end();
        throw error;
      }
      if (result instanceof Promise) return ended(span, result) as ReturnType<typeof run>;
      span.end();
      return result;
    },
  };
}

/** The publisher's span as a remote parent, or the root (a new trace) when the event has none. */
function remoteParent(api: OtelApi, event: StoredEvent): OtelContext {
  const parent = parseTraceparent(event.traceparent);
  if (!parent) return api.ROOT_CONTEXT;
  return api.trace.setSpanContext(api.ROOT_CONTEXT, {
    traceId: parent.traceId,
    spanId: parent.spanId,
    traceFlags: parent.flags,
    isRemote: true,
    ...(event.tracestate ? { traceState: api.createTraceState(event.tracestate) } : {}),
  });
}

/** Ends the span when `work` settles, with the error status when it rejects. */
async function ended<T>(span: OtelSpan, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    failed(span, error);
    throw error;
  } finally {
    span.end();
  }
}

function failed(span: OtelSpan, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: ERROR, message: error instanceof Error ? error.message : String(error) });
}
