/**
 * The outbox's types and its seam with the browser client. Types only: the client imports them
 * without importing the outbox, so an application that does not create one does not ship it.
 */
import type { EventflowClient, EventflowError, EventInput, PublishOptions, State, StoredEvent } from '@eventflow/core';

/** A write waiting in the outbox (IndexedDB), oldest first. */
export interface OutboxEntry {
  /** Order of queuing, shared by every tab of the origin (IndexedDB's key generator). */
  readonly seq: number;
  /** The event's id: resending it never stores it twice. */
  readonly id: string;
  readonly op: 'publish' | 'schedule';
  readonly event: Readonly<EventInput> & { readonly id: string };
  /** `publish` with `expectedVersion`: checked by the gateway when the entry is sent. */
  readonly expectedVersion?: number;
  /** `schedule`: when the event fires (ISO-8601). */
  readonly at?: string;
  /** When it was queued (ms since the epoch); entries older than `maxAge` are rejected, not sent. */
  readonly queued: number;
  /** JSON length of the event: what counts against `maxBytes`. */
  readonly bytes: number;
  /**
   * Who queued it (`identityOf` the client's token): it is sent, shown and counted only by a client
   * whose token speaks for the same identity. Absent (entries queued before it was recorded): ''.
   */
  readonly identity?: string;
}

/** An entry the gateway refused (or that expired): it was removed and its effect rolled back. */
export interface OutboxRejection {
  readonly entry: OutboxEntry;
  /** E_EVENTFLOW_VERSION_CONFLICT, E_EVENTFLOW_FORBIDDEN, E_EVENTFLOW_INVALID_INPUT, E_EVENTFLOW_OUTBOX_EXPIRED, … */
  readonly error: EventflowError;
}

/** `client.outbox`: what is queued, what was rejected, and a way to drop an entry. */
export interface Outbox {
  /** Entries not yet acknowledged, oldest first (every tab's). */
  readonly entries: readonly OutboxEntry[];
  /** The latest rejections (at most 50), oldest first. */
  readonly rejections: readonly OutboxRejection[];
  /** Calls `listener` after every change of `entries` or `rejections`; returns the function that stops it. */
  subscribe(listener: () => void): () => void;
  /**
   * Removes a queued entry (for every tab); false when `entries` does not list it (any more). An
   * entry the sender (this tab or another) is sending, or has just sent, may still be stored.
   */
  drop(id: string): Promise<boolean>;
  /** Forgets a rejection (all of them without `id`). */
  dismiss(id?: string): void;
  /** Settles once the entries stored by earlier pages are loaded. */
  readonly loaded: Promise<void>;
}

/** `publish`/`schedule` options with an outbox. */
export interface OutboxPublishOptions extends PublishOptions {
  /**
   * Resolve once the gateway has stored the event (or reject with its refusal), as without the
   * outbox; by default the call resolves once the entry is in IndexedDB.
   */
  ack?: boolean;
}

/** What the browser client gives its outbox. */
export interface OutboxHost {
  readonly client: Pick<EventflowClient, 'call' | 'state' | 'onStateChange'>;
  /** The token the client's connection uses (a callback's latest answer, awaited until its first). */
  readonly token: () => Promise<string | undefined>;
  /** The cache name: names the outbox's database, lock and channel. */
  readonly name: string;
  readonly report: (error: unknown) => void;
  /** The pending events of (domain, pid) changed: views of it are shown again. */
  readonly changed: (domain: string, pid: string) => void;
}

/** What the browser client uses of its outbox. */
export interface OutboxEngine extends Outbox {
  /** Queues a write (`date`: when a scheduled event fires); resolves with its id once it is stored (acknowledged with `ack`). */
  enqueue(op: OutboxEntry['op'], event: unknown, options: OutboxPublishOptions | undefined, date?: unknown): Promise<string>;
  /** `state` (confirmed up to `position`) with the pending publishes of (domain, pid) applied, and those entries. */
  overlay(domain: string, pid: string, state: State, position: number): [State, readonly OutboxEntry[]];
  /** An event seen stored (live or fetched): a queued entry with its id is shown as confirmed from its position on. */
  seen(event: StoredEvent): void;
  close(): void;
}

/** What `createOutbox()` returns, for `createBrowserClient(url, { outbox })`. */
export interface OutboxPlugin {
  attach(host: OutboxHost): OutboxEngine;
}
