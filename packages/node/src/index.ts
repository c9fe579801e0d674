/**
 * @eventflow/node: the core client over WebSocket for Node (`ws`, its socket corked per turn: websocket.ts), graceful shutdown
 * on signals, consumer routing to `onEventName` methods, and (as the `eventflow` bin) a small CLI.
 */
import { consuming, EventflowClient, EventflowError, iterating, v4Reads, waiting, type ClientOptions, type EventMap } from '@eventflow/core';
import { closeOnSignals, defaultSignals } from './signals.js';
import { nodeWebSocketConnector } from './websocket.js';
import { nodeTracing } from './tracing.js';

export * from '@eventflow/core';
export { methodNameFor, routeConsumers, type RoutableService, type RoutedConsumers } from './routing.js';

export interface NodeClientOptions extends ClientOptions {
  /**
   * Close the client when the process gets one of these signals (`true`: SIGINT and SIGTERM), let
   * in-flight consume handlers finish, then exit 0. A second signal exits 1 at once. Default false.
   */
  closeOnSignals?: boolean | NodeJS.Signals[];
}

/** Unregisters its signal handlers when closed, so a closed client leaves the default behaviour. */
class NodeEventflowClient<M extends EventMap> extends EventflowClient<M> {
  #release: (() => void) | undefined;

  constructor(url: string | URL, options: ClientOptions, signals: readonly NodeJS.Signals[]) {
    super(nodeWebSocketConnector(url), options);
    if (signals.length > 0) this.#release = closeOnSignals(this, signals);
  }

  override close(...args: Parameters<EventflowClient<M>['close']>): Promise<void> {
    const closed = super.close(...args);
    // Released after the drain: a signal arriving meanwhile must still wait for it, not kill the process.
    void closed.finally(() => this.#release?.());
    return closed;
  }
}

/** A client over WebSocket (`ws://host:port/`), with optional graceful shutdown on SIGINT/SIGTERM. */
export function createNodeClient<M extends EventMap = EventMap>(url: string | URL, options: NodeClientOptions = {}): EventflowClient<M> {
  const { closeOnSignals: signals = false, ...clientOptions } = options;
  let list: readonly NodeJS.Signals[];
  if (signals === true) list = defaultSignals;
  else if (signals === false || signals === undefined) list = [];
  else if (Array.isArray(signals) && signals.every((signal) => typeof signal === 'string' && /^SIG[A-Z0-9]+$/.test(signal))) list = signals;
  else throw new EventflowError('E_EVENTFLOW_INVALID_INPUT', 'closeOnSignals: must be true, false or an array of signal names such as ["SIGINT", "SIGTERM"]');
  // Node workers consume and wait: every feature, unless options.features says otherwise.
  // Traced through OpenTelemetry once the application registers an SDK (tracing.ts), unless told otherwise.
  const tracing = clientOptions.tracing ?? nodeTracing;
  return new NodeEventflowClient<M>(url, { ...clientOptions, tracing, features: clientOptions.features ?? [consuming, waiting, v4Reads, iterating] }, list);
}
