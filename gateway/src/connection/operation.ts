/**
 * The seam between a connection and the operations it runs: what an operation may ask of its
 * connection (`Connection`, which session.ts implements) and the operation's own type. Operations
 * depend on this interface, not on the Session class, which imports them back to run them.
 */
import type { ConsumeOptions } from './registrations.js';
import type { OperationName, Result, StoredEvent } from '@eventflow/core';
import type { Peer } from '../delivery/peer.js';
import type { PatternFilter } from '../delivery/patterns.js';
import type { ConditionLevel } from '../condition-log.js';
import type { LogFields } from '../log.js';
import type { Action } from './auth.js';
import type { RequestScope, SessionContext } from './context.js';
import type { Params } from './frames.js';

/** A connection as its operations see it: its context, its rights, and its registrations (the connection owns them; operations ask). */
export interface Connection extends Peer {
  readonly id: string;
  readonly context: SessionContext;
  /** Whether the connection holds a valid token (always, without authentication). */
  readonly authenticated: boolean;
  /** The stored event `id` for `op`, which needs `action` on its domain; an event the connection may not know of is answered as an unknown id. */
  eventFor(op: OperationName, action: Action, id: string): Promise<StoredEvent>;
  /** Throws as the request's own check would when the connection may no longer do `action` on `domain` (after an await). */
  recheck(op: OperationName, action: Action, domain: string): void;
  /** Whether the connection may know that events of `domain` exist, for an operation needing `action` there. */
  knows(action: Action, domain: string): boolean;
  /** The domain patterns the rights allow `action` on now; undefined when every domain (a `*` grant). */
  patterns(action: Action): readonly string[] | undefined;
  /** Whether the connection's rights allow `action` on `domain` now (on some domain without one). */
  may(action: Action, domain?: string): boolean;
  /** Replaces the connection's rights with those of `token`, dropping registrations they no longer cover. */
  authenticate(token: string): Promise<void>;
  note(condition: string, level: ConditionLevel, message: string, fields?: LogFields): void;
  /** `after` still being read (a promise): the stream's later frames wait for this registration. */
  subscribe(domain: string, name: string, after: number | undefined | Promise<number | undefined>): Promise<number>;
  /** A promise when the removal waits for the registration in progress. */
  unsubscribe(domain: string, name: string): Promise<void> | undefined;
  subscribePattern(handle: string, filter: PatternFilter, after: number | undefined): Promise<number>;
  unsubscribePattern(handle: string): Promise<void> | undefined;
  consume(handle: string, domain: string, name: string, options: ConsumeOptions): Promise<number>;
  removeConsumer(handle: string): Promise<void>;
  /** `after` still being read (a promise): the handle's later frames wait for this registration. */
  wait(handle: string, domain: string, pid: string, names: string[], after: number | undefined | Promise<number>, request?: string): Promise<void>;
  /** A promise when the cancel waits for the handle's registration in progress. */
  cancelWait(handle: string): Promise<void> | undefined;
  /** Before publishing event `id`: a request()'s wait for it being registered or refused on this connection (request-waits.ts), to be awaited; undefined when there is none. */
  requestWait(id: string): Promise<void> | undefined;
}

export type Operation<O extends OperationName> = (session: Connection, params: Params<O>, request: RequestScope) => Promise<Result<O>>;
export type Operations = { [O in OperationName]: Operation<O> };
