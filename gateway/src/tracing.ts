/**
 * The gateway's spans (README › Tracing), through `@opentelemetry/api`: a write (`publish <domain>`,
 * with `validate`, `store` and `route` inside), a delivery (`deliver <domain>`, from the delivery's
 * start to its settle, with its group and attempt) and a subscription replay (`replay <domain>`). An
 * event's own trace context (its publisher's span) is the parent of its write and of each of its
 * deliveries, so that they sit in the publisher's trace.
 *
 * The API is loaded only when an SDK is registered when the gateway starts (the bin's, tracing-sdk.ts,
 * or an embedding application's): `enableTracing`. Until then `tracer` is undefined and every hook
 * is one test of it: a gateway without OpenTelemetry loads nothing and pays nothing per event.
 * Module-wide on purpose, like the SDK registration it follows (one per process).
 */
import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';
import type { StoredEvent } from '@eventflow/core';
import { parseTraceparent } from '@eventflow/core';

type Api = typeof import('@opentelemetry/api');

/** Where `@opentelemetry/api` 1.x keeps what was registered (its tracer provider under `trace`). */
const OTEL_GLOBAL = Symbol.for('opentelemetry.js.api.1');

let api: Api | undefined;
/** Set once an SDK is registered (enableTracing): the test of every hook below. */
export let tracer: Tracer | undefined;

/** OpenTelemetry's SpanKind and SpanStatusCode values (the enums are in the API, not loaded without it). */
const SERVER = 1;
const PRODUCER = 3;
const ERROR = 2;

/**
 * Loads the API and makes the gateway's tracer when a tracer provider is registered; false (and
 * nothing loaded) otherwise, or when the API cannot be loaded.
 */
export async function enableTracing(): Promise<boolean> {
  if (tracer) return true;
  if (!(globalThis as Record<symbol, { trace?: unknown } | undefined>)[OTEL_GLOBAL]?.trace) return false;
  try {
    api = await import('@opentelemetry/api');
  } catch {
    return false;
  }
  tracer = api.trace.getTracer('@eventflow/gateway');
  return true;
}

/** Forgets the tracer (tests that register and unregister an SDK). */
export function disableTracing(): void {
  tracer = undefined;
}

/** The context of an event's publisher (its traceparent), or the root: a new trace. */
function parentOf(traceparent: unknown, tracestate: unknown): Context {
  const loaded = api as Api;
  const parent = parseTraceparent(traceparent);
  if (!parent) return loaded.ROOT_CONTEXT;
  return loaded.trace.setSpanContext(loaded.ROOT_CONTEXT, {
    traceId: parent.traceId,
    spanId: parent.spanId,
    traceFlags: parent.flags,
    isRemote: true,
    ...(typeof tracestate === 'string' && tracestate ? { traceState: loaded.createTraceState(tracestate) } : {}),
  });
}

const eventAttributes = (event: { id?: unknown; domain?: unknown; name?: unknown; pid?: unknown }): Attributes => {
  const attributes: Attributes = { 'messaging.system': 'eventflow' };
  if (typeof event.domain === 'string') attributes['messaging.destination.name'] = event.domain;
  if (typeof event.id === 'string') attributes['messaging.message.id'] = event.id;
  if (typeof event.name === 'string') attributes['eventflow.event.name'] = event.name;
  if (typeof event.pid === 'string') attributes['eventflow.pid'] = event.pid;
  return attributes;
};

function fail(span: Span, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: ERROR, message });
  if (error instanceof Error) span.recordException(error);
}

/** A write's span and its steps. */
export class WriteTrace {
  readonly #span: Span;
  readonly #context: Context;
  /** The step under way: validate, then store, then route (which may outlast the request). */
  #step: Span | undefined;
  #routing = false;

  constructor(op: string, params: unknown) {
    // The params as sent: the parent is known before they are validated (validation is a step).
    const event = ((params as { event?: unknown } | undefined)?.event ?? {}) as Record<string, unknown>;
    const parent = parentOf(event.traceparent, event.tracestate);
    const domain = typeof event.domain === 'string' ? event.domain : '?';
    this.#span = (tracer as Tracer).startSpan(`${op} ${domain}`, { kind: SERVER, attributes: { ...eventAttributes(event), 'messaging.operation.name': op } }, parent);
    this.#context = (api as Api).trace.setSpan(parent, this.#span);
    this.#step = (tracer as Tracer).startSpan('validate', {}, this.#context);
  }

  /** Ends the step under way and starts `name` (store, route); returns the step's end. */
  step(name: 'store' | 'route'): (error?: unknown) => void {
    this.#step?.end();
    this.#routing = name === 'route';
    const span = (this.#step = (tracer as Tracer).startSpan(name, {}, this.#context));
    return (error?: unknown) => {
      if (error !== undefined) fail(span, error);
      span.end();
      if (this.#step === span) this.#step = undefined;
    };
  }

  /** The request was answered (`error`: refused or failed). A routing step may go on after it. */
  end(error?: unknown, position?: number): void {
    if (!this.#routing) this.#step?.end();
    if (position !== undefined) this.#span.setAttribute('eventflow.position', position);
    if (error !== undefined) fail(this.#span, error);
    this.#span.end();
  }
}

/** A delivery's span: its start (the claim handed it to a member) to its settle, in the publisher's trace. */
export function deliverySpan(event: StoredEvent, group: string, attempt: number, consumer: string, startTime: number): Span | undefined {
  if (!tracer) return undefined;
  return tracer.startSpan(
    `deliver ${event.domain}`,
    {
      kind: PRODUCER,
      startTime,
      attributes: { ...eventAttributes(event), 'messaging.operation.name': 'deliver', 'messaging.consumer.group.name': group, 'eventflow.delivery.attempt': attempt, 'eventflow.consumer': consumer },
    },
    parentOf(event.traceparent, event.tracestate),
  );
}

/** Ends a delivery's span with how it ended (`failure`: why it ended without success). */
export function endDelivery(span: Span | undefined, outcome: string, failure?: string): void {
  if (!span) return;
  span.setAttribute('eventflow.delivery.outcome', outcome);
  if (failure !== undefined) span.setStatus({ code: ERROR, message: failure });
  span.end();
}

/** A subscription replay's span: its pages and events, until it caught up or stopped. */
export function replaySpan(context: Record<string, unknown>, after: number): Span | undefined {
  if (!tracer) return undefined;
  const attributes: Attributes = { 'messaging.system': 'eventflow', 'messaging.operation.name': 'replay', 'eventflow.replay.after': after };
  for (const [key, value] of Object.entries(context)) if (typeof value === 'string') attributes[`eventflow.${key}`] = value;
  const target = typeof context.domain === 'string' ? context.domain : typeof context.pattern === 'string' ? context.pattern : '';
  return tracer.startSpan(`replay ${target}`, { attributes });
}

export { fail as failSpan };
