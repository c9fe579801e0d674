/**
 * Turns of the event loop for the store reads a client can make long: every page of a subscription
 * replay (plain or pattern), and every request whose answer has no bound (frames.ts unboundedReads,
 * held until answered), waits for a turn here, gateway-wide. A turn is handed out in a
 * `setImmediate`, at most one per turn of the event loop and round-robin over connections, so
 * that between two pages the loop reads sockets and answers other clients' requests.
 *
 * Why: on SQLite a read is synchronous, and an `await` of it resumes in a microtask; a replay
 * that sends nothing (a pattern matching no event of the pages it reads) is not held back by the
 * client either, so 100 of them read a million rows without letting the loop take one frame in
 * (another client's read waited 21 s). Round-robin per connection, not per replay: a connection
 * with 100 replays gets the share of a connection with one.
 *
 * How much a connection may read without sending is its own budget (replay.ts,
 * EVENTFLOW_MAX_SCAN_RATE); this module only orders the reads.
 */

/** A turn to read one page; `done` once the page is read (before sending it: a slow client must not hold the turn). */
export type Done = () => void;

export class ReadTurns {
  /** Connection → its waiting reads; the Map's order is the round-robin order. */
  readonly #waiting = new Map<object, Array<(done: Done) => void>>();
  readonly #atOnce: number;
  #running = 0;
  #scheduled = false;

  /** `atOnce`: reads in flight at once (an asynchronous store reads them in parallel; SQLite's take one turn each anyway). */
  constructor(atOnce: number) {
    this.#atOnce = atOnce;
  }

  /** Resolves, in a later turn of the event loop, once `owner` may read a page; call `done` when it has. */
  take(owner: object): Promise<Done> {
    return new Promise((resolve) => {
      let queue = this.#waiting.get(owner);
      if (!queue) this.#waiting.set(owner, (queue = []));
      queue.push(resolve);
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#running >= this.#atOnce || this.#waiting.size === 0) return;
    this.#scheduled = true;
    setImmediate(() => this.#handOut());
  }

  #handOut(): void {
    this.#scheduled = false;
    const first = this.#waiting.entries().next();
    if (first.done) return;
    const [owner, queue] = first.value;
    this.#waiting.delete(owner);
    const next = queue.shift();
    // The connection goes to the back of the line with what it still waits for.
    if (queue.length > 0) this.#waiting.set(owner, queue);
    if (!next) return this.#schedule();
    this.#running++;
    let ended = false;
    next(() => {
      if (ended) return;
      ended = true;
      this.#running--;
      this.#schedule();
    });
    // Scheduled from inside this check phase, the next hand-out runs in the next turn, after the poll for I/O.
    this.#schedule();
  }
}
