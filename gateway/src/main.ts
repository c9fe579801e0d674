#!/usr/bin/env node
/**
 * `eventflow-gateway`: starts a gateway configured from EVENTFLOW_* environment variables;
 * `eventflow-gateway hub` starts a hub. Only the argument parsing and the signal handlers are
 * imported up front: --help answers at once, and a signal during start-up is handled.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseGatewayArgs, type GatewayCommand } from './cli-args.js';
import { packageRoot } from './package-root.js';
import { stopOnSignals } from './shutdown.js';
import { exitCodes, explainStartupFailure } from './startup-failure.js';

// Not a top-level await: the bundle the bin runs is one CommonJS script, whose compiled code V8 can
// cache from one start to the next (scripts/bundle-gateway.mjs). A rejection ends the process (exit 1).
void run(parseGatewayArgs(process.argv.slice(2)));

async function run(command: GatewayCommand): Promise<void> {
  switch (command.kind) {
    case 'help':
      process.stdout.write(command.usage);
      break;
    case 'version': {
      const manifest = JSON.parse(readFileSync(new URL('package.json', packageRoot), 'utf8')) as { version: string };
      process.stdout.write(`eventflow-gateway ${manifest.version}\n`);
      break;
    }
    case 'usage-error': {
      const { setting } = command;
      // Loaded only here: the variable's name is checked against the configuration's, never guessed.
      const known = setting !== undefined && (await import('./config.js')).isConfigVariable(setting.variable);
      const example = known ? `; e.g. ${setting.variable}=${setting.value ?? '…'} eventflow-gateway` : '';
      process.stderr.write(`eventflow-gateway: ${command.problem}${example}\n\n${command.usage}`);
      process.exitCode = exitCodes.usage;
      break;
    }
    case 'hub': {
      const { runHubCli } = await import('./v4/hub/main.js');
      await runHubCli();
      break;
    }
    case 'gateway':
      await runGateway();
      break;
  }
}

/**
 * Whether the standard OpenTelemetry variables ask for traces to be exported: an OTLP endpoint, or
 * OTEL_TRACES_EXPORTER=otlp; never with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
 */
function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = env.OTEL_TRACES_EXPORTER?.split(',').map((name) => name.trim().toLowerCase());
  if (exporters?.includes('none')) return false;
  return exporters?.includes('otlp') || !!env.OTEL_EXPORTER_OTLP_ENDPOINT || !!env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
}

async function runGateway(): Promise<void> {
  const signals = stopOnSignals('gateway');
  const bundledDemo = fileURLToPath(new URL('../demo/dist', packageRoot));
  // The SDK first, so that the gateway finds it registered when it starts (tracing.ts); imported only when asked for.
  const sdk = tracingRequested(process.env) ? (await import('./tracing-sdk.js')).startTracingSdk(process.env) : undefined;
  const flush = (): Promise<void> => sdk?.shutdown().catch(() => undefined) ?? Promise.resolve();
  const { startGateway } = await import('./server/gateway.js');
  const starting = startGateway(
    { ...(existsSync(bundledDemo) ? { EVENTFLOW_DEMO_DIR: bundledDemo } : {}), ...process.env },
    // The line for a person comes first on stderr, before the JSON log line with the details.
    {
      onStartFailure: (error) => process.stderr.write(`${explainStartupFailure(error, 'gateway').line}\n`),
      onConfigWarning: (line) => process.stderr.write(`eventflow gateway: ${line}\n`),
    },
  );
  // A signal during start-up closes the gateway as soon as it is up.
  // Then the spans still buffered are exported.
  // A stop whose store did not take back the leases ends as failed (exit 1), once the rest of it is done.
  const stop = async (gateway: Awaited<typeof starting>): Promise<void> => {
    await gateway.close();
    if (gateway.leasesHeldAtStop !== undefined) throw gateway.leasesHeldAtStop;
  };
  signals.stopWith(() => starting.then(stop, () => undefined).finally(flush));
  try {
    const gateway = await starting;
    if (signals.signal !== undefined) return;
    const { gatewayBanner } = await import('./banner.js');
    process.stdout.write(gatewayBanner(gateway));
  } catch (error) {
    process.exit(explainStartupFailure(error, 'gateway').exitCode);
  }
}
