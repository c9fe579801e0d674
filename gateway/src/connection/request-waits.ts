/**
 * request()'s pipelining: a client told `welcome.waitsInOrder` sends a request()'s publish right
 * behind its wait, without waiting for the wait's answer (one round trip less). The gateway reads a
 * connection's frames in order and registers a request()'s wait in the turn its frame is read
 * (operations.ts › wait), so the publish's outcome finds it. What is left is a wait that is
 * refused: the publish of the event it answers waits here for the wait's fate and is refused with
 * the same error, so that nothing is stored that nobody waits for (as when the client waited).
 */
import { EventflowError, type ErrorCode, type OperationName } from '@eventflow/core';

/** Refused waits kept for a publish that may follow (a client that does not pipeline sends none). */
const KEPT = 64;
/** request()s whose wait and publish are both under way, known at most (one each, for a while). */
const WAITS_KEPT = 4096;
/** Longest event id kept as a key (identifiers are shorter: a longer one is refused anyway). */
const MAX_ID = 512;

/** A wait's refusal (its error answer), or undefined once it is registered. */
export type Fate = { readonly code: string; readonly message: string; readonly details?: Record<string, unknown> | undefined } | undefined;

export class RequestWaits {
  /** Event id → its wait's fate: pending while the wait runs; kept when it was refused. */
  readonly #fates = new Map<string, Promise<Fate>>();
  /** Publishes waiting for their wait's fate (`check`), by event id. */
  readonly #behind = new Set<string>();
  /** Publishes that came in behind their wait, which was registered: their answer may wait for its outcome (`takeAnswer`). */
  readonly #registered = new Set<string>();
  /** Event id → the handle of the wait whose request it is, until the publish is answered or the wait ends; and back. */
  readonly #waitOf = new Map<string, string>();
  readonly #requestOf = new Map<string, string>();

  /**
   * A wait arrived (raw params: the event id is picked before validation, which may refuse the
   * wait). Returns what to call with the wait's refusal, or with nothing once it is registered.
   */
  begin(params: unknown): ((refusal: Fate) => void) | undefined {
    const id = (params as { request?: unknown } | null | undefined)?.request;
    if (typeof id !== 'string' || id.length > MAX_ID) return undefined;
    const handle = (params as { wait?: unknown }).wait;
    if (typeof handle === 'string') {
      this.#forget(id);
      this.#waitOf.set(id, handle);
      this.#requestOf.set(handle, id);
      // Bounded: the oldest go first; one forgotten only lets its answer wait the hold's full time.
      for (const key of this.#waitOf.keys()) {
        if (this.#waitOf.size <= WAITS_KEPT) break;
        this.#forget(key);
      }
    }
    let decide!: (fate: Fate) => void;
    const fate = new Promise<Fate>((resolve) => (decide = resolve));
    this.#fates.delete(id);
    this.#fates.set(id, fate);
    return (refusal) => {
      decide(refusal);
      if (refusal === undefined && this.#fates.get(id) === fate) this.#fates.delete(id);
      // Bounded: the oldest refusals go first (a Map iterates in insertion order).
      for (const key of this.#fates.keys()) {
        if (this.#fates.size <= KEPT) break;
        this.#fates.delete(key);
      }
    };
  }

  /** Before a publish of `eventId`: throws its wait's refusal, if it was refused (once). */
  check(eventId: string): Promise<void> | undefined {
    const fate = this.#fates.get(eventId);
    if (!fate) return undefined;
    this.#behind.add(eventId);
    return this.#refuse(eventId, fate);
  }

  /**
   * How the answer to a request goes out, asked once when it is made: a request()'s wait whose
   * publish came in right behind it, with that publish's answer (`hold`: outbound.ts › hold); that
   * publish's answer, once its wait was registered, with the outcome that usually follows within a
   * few ms (outbound.ts › holdBriefly); any other at once (`send`).
   */
  takeAnswer(op: OperationName, params: unknown): 'hold' | 'holdBriefly' | 'send' {
    if (op === 'wait') return this.#behind.has(String((params as { request?: unknown } | null)?.request ?? '')) ? 'hold' : 'send';
    const id = op === 'publish' ? (params as { event?: { id?: unknown } } | null)?.event?.id : undefined;
    if (typeof id !== 'string') return 'send';
    this.#forget(id);
    return this.#registered.delete(id) ? 'holdBriefly' : 'send';
  }

  /**
   * Wait `handle` was answered (or failed) before its request's publish was: that publish's answer
   * has nothing to wait for (an outcome already stored, another publisher's, may come that soon).
   */
  ended(handle: string): void {
    const id = this.#requestOf.get(handle);
    if (id === undefined) return;
    this.#forget(id);
    this.#registered.delete(id);
  }

  #forget(id: string): void {
    const handle = this.#waitOf.get(id);
    if (handle === undefined) return;
    this.#waitOf.delete(id);
    if (this.#requestOf.get(handle) === id) this.#requestOf.delete(handle);
  }

  async #refuse(eventId: string, fate: Promise<Fate>): Promise<void> {
    const refusal = await fate;
    this.#fates.delete(eventId);
    this.#behind.delete(eventId);
    if (!refusal) {
      this.#registered.add(eventId);
      return;
    }
    // A retryable refusal (the store could not register the wait) is the publish's too: nothing was stored, and the client sends it again.
    const details = refusal.details?.retryable === true ? { ...refusal.details, id: eventId, stored: false } : refusal.details;
    throw new EventflowError(refusal.code as ErrorCode, `${refusal.message} (the wait of this request() was refused, so its event was not published)`, { details });
  }
}
