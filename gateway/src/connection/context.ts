import type { WriteTrace } from '../tracing.js';
import type { Result, WelcomeFrame } from '@eventflow/core';
import type { Dispatcher } from '../delivery/dispatcher.js';
import type { Logger } from '../log.js';
import type { GatewayMetrics } from '../metrics.js';
import type { Router } from '../router/router.js';
import type { EventStore } from '../store/store.js';
import type { Authenticator } from './auth.js';
import type { ConnectionLimits } from './limits.js';
import type { ReadTurns } from './read-turns.js';
import type { Admitted } from '../server/admission.js';

/** What every connection of a gateway shares (server/gateway.ts makes it). */
export interface SessionContext {
  readonly gatewayId: string;
  readonly store: EventStore;
  readonly router: Router;
  readonly dispatcher: Dispatcher;
  readonly log: Logger;
  readonly metrics: GatewayMetrics;
  readonly maxFrameBytes: number;
  /** Announced in `welcome.limits` beside maxFrameBytes, so that clients keep within them. */
  readonly announced?: Omit<WelcomeFrame['limits'], 'maxFrameBytes'>;
  readonly maxBufferedBytes: number;
  /** Live events parked while replays run, per connection (EVENTFLOW_MAX_PARKED_BYTES); beyond, they are re-read from the store. */
  readonly maxParkedBytes: number;
  /** Rows per second a connection's replays may read without sending them (EVENTFLOW_MAX_SCAN_RATE; 0: no bound). */
  readonly maxScanRate: number;
  /** The gateway's turns for replay reads, shared by every connection (read-turns.ts). */
  readonly readTurns: ReadTurns;
  readonly handshakeTimeout: number;
  /**
   * EVENTFLOW_AUTH_TIMEOUT_MS when it applies (jwt without anonymous rights), else 0: a connection
   * without a valid token this long after it opened is closed with 4408.
   */
  readonly authTimeout?: number;
  /** Told when the connection first holds a valid token (server/admission.ts counts those without). */
  readonly admission?: { authenticated(connection: Admitted): void };
  readonly limits: ConnectionLimits;
  /** Verifies tokens and knows the anonymous rights (auth.ts). */
  readonly auth: Authenticator;
  /** EVENTFLOW_SNAPSHOT_EVERY: readEventlogState stores a state snapshot when this many events follow the latest (0: never). */
  readonly snapshotEvery?: number;
  /** Called after a schedule request, so the scheduler can move its timer earlier. */
  scheduled(at: Date): void;
  /** The gateway's figures for the console (server/stats.ts). */
  stats(): Promise<Result<'gatewayStats'>>;
}

/** The request being run: its id (unique on its connection) and a logger whose lines carry it. */
export interface RequestScope {
  readonly id: number;
  readonly log: Logger;
  /** A write's span and its steps, when the gateway traces (tracing.ts). */
  readonly trace?: WriteTrace | undefined;
}

/**
 * The request's logger is made when a line is logged: most requests log nothing. A class, not an
 * object literal with a getter: one is made per request, and the literal cost a closure each.
 */
class Scope implements RequestScope {
  #log: Logger | undefined;

  constructor(
    readonly connection: Logger,
    readonly id: number,
    readonly op: string,
    readonly trace?: WriteTrace,
  ) {}

  get log(): Logger {
    return (this.#log ??= this.connection.child({ request: this.id, op: this.op }));
  }
}

export const requestScope = (connection: Logger, id: number, op: string, trace?: WriteTrace): RequestScope => new Scope(connection, id, op, trace);
