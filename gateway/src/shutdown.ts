/**
 * Graceful stop on SIGINT/SIGTERM for the CLI entries. The handlers are installed before anything
 * starts: a signal that arrives during start-up (a hub that has already written its `hub` row, a
 * gateway that has opened its store) stops what is starting instead of killing the process with
 * its row still marked online. The first signal closes once and exits 0 (1 if closing failed); a
 * second one exits 1 at once, unless it comes within REPEAT_MS of the first: that is the same stop
 * delivered twice. Ctrl-C under `npm start` is: the terminal signals the gateway's process group,
 * and npm forwards the signal it got to its script's process, the gateway (its `exec`).
 */

/** A signal this soon after the first is the same stop, not a second one. */
const REPEAT_MS = 1_000;
export interface SignalStop {
  /** The first signal received, if any. */
  readonly signal: string | undefined;
  /** What a signal stops: called at once if a signal already came, else on the first signal. */
  stopWith(close: () => Promise<void>): void;
}

export function stopOnSignals(what: string): SignalStop {
  let signal: string | undefined;
  let signalledAt = 0;
  let close: (() => Promise<void>) | undefined;
  let closing = false;
  const run = (): void => {
    if (closing || !close || signal === undefined) return;
    closing = true;
    process.stdout.write(`${signal}: stopping ${what}\n`);
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  const onSignal = (name: string): void => {
    if (signal !== undefined) {
      if (performance.now() - signalledAt < REPEAT_MS) return;
      process.stderr.write(`${name} again: exiting without finishing the stop of ${what}\n`);
      process.exit(1);
    }
    signal = name;
    signalledAt = performance.now();
    run();
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  return {
    get signal() {
      return signal;
    },
    stopWith(stop) {
      close = stop;
      run();
    },
  };
}
