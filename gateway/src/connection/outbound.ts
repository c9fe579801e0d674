/** A connection's outbound frames: the one write path (slow clients cut off, metrics counted) and the error frames. */
import type { EventflowError, ServerFrame, Transport } from '@eventflow/core';
import type { ConditionLog } from '../condition-log.js';
import { logRefusal } from '../refusal-log.js';
import type { SessionContext } from './context.js';
import type { Refusal } from './frames.js';

/** What the write path needs of its session. */
export interface OutboundOptions {
  transport: Transport;
  context: SessionContext;
  conditions: ConditionLog;
  /** The session is closing, or its rights ended (the timer may run late): nothing more is sent. */
  stopped(): boolean;
  /** The session's own close, for a client too slow. */
  close(code: number, reason: string): void;
}

export class Outbound {
  readonly #o: OutboundOptions;

  constructor(options: OutboundOptions) {
    this.#o = options;
  }

  send(frame: ServerFrame): void {
    if (!this.#o.stopped()) this.frame(JSON.stringify(frame), frame.type, frame.type === 'delivery' ? frame.attempt : 1);
  }

  /** `type` and `attempt` only feed the metrics: event frames arrive here already encoded (encode.ts). */
  frame(frame: string, type: ServerFrame['type'] = 'event', attempt = 1): void {
    const { transport, context, conditions } = this.#o;
    // Rights that ended a moment ago (the timer may run late) close the connection before this frame.
    if (this.#o.stopped()) return;
    if (transport.bufferedAmount > context.maxBufferedBytes) {
      // A client that cannot keep up is cut off rather than letting gateway memory grow; it resumes from its positions.
      conditions.note('slow client', 'warn', 'client too slow; disconnecting', { buffered: transport.bufferedAmount });
      context.metrics.dropped(type);
      this.#o.close(4008, 'client too slow');
      return;
    }
    context.metrics.sent(type, attempt);
    transport.send(frame);
  }

  refuse(refusal: Refusal): void {
    this.error(refusal.id, refusal.code, refusal.message, refusal.details);
  }

  coded(id: number | undefined, error: EventflowError): void {
    this.error(id, error.code, error.message, error.details);
  }

  error(id: number | undefined, code: string, message: string, details?: Record<string, unknown>): void {
    this.#o.context.metrics.errorSent(code);
    logRefusal(this.#o.conditions, id, code, message);
    this.send({ type: 'error', ...(id === undefined ? {} : { id }), code, message, ...(details ? { details } : {}) });
  }
}
