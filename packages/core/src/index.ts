// Types only: the zod schemas are in '@eventflow/core/protocol', which no client module imports.
export type {
  ClientFrame,
  ConsumerEndedFrame,
  DeletedFrame,
  DeliveryFrame,
  ErrorFrame,
  EventFrame,
  MatchedFrame,
  EventInput,
  HelloFrame,
  JsonObject,
  JsonValue,
  OperationName,
  Operations,
  Params,
  Position,
  RequestFrame,
  Result,
  ResultFrame,
  RevokedFrame,
  ServerFrame,
  StoredEvent,
  WaitedFrame,
  WelcomeFrame,
} from './protocol.js';
export { PROTOCOL_VERSION } from './protocol-version.js';
export * from './errors.js';
export * from './error-catalog.js';
export * from './transport.js';
export { webSocketConnector, WebSocketTransport } from './websocket-transport.js';
export { backoffDelay, defaultBackoff, type BackoffOptions } from './backoff.js';
export { retry, retryOnConflict, type GenericRetryOptions, type RetryOptions } from './retry.js';
export { generateEventId, generatePid } from './ids.js';
export { streamKey } from './stream-key.js';
export { isWellFormedText, wellFormedText } from './unicode-text.js';
export type { PatternOptions } from './client.js';
export { isNamespacePattern, matchNamespacePattern, namespacePattern, namespacePatternProblem, type NamespacePattern } from './namespace-pattern.js';
export { composeEventlogState, applyEvent, emptyState, freezeState, type State } from './state.js';
export { createAsyncQueue, type AsyncQueue } from './async-queue.js';
// The argument checks the browser and node packages share with the client (coded errors naming the argument).
export { assertFunction, assertNumber, assertOptionalFunction, assertSignal, assertUrl, toIso } from './arguments.js';
export { assertIdentifier, invalid } from './validate.js';
// The browser outbox checks an event when it is queued, as publish does when it is sent.
export { assertEventInput } from './validate.js';
export { notify, type ConnectionState } from './connection.js';
export { DEFAULT_CONSUME_CONCURRENCY, MAX_CONSUME_ATTEMPTS, MAX_CONSUME_CONCURRENCY, MAX_SETTLE_BATCH } from './defaults.js';
export type { RequestOptions } from './requests.js';
export {
  EventflowClient,
  writeParams,
  type ClientOptions,
  type Consumer,
  type ConsumeContext,
  type ConsumeHandler,
  type EventflowEvent,
  type EventMap,
  type EventOf,
  type Feature,
  type Features,
  type Listener,
  type PublishInput,
  type PublishOptions,
  type RequestEventOptions,
  type ConsumeOptions,
  type ConsumeRetry,
  type SubscribeOptions,
  type Subscription,
  type WaitOptions,
} from './client.js';
export type { DomainSummary, EventDelivery, EventFate, GatewayStats, LatencySample, LatencySummary, ProcessSummary, ScheduledSummary } from './protocol-catalog.js';
// The operator's operations are functions of a client, so that a client that never calls them ships none.
export { cancelScheduled, deleteGroup, discardDeadLetter, gatewayStats, listDeadLetters, listDomains, listGroups, listProcesses, listScheduled, readLatency, readTimeline, requeueDeadLetter } from './operator.js';
// The features (ClientOptions.features): only a bundle that references one carries its code.
export { consuming, type Consumers } from './consumers.js';
export { waiting, type Waits } from './waits.js';
export { v4Reads, type V4Reads } from './v4-reads.js';
export { iterating, type Iterating } from './iterating.js';
export type { ClientFeature, FeatureHost, FeaturePart } from './features.js';
// Tracing (ClientOptions.tracing): the seam, its OpenTelemetry implementation, the W3C field rules.
export type { ClientTracing, OutgoingEvent, TraceOptions } from './client-tracing.js';
export { otelTracing, type OtelApi } from './otel-tracing.js';
export { formatTraceparent, parseTraceparent, TRACEPARENT, TRACESTATE_MAX_LENGTH, type TraceParent } from './trace-context.js';
import { EventflowClient, type ClientOptions, type EventMap } from './client.js';
import { consuming } from './consumers.js';
import { waiting } from './waits.js';
import { v4Reads } from './v4-reads.js';
import { iterating } from './iterating.js';
import { webSocketConnector } from './websocket-transport.js';

/** A client over WebSocket (`ws://host:port/`), for browsers and Node alike, with every feature unless `options.features` says otherwise. */
export function createClient<M extends EventMap = EventMap>(url: string | URL, options?: ClientOptions): EventflowClient<M> {
  return new EventflowClient<M>(webSocketConnector(url), { ...options, features: options?.features ?? [consuming, waiting, v4Reads, iterating] });
}
