/**
 * Work asked for by NATS messages (or the embedded router's polls of a store another gateway writes,
 * elsewhere.ts), per key (a domain's pull): at most one run in flight and one more asked for. A message only says "read the store again", so asking while a run is in flight
 * needs exactly one more run after it (the one in flight may have read before the news), and any
 * number of asks meanwhile is that same one. A burst of N messages therefore costs at most two
 * store reads per key, whoever sends them (issue 23: a client of the same NATS server flooding a
 * subject once cost one query per message), and the state is one entry per key in flight.
 */
export class Coalescer {
  /** Key → whether another run was asked for while this one is in flight. */
  readonly #inFlight = new Map<string, boolean>();
  readonly #onError: (key: string, error: unknown) => void;
  /** Runs started, for tests and stats. */
  runs = 0;

  constructor(onError: (key: string, error: unknown) => void) {
    this.#onError = onError;
  }

  /** Runs `work` now, or once more after the run of `key` in flight. */
  ask(key: string, work: () => Promise<unknown>): void {
    if (this.#inFlight.has(key)) {
      this.#inFlight.set(key, true);
      return;
    }
    this.#inFlight.set(key, false);
    void (async () => {
      do {
        this.#inFlight.set(key, false);
        this.runs += 1;
        try {
          await work();
        } catch (error) {
          this.#onError(key, error);
        }
      } while (this.#inFlight.get(key) === true);
      this.#inFlight.delete(key);
    })();
  }
}
