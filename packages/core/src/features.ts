/**
 * Features of the client whose code an application bundles only when it references them:
 * consuming (consume, removeConsumer, deliveries: consumers.ts), waiting (wait, request:
 * waits.ts), v4Reads (v4's reads and associations few browsers call: v4-reads.ts) and iterating
 * (events(): iterating.ts). The client's API has their methods either way; a feature value passed
 * in `options.features` brings their implementation, so a browser that shows processes and
 * publishes ships none. createClient and createNodeClient pass every feature.
 */
import type { NamespacePattern } from './namespace-pattern.js';
import type { OperationName, Params, Result, ServerFrame, WelcomeFrame } from './protocol.js';
import type { AnyListener, RegistrationHost, Send } from './registrations.js';
import type { RequestOptions } from './requests.js';
import type { ClientTracing } from './client-tracing.js';

type Subscribe = (domain: string | NamespacePattern, name: string | readonly string[], listener: AnyListener, options: { pid?: string }) => Promise<unknown>;

/** What a feature uses of its client. */
export interface FeatureHost extends RegistrationHost {
  /** A request on the current connection, not sent again after a reconnect (settles and removals are the feature's own). */
  request: Send;
  /** The client itself: its `call` (sent again after a reconnect), subscribe and unsubscribe (with a domain or a pattern). */
  client: {
    call<O extends OperationName>(op: O, params: Params<O>, options?: RequestOptions): Promise<Result<O>>;
    subscribe: Subscribe;
    unsubscribe: Subscribe;
  };
  /** True once close() was called (assertRegistrable in validate.ts refuses new work then). */
  closed(): boolean;
  /** ClientOptions.tracing, if any: request() and consume handlers run in its spans. */
  readonly tracing: ClientTracing | undefined;
}

/** A feature at work in one client: the client tells it what happens to its connection. */
export interface FeaturePart {
  /** A new connection (after the client's subscriptions are registered on it). */
  opened?(welcome: WelcomeFrame): void;
  lost?(): void;
  /** Every gateway frame the client itself does not handle; a part ignores those it does not own. */
  frame?(frame: ServerFrame): void;
  /** close(): lets running work finish within `timeout` ms. */
  drain?(timeout: number): Promise<void>;
  /** close(): pending work fails with `error`. */
  close?(error: unknown): void;
}

/** A feature, as passed in `options.features`: its name and how a client makes its part. */
export interface ClientFeature<N extends string = string, P extends FeaturePart = FeaturePart> {
  readonly name: N;
  readonly create: (host: FeatureHost) => P;
}
