import type { ErrorCode, StoredEvent } from '@eventflow/core';

/** What the dispatcher needs from a connection (connection/session.ts is the one in the gateway). */
export interface Peer {
  readonly id: string;
  sendEvent(event: StoredEvent, names: string[]): void;
  /** An event for pattern subscriptions `handles` of this peer (delivery/patterns.ts); optional for peers that hold none. */
  sendMatched?(event: StoredEvent, handles: string[]): void;
  /** `dataText`: JSON.stringify(event.data), where the store has it (Claimed.dataText). */
  sendDelivery(consumer: string, delivery: string, attempt: number, event: StoredEvent, dataText?: string): void;
  sendWaited(wait: string, event: StoredEvent): void;
  /** The wait's request event failed to be consumed (E_EVENTFLOW_CONSUMER_FAILED); optional for peers without waits. */
  sendWaitFailed?(wait: string, domain: string, message: string, details: Record<string, unknown>): void;
  sendDeleted(domain: string, pid: string, id: string | undefined): void;
  /** The delivery is no longer open (its lease expired); optional for peers that hold no consumers. */
  sendRevoked?(delivery: string): void;
  /**
   * The gateway ends the peer's consumer `handle` (its group was deleted on another gateway): the
   * connection drops its registration (which removes it here, its open deliveries revoked) and tells
   * its client why (`consumerEnded`). Optional: without it the dispatcher removes the consumer itself.
   */
  endConsumer?(handle: string, code: ErrorCode, message: string, details: Record<string, unknown>): void;
  /** Whether the peer's token may consume the domain: a settle of a delivery sent to another connection is taken only then. */
  mayConsume?(domain: string): boolean;
  /**
   * Resolves once the peer's consumer registrations under way are done (undefined: none is): a client
   * back after a reconnect registers its consumers, then sends the settles its old connection lost,
   * which go by the retry policy of its member of the group.
   */
  consumersRegistered?(): Promise<void> | undefined;
  /** Logs a line this peer can cause once per event, counted per condition (Session.note); else the dispatcher logs it. */
  note?(condition: string, level: 'info' | 'warn', message: string, fields: Record<string, unknown>): void;
}
