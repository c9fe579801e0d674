#!/usr/bin/env node
/** `eventflow-gateway`: starts a gateway configured from EVENTFLOW_* environment variables; `eventflow-gateway hub` starts a hub. */
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { EventflowError } from '@eventflow/core';
import { startGateway } from './server.js';
import { stopOnSignals } from './shutdown.js';

const bundledDemo = fileURLToPath(new URL('../../demo/dist', import.meta.url));

if (process.argv[2] === 'hub') {
  // `eventflow-gateway hub`: the v4-compatible TLS hub instead of the gateway.
  const { runHubCli } = await import('./hub/hub-main.js');
  await runHubCli();
} else {
  try {
    const gateway = await startGateway({
      ...(existsSync(bundledDemo) ? { EVENTFLOW_DEMO_DIR: bundledDemo } : {}),
      ...process.env,
    });
    const metrics = gateway.config.EVENTFLOW_METRICS === 'on' ? `\n  metrics: ${gateway.httpUrl}metrics` : '';
    process.stdout.write(`eventflow gateway ${gateway.id}\n  clients: ${gateway.url}\n  health:  ${gateway.httpUrl}healthz, ${gateway.httpUrl}readyz${metrics}\n`);
    stopOnSignals('gateway', () => gateway.close());
  } catch (error) {
    // startGateway has logged why (a JSON line on stderr); this line is for a reader of a terminal.
    const message = error instanceof EventflowError ? error.code : 'see the log above';
    process.stderr.write(`eventflow gateway failed to start (${message})\n`);
    process.exit(1);
  }
}
