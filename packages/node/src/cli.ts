#!/usr/bin/env node
/** The `eventflow` bin: see commands.ts, or run `eventflow --help`. */
import { runCli } from './commands.js';

// `eventflow tail … | head` closes the pipe early: that is the reader's choice, not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

process.exitCode = await runCli(process.argv.slice(2));
