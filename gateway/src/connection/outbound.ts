/** A connection's outbound frames: the one write path (slow clients cut off, metrics counted) and the error frames. */
import type { EventflowError, ServerFrame, ServerTransport } from '@eventflow/core';
import type { ConditionLog } from '../condition-log.js';
import { REQUEST_ANSWER_HOLD_MS } from '../defaults.js';
import { logRefusal } from '../refusal-log.js';
import type { SessionContext } from './context.js';
import type { Refusal } from './frames.js';

/** A transport that can write a frame many connections get without framing it again per connection (server/ws-transport.ts). */
export interface SharingTransport extends ServerTransport {
  sendShared?(frame: string): void;
  /** `urgent`: another party waits on the frame, so it may leave ahead of other connections' answers (server/ws-transport.ts). */
  send(frame: string, urgent?: boolean): void;
}

/** Frames another party is waiting on: a job's delivery, a subscription's event, a wait's outcome. */
const URGENT: ReadonlySet<ServerFrame['type']> = new Set(['delivery', 'event', 'waited', 'waitFailed']);

/** What the write path needs of its session. */
export interface OutboundOptions {
  transport: SharingTransport;
  context: SessionContext;
  conditions: ConditionLog;
  /** The session is closing, or its rights ended (the timer may run late): nothing more is sent. */
  stopped(): boolean;
  /** The session's own close, for a client too slow. */
  close(code: number, reason: string): void;
}

export class Outbound {
  readonly #o: OutboundOptions;
  /** Frames held back by `hold`, sent before the connection's next frame. */
  #held: ServerFrame[] = [];
  /** Sends the frames `holdBriefly` held when nothing else has by then. */
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(options: OutboundOptions) {
    this.#o = options;
  }

  send(frame: ServerFrame): void {
    if (!this.#o.stopped()) this.frame(JSON.stringify(frame), frame.type, frame.type === 'delivery' ? frame.attempt : 1);
  }

  /** `send` of a frame already encoded (encode.ts): `type` and `attempt` are the frame's. */
  sendEncoded(frame: string, type: ServerFrame['type'], attempt = 1): void {
    if (!this.#o.stopped()) this.frame(frame, type, attempt);
  }

  /**
   * Sends `frame` right before the connection's next frame. For a request()'s wait answer whose
   * publish came in behind it (request-waits.ts › takeAnswer): its client does not wait for it
   * (welcome.waitsInOrder), and the publish is always answered, so it leaves in one write with that
   * answer, after the event's commit and delivery, rather than in a write (and a wake-up of the
   * client) of its own ahead of them.
   */
  hold(frame: ServerFrame): void {
    this.#held.push(frame);
  }

  /**
   * Sends `frame` right before the connection's next frame, or within REQUEST_ANSWER_HOLD_MS at the
   * latest. For the answer to a request()'s publish: its client waits for the outcome as well, which
   * usually follows within a few ms, and the two then leave in one write (one write and one wake-up
   * of the client less per request); a slower outcome finds the answer sent, well inside any timeout.
   */
  holdBriefly(frame: ServerFrame): void {
    this.#held.push(frame);
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#release();
    }, REQUEST_ANSWER_HOLD_MS);
    this.#timer.unref();
  }

  #release(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#held.length === 0) return;
    const held = this.#held;
    this.#held = [];
    for (const frame of held) this.send(frame);
  }

  /** `type` and `attempt` only feed the metrics: event frames arrive here already encoded (encode.ts). */
  frame(frame: string, type: ServerFrame['type'] = 'event', attempt = 1): void {
    this.#release();
    if (this.#admit(type, attempt)) this.#o.transport.send(frame, URGENT.has(type));
  }

  /** A fan-out's event frame, the same string for every subscribed connection (encode.ts): the transport may frame it once for all. */
  sharedEvent(frame: string): void {
    this.#release();
    if (!this.#admit('event')) return;
    const { transport } = this.#o;
    if (transport.sendShared) transport.sendShared(frame);
    else transport.send(frame, true);
  }

  /** Whether a frame may go out now; a client too slow is closed instead (and counted). */
  #admit(type: ServerFrame['type'], attempt = 1): boolean {
    if (!this.keepingUp(type)) return false;
    this.#o.context.metrics.sent(type, attempt);
    return true;
  }

  /**
   * Whether the connection may still be sent to: not stopped, and its client has taken what was sent
   * before, up to EVENTFLOW_MAX_BUFFERED_BYTES. A client too slow is closed (4008) instead. Asked before
   * each frame, and before a read whose answer has no bound is made for the connection (session.ts).
   */
  keepingUp(type: ServerFrame['type'] = 'result'): boolean {
    const { transport, context, conditions } = this.#o;
    // Rights that ended a moment ago (the timer may run late) close the connection before this frame.
    if (this.#o.stopped()) return false;
    if (transport.bufferedAmount <= context.maxBufferedBytes) return true;
    // A client that cannot keep up is cut off rather than letting gateway memory grow; it resumes from its positions.
    conditions.note('slow client', 'warn', 'client too slow; disconnecting', { buffered: transport.bufferedAmount });
    context.metrics.dropped(type);
    this.#o.close(4008, 'client too slow');
    return false;
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
