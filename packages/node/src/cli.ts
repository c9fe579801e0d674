#!/usr/bin/env node
/** The `eventflow` bin: see commands.ts, or run `eventflow --help`. */
import { runCli } from './commands.js';

process.exitCode = await runCli(process.argv.slice(2));
