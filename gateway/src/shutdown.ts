/** Graceful stop on SIGINT/SIGTERM for the CLI entries: close once, exit 0 (or 1 if closing failed). */
export function stopOnSignals(what: string, close: () => Promise<void>): void {
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`${signal}: stopping ${what}\n`);
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
